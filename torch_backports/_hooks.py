"""Post-import hooks: call a function right after a module has executed.

This is wrapt.importer's design (a finder on sys.meta_path that, for a
module with hooks, finds the real spec through the other finders and wraps
its loader, so the hooks run right after the module's code), cut down to
what torch-backports needs. It is our own because wrapt costs too much where
it would run: `import wrapt` adds 12.4 M instructions to `import torch`
(callgrind, torch 2.13.0, Python 3.11, 2026-12-04: `import torch; import
wrapt` against `import torch` alone), half of the 0.5 % that torch-backports
may add there, and its finder takes a lock on each of the ~800 imports that
follow. wrapt is still what wraps functions (`_patching.wrap_attribute`),
imported only by a backport that wraps one.

The finder is this module itself, as the startup watcher is the package
module: the import system asks any object on sys.meta_path for find_spec().
Each import pays one dict lookup, and only until every hooked module has
been imported, when the finder takes itself off sys.meta_path.
"""

from __future__ import annotations

import sys
import threading
from importlib.util import find_spec as _find_spec
from types import ModuleType
from typing import Callable, Dict, List, Set

Hook = Callable[[ModuleType], None]

_lock = threading.RLock()
_hooks: Dict[str, List[Hook]] = {}  # module name -> hooks still to call
# Names whose spec this finder is looking up through the other finders, so
# that the nested lookup passes this finder by.
_in_progress: Set[str] = set()


def register(name: str, hook: Hook) -> None:
    """Call `hook(module)` once module `name` has executed; now, if it has already.

    A hook must not raise: torch-backports' hooks record their own errors,
    and anything that escapes one is dropped so that the import goes on.
    """
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append(hook)
            this = sys.modules[__name__]
            if this not in sys.meta_path:
                sys.meta_path.insert(0, this)
            return
    _call(hook, module)


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
        if spec is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _HookingLoader(spec.loader)
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
    with _lock:
        hooks = _hooks.pop(name, ())
        if not _hooks:
            this = sys.modules[__name__]
            if this in sys.meta_path:
                sys.meta_path.remove(this)
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
