"""Failed pickling of an FX graph cache key bypasses the cache instead of crashing.

Upstream:
  https://github.com/pytorch/pytorch/pull/173577  pybind11 RuntimeError -> bypass
  https://github.com/pytorch/pytorch/issues/164682  OpOverload._op in the key
  https://github.com/pytorch/pytorch/issues/176532  tensor parallel: cyclic ValueError
  https://github.com/pytorch/pytorch/issues/179597  flattened DeviceMesh: cyclic ValueError
  https://github.com/vllm-project/vllm/pull/38205   vLLM's 2.10-only, ValueError-only fix

FxGraphCache.prepare_key catches only BypassFxGraphCache, so any other error
out of FxGraphCachePickler.dumps ends torch.compile with BackendCompilerFailed.
Read from each release's torch/_inductor/codecache.py, the errors that dumps
lets escape are:

  release       pickle.PicklingError  ValueError (fast mode, cycle)  pybind11 RuntimeError
  2.5 and older escapes               cannot occur (no fast mode)    escapes
  2.6 - 2.9     escapes               escapes                        escapes
  2.10          caught                escapes                        escapes
  2.11+         caught                caught                         caught

TypeError and AttributeError are caught by every release. 2.11 logs
"Failed to pickle cache key" with exc_info on codecache's logger and raises
BypassFxGraphCache("Failed to pickle cache key") from the error; this patch
does the same on 2.6 - 2.10, for exactly the errors each one lets escape.
2.5 and older have a classmethod dumps and are not covered. The wrapper goes
around the whole of the shipped dumps, whose `finally` resets the stream.
AOTAutogradCachePickler inherits dumps, so it is covered too.
"""

import inspect
import logging
import pickle
from types import ModuleType
from typing import Callable, Tuple, Type

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "fx-graph-cache-pickling"

_MESSAGE = "Failed to pickle cache key"


def _is_pybind11_refusal(error: BaseException) -> bool:
    """pybind11 objects without pickle support raise a RuntimeError like
    '<pybind11_builtins.... object at 0x...> is not pickleable.'; 2.11 tells
    them from other RuntimeErrors by these two phrases, and so do we."""
    text = str(error)
    return isinstance(error, RuntimeError) and "pybind11" in text and "is not pickleable" in text


def escaping_types(release: Release) -> Tuple[Type[Exception], ...]:
    """The exception types that `release`'s dumps lets escape, besides the
    pybind11 RuntimeError, which every covered release lets escape."""
    if release < (2, 10, 0):
        return (pickle.PicklingError, ValueError)
    return (ValueError,)


def _check_shape(pickler: type) -> Callable:
    """Return the shipped dumps, or raise if it is not the one we know."""
    dumps = pickler.__dict__.get("dumps")
    if dumps is None:
        raise AttributeError("FxGraphCachePickler defines no dumps of its own")
    if getattr(dumps, _patching._WRAPPER_MARK, False):
        raise RuntimeError("FxGraphCachePickler.dumps is already patched")
    if not inspect.isfunction(dumps):
        raise TypeError("FxGraphCachePickler.dumps is a %s, not a function" % type(dumps).__name__)
    if list(inspect.signature(dumps).parameters) != ["self", "obj"]:
        raise TypeError("FxGraphCachePickler.dumps%s is not (self, obj)" % inspect.signature(dumps))
    if not issubclass(pickler, pickle.Pickler):
        raise TypeError("FxGraphCachePickler is no longer a pickle.Pickler")
    return dumps


def apply(codecache: ModuleType, release: Release) -> Revert:
    """Wrap codecache.FxGraphCachePickler.dumps for `release`; return the undo."""
    pickler = codecache.FxGraphCachePickler
    bypass = codecache.BypassFxGraphCache
    if not (isinstance(bypass, type) and issubclass(bypass, Exception)):
        raise TypeError("BypassFxGraphCache is not an exception class")
    _check_shape(pickler)
    escaping = escaping_types(release)
    # The same logger object torch's own `log = logging.getLogger(__name__)`
    # returns, so the warning looks and filters exactly like 2.11's.
    log = logging.getLogger(codecache.__name__)

    def convert(wrapped, instance, args, kwargs):
        try:
            return wrapped(*args, **kwargs)
        except bypass:
            raise
        except Exception as error:
            if not (isinstance(error, escaping) or _is_pybind11_refusal(error)):
                raise
            log.warning(_MESSAGE, exc_info=True)
            raise bypass(_MESSAGE) from error

    return _patching.wrap_attribute(pickler, "dumps", convert, None, {})


# A compile whose cache key holds a cycle, as a DeviceMesh's does: inductor
# hashes the uuid() of the custom post-grad pass into the FX graph cache key.
REPRODUCER = r"""
import shutil, sys
import torch
import torch._inductor.config
from torch._inductor.custom_graph_pass import CustomGraphPass

if not any(map(shutil.which, ("g++", "c++", "clang++"))):
    print("skipped: needs a C++ compiler for inductor's CPU backend")
    sys.exit(77)

class CyclicKey(CustomGraphPass):
    def __call__(self, graph):
        return None

    def uuid(self):
        loop = []
        loop.append(loop)
        return loop

def model(x):
    return torch.sin(x) * 2 + 1

torch._inductor.config.post_grad_custom_post_pass = CyclicKey()
x = torch.arange(8, dtype=torch.float32)
assert torch.allclose(torch.compile(model)(x), model(x))
"""

BACKPORT = Backport(
    name=NAME,
    summary="torch.compile bypasses the FX graph cache, instead of crashing with "
    "BackendCompilerFailed, when the cache key cannot be pickled",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/173577",
        "https://github.com/pytorch/pytorch/issues/176532",
        "https://github.com/pytorch/pytorch/issues/179597",
    ),
    first_affected=(2, 6, 0),
    first_fixed=(2, 11, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="fast mode: can't pickle cyclic objects",
)
