"""Post-import hooks: call a function right after a module has executed.

This is wrapt.importer's design (a finder that, for a module with hooks,
finds the real spec and wraps its loader, so the hooks run right after the
module's code), cut down to what torch-backports needs. It is our own
because wrapt costs too much where it would run: `import wrapt` adds 12.4 M
instructions to `import torch` (callgrind, torch 2.13.0, Python 3.11,
2026-12-04: `import torch; import wrapt` against `import torch` alone), half
of the 0.5 % that torch-backports may add there. wrapt is still what wraps
functions (`_patching.wrap_attribute`), imported only by a backport that
wraps one.

Where the hooked module lies is where the hook listens. A submodule of a
package that was loaded from a file (torch, in every install seen) is found
by importlib's PathFinder, so the hook listens there: PathFinder.find_spec
is replaced by a classmethod that calls it and, for a hooked name only,
wraps the loader of the spec it returns. Every other import pays one dict
lookup inside a call it makes anyway. A finder in front of sys.meta_path,
wrapt's way, costs each import a turn of importlib's loop over the finders
with its lock taken and released: 6.48 M instructions over the ~1 000
imports of `import torch`, against 0.06 M for the PathFinder hook
(callgrind, a do-nothing finder of each kind put in stock torch 2.13.0's
way, Python 3.11, GC off, 2026-12-06), and our finder stays there from
torch's first submodule until every target is imported, which in a process
that never compiles is never. sys.meta_path itself is left as it is, so
code that looks PathFinder up there still finds it.

For any other module (its package not loaded yet, or loaded by another
finder: a zip or frozen-application importer on sys.meta_path) this module
itself goes in front of sys.meta_path, wrapt's way, and looks the spec up
through the other finders. Both take themselves out once every hooked
module has been imported.
"""

from __future__ import annotations

import sys
import threading
from importlib.machinery import PathFinder, SourceFileLoader, SourcelessFileLoader
from importlib.util import find_spec as _find_spec
from types import ModuleType
from typing import Callable, Dict, List, Set

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_hooks: Dict[str, List[Hook]] = {}  # module name -> hooks still to call
# Names whose spec this finder is looking up through the other finders, so
# that the nested lookup passes this finder by.
_in_progress: Set[str] = set()

# What PathFinder.find_spec was when the hook took its place (its function
# is what the hook calls, and it is put back when the hook leaves), and
# whether PathFinder.find_spec calls the hook, directly or through a wrapper
# someone put over it since (then the hook stays, a pass-through, for good).
_path_replaced: object = None
_path_call: Callable[..., object] = None  # type: ignore[assignment]
_path_in_chain = False


def register(name: str, hook: Hook) -> None:
    """Call `hook(module)` once module `name` has executed; now, if it has already.

    A hook must not raise: torch-backports' hooks record their own errors,
    and anything that escapes one is dropped so that the import goes on.
    """
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append(hook)
            _listen_for(name)
            return
    _call(hook, module)


def _listen_for(name: str) -> None:
    """Make sure the import of `name` comes past a hook (with _lock held)."""
    global _path_call, _path_in_chain, _path_replaced
    if _found_by_path_finder(name):
        if _path_in_chain:
            return
        current = PathFinder.__dict__.get("find_spec")
        if isinstance(current, classmethod):
            _path_replaced, _path_call = current, current.__func__
            PathFinder.find_spec = _path_find_spec  # type: ignore[method-assign]
            _path_in_chain = True
            return
    this = sys.modules[__name__]
    if this not in sys.meta_path:
        sys.meta_path.insert(0, this)


def _found_by_path_finder(name: str) -> bool:
    """Whether PathFinder will find module `name`: a submodule of a package
    that a file loader loaded, so that PathFinder found it."""
    package, dot, _ = name.partition(".")
    loader = getattr(getattr(sys.modules.get(package), "__spec__", None), "loader", None)
    return bool(dot) and isinstance(loader, (SourceFileLoader, SourcelessFileLoader))


@classmethod  # type: ignore[misc]
def _path_find_spec(cls: type, fullname: str, path: object = None,
                    target: object = None) -> object:
    """PathFinder.find_spec while a hook listens there: the spec PathFinder
    finds, with a loader that runs the hooks after the module for a hooked
    name (the meta path finder below does that itself when it asked)."""
    spec = _path_call(cls, fullname, path, target)
    if fullname in _hooks and fullname not in _in_progress:
        try:
            _hook_loader(spec)
        except Exception:  # the import goes on as without us; the hooks stay pending
            pass
    return spec


def _hook_loader(spec: object) -> None:
    loader = getattr(spec, "loader", None)
    if hasattr(loader, "exec_module") and not isinstance(loader, _HookingLoader):
        spec.loader = _HookingLoader(loader)  # type: ignore[attr-defined]


def find_spec(fullname: str, path: object = None, target: object = None) -> object:
    """Meta path finder hook: for a hooked module, the spec the other
    finders give, with a loader that runs the hooks after the module."""
    if fullname not in _hooks or fullname in _in_progress:
        return None
    try:
        _in_progress.add(fullname)
        try:
            spec = _find_spec(fullname)
        finally:
            _in_progress.discard(fullname)
        _hook_loader(spec)
        return spec
    except Exception:
        # Let the import system look for the module itself, as without us;
        # the module's hooks stay pending, so its backports do nothing.
        return None


class _HookingLoader:
    """Delegates to the real loader and calls the hooks after exec_module."""

    def __init__(self, loader: object) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> object:
        return getattr(self.loader, name)

    def create_module(self, spec: object) -> object:
        return self.loader.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: ModuleType) -> None:
        # The module sees its real loader from its first line on, as without
        # us: importlib.resources, pkgutil and torch itself read it.
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        self.loader.exec_module(module)  # type: ignore[attr-defined]
        name = module.__name__
        # A module may replace itself in sys.modules while it executes.
        _notify(name, sys.modules.get(name, module))


def _notify(name: str, module: ModuleType) -> None:
    global _path_in_chain
    with _lock:
        hooks = _hooks.pop(name, ())
        if not _hooks:
            this = sys.modules[__name__]
            if this in sys.meta_path:
                sys.meta_path.remove(this)
            # Unless something wrapped ours since: then ours stays under it,
            # a pass-through with no hooks left, and listens again later.
            if _path_in_chain and PathFinder.__dict__.get("find_spec") is _path_find_spec:
                PathFinder.find_spec = _path_replaced  # type: ignore[method-assign]
                _path_in_chain = False
    for hook in hooks:
        _call(hook, module)


def _call(hook: Hook, module: ModuleType) -> None:
    try:
        hook(module)
    except Exception:  # never fail the host's import
        pass


def pending() -> List[str]:
    """The modules whose hooks have not run yet."""
    with _lock:
        return list(_hooks)
