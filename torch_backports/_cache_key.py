"""Naming code-changing backports in inductor's graph cache keys.

The FX graph cache and the AOTAutograd cache key a graph by, among other
things, torch_key(): a hash of torch's source files. A runtime patch does
not change those files, so without help a process with a backport that
changes what inductor generates (Backport.changes_codegen) would load a
graph that stock torch compiled and cached under the same key yesterday,
wrong result and all, and a stock process would load ours.

Both keys are pickles of an FxGraphHashDetails (AOTAutogradCacheDetails is
a subclass that calls its __init__; so from 2.6 to 2.15). This module wraps
FxGraphHashDetails.__init__ so that, while such a backport is applied, the
details carry one more attribute, `torch_backports`: the sorted names of the
applied code-changing backports. With none applied the details, and so the
keys, are exactly stock torch's: nothing is less cached than stock.
Kernel-level caches (triton, autotuning) key by the generated source, which
a code change changes by itself.
"""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Optional, Tuple

from . import _patching, _records, _registry

ATTRIBUTE = "torch_backports"

# Why the wrapper could not be installed; None while it is in place or not
# yet tried. It is tried when the first code-changing backport is applied,
# so a process that needs none pays nothing here.
error: Optional[str] = None
_installed = False


def applied_names() -> Tuple[str, ...]:
    """The applied backports that change generated code, sorted."""
    return tuple(sorted(
        name for name in _registry.names()
        if _records.get(name)[0] == _records.APPLIED and _registry.load(name).changes_codegen))


def install(codecache: ModuleType) -> None:
    """Wrap codecache.FxGraphHashDetails.__init__, or record why not in
    `error`."""
    global error, _installed
    try:
        details = vars(codecache).get("FxGraphHashDetails")
        if not isinstance(details, type) or "__init__" not in vars(details):
            raise _patching.Unrecognised("%s.FxGraphHashDetails.__init__ does not exist"
                                         % codecache.__name__)
        _patching.wrap_attribute(details, "__init__", _name_backports, None, {})
        _installed = True
    except Exception as exc:  # recorded; the backports that need it then refuse
        error = "%s: %s" % (type(exc).__name__, exc)


def _name_backports(wrapped: Callable, instance: object, args: tuple, kwargs: dict) -> None:
    wrapped(*args, **kwargs)
    names = applied_names()
    if names:
        setattr(instance, ATTRIBUTE, names)


def ready() -> Optional[str]:
    """None when the keys will name a code-changing backport applied now;
    otherwise why not. Called as such a backport is applied, which is early
    enough: a key made before it applies belongs to a graph compiled without
    it. Imports codecache, as inductor itself would before its first cache
    lookup, and wraps it the first time."""
    if not _installed and error is None:
        try:
            import torch._inductor.codecache as codecache
        except Exception as exc:
            return "importing torch._inductor.codecache failed: %s: %s" % (
                type(exc).__name__, exc)
        install(codecache)
    if _installed:
        return None
    return error
