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

TypeError and AttributeError are caught by every release. The newest
release (2.15, as 2.13) logs "Failed to pickle cache key" with exc_info on
codecache's logger and raises BypassFxGraphCache("Failed to pickle cache
key") from the error, for a PicklingError or a ValueError. A pybind11 object
never gets that far there: FxGraphCachePickler.reducer_override (2.13,
pytorch#178853) gives a pybind11 enum a key of its type and value, and
bypasses the cache for any other pybind11 object *silently*, with
BypassFxGraphCache("Cannot produce stable cache key for unpicklable type
..."). This patch does what 2.15 does on 2.6 - 2.10, for exactly the errors
each release lets escape: a warning and a bypass for PicklingError and
ValueError, a silent bypass for the pybind11 RuntimeError. It does not give
pybind11 enums a key of their own (they bypass the cache, where 2.15 caches
them): that needs 2.15's reducer_override, which is not backported.

Only FxGraphCachePickler's own keys are converted. AOTAutogradCachePickler
(torch._functorch) inherits dumps, but on 2.6 - 2.10 its caller,
AOTAutogradCache's lookup, already turns every exception into a cache
bypass, silently (an INFO line from 2.9): nothing crashes there, so this
patch leaves it exactly as stock and adds no warning (torch-backports issue
12: a DTensor input's DeviceMesh, whose cycles fast-mode pickling refuses,
made every compile print one). 2.5 and older have a classmethod dumps and
are not covered. The wrapper goes around the whole of the shipped dumps,
whose `finally` resets the stream.
"""

from __future__ import annotations

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


def _refused_type(error: BaseException) -> str:
    """The pybind11 type named in the refusal, '<pybind11_builtins.X object
    at 0x...> is not pickleable.', as 2.15's bypass message names it."""
    text = str(error)
    if text.startswith("<") and " object at " in text:
        return text[1:text.index(" object at ")].rsplit(".", 1)[-1]
    return "pybind11 object"


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
        if type(instance).__module__ != codecache.__name__:
            return wrapped(*args, **kwargs)  # AOTAutogradCachePickler: its caller copes
        try:
            return wrapped(*args, **kwargs)
        except bypass:
            raise
        except Exception as error:
            if _is_pybind11_refusal(error):
                raise bypass("Cannot produce stable cache key for unpicklable type %s"
                             % _refused_type(error)) from error
            if not isinstance(error, escaping):
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
    headline="`BackendCompilerFailed` when the FX graph cache key cannot be pickled",
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
    readme_symptom=(
        "`BackendCompilerFailed` when the FX graph cache key cannot be pickled "
        "(DeviceMesh cycles, pybind11 objects)"
    ),
    readme_fix=(
        "wraps `FxGraphCachePickler.dumps` so that the pickling errors each release lets "
        "escape become a cache bypass, as the newest release does: a warning for a "
        "pickling error or a cycle, silence for a pybind11 object. The AOTAutograd "
        "cache's pickler inherits `dumps` but is passed through as shipped: its lookup "
        "already bypasses quietly on every covered release, so a DTensor's DeviceMesh "
        "adds no warning (its key is `aot-autograd-cache-dtensor-key`'s job). "
        "[pytorch#176532], [pytorch#179597], [pytorch#164682], [vllm#38205]."
    ),
)
