"""Arming wrapt's post-import hooks and applying the backports.

Imported when torch._inductor starts to import (or by a late install()),
never at interpreter start, so it may import wrapt, packaging and logging.
Every function that torch's import can reach catches Exception: whatever
goes wrong, the backport is recorded as failed and torch is left as shipped.
"""

import logging
import sys
import threading
from types import ModuleType
from typing import Callable, Dict, Optional

from . import _CONTAINED, _config, _records, _registry, _versions
from ._backport import Backport, Revert

logger = logging.getLogger("torch_backports")

# Held while a backport is applied or reverted, so that the patch is made at
# most once however many threads trigger it. An RLock, because applying can
# import modules that fire further hooks in the same thread.
_lock = threading.RLock()
_armed = False
_reverts: Dict[str, Revert] = {}


def arm() -> None:
    """Register a post-import hook for every backport's target module.

    wrapt calls the hook right away if the target is already imported.
    """
    global _armed
    with _lock:
        if _armed:
            return
        _armed = True
    try:
        import wrapt
    except _CONTAINED as exc:  # ImportError, or a wrapt that fails to import
        for backport in _registry.BACKPORTS:
            _fail(backport, "wrapt could not be imported (%s: %s)" % (type(exc).__name__, exc))
        return
    for backport in _registry.BACKPORTS:
        try:
            wrapt.register_post_import_hook(_hook_for(backport), backport.target)
        except _CONTAINED as exc:
            _fail(backport, "registering the import hook failed (%s: %s)" % (type(exc).__name__, exc))


def _hook_for(backport: Backport) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        try:
            apply(backport, module)
        except _CONTAINED as exc:
            _fail(backport, "%s: %s" % (type(exc).__name__, exc))

    return hook


def apply(backport: Backport, module: ModuleType) -> str:
    """Apply `backport` to its imported target `module` unless it is off,
    not needed or already applied; record and return the resulting state."""
    with _lock:
        if backport.name in _reverts:
            return _records.APPLIED
        version = getattr(sys.modules.get("torch"), "__version__", None)
        version_text = running_torch_version()
        opt_out = _config.read_opt_out(_registry.names())
        for name in opt_out.unknown:
            if not _records.add_note("%s names no backport: %r" % (_config.ENV_DISABLE, name)):
                continue  # warned already, for an earlier backport
            logger.warning(
                "%s names no backport %r; known backports: %s",
                _config.ENV_DISABLE, name, ", ".join(_registry.names()),
            )
        if opt_out.disables(backport.name):
            return _set(backport, _records.DISABLED, opt_out.describe(), version_text)
        try:
            release = _versions.release_of(version)
        except _versions.UnknownRelease as exc:
            return _fail(backport, str(exc), version_text)
        except ImportError as exc:
            return _fail(backport, "packaging could not be imported (%s)" % exc, version_text)
        if release < backport.first_affected:
            return _set(backport, _records.NOT_COVERED,
                        "torch %d.%d predates the affected releases" % release, version_text)
        if not backport.needed_by(release):
            return _set(backport, _records.NOT_NEEDED,
                        "torch %d.%d ships the fix" % release, version_text)
        _reverts[backport.name] = backport.apply(module, release)
        return _set(backport, _records.APPLIED, "patched for torch %d.%d" % release, version_text)


def revert(name: str) -> bool:
    """Undo backport `name` in this process; True if it was applied."""
    with _lock:
        undo = _reverts.pop(name, None)
        if undo is None:
            return False
        undo()
        _records.set_state(name, _records.PENDING, "reverted")
        return True


def _set(backport: Backport, state: str, reason: str, version: "Optional[str]" = None) -> str:
    _records.set_state(backport.name, state, reason, version)
    logger.debug("%s: %s (%s)", backport.name, state, reason)
    return state


def running_torch_version() -> Optional[str]:
    """torch.__version__ of the torch imported in this process, if it is text."""
    version = getattr(sys.modules.get("torch"), "__version__", None)
    return str(version) if isinstance(version, str) else None


def _fail(backport: Backport, reason: str, version: "Optional[str]" = None) -> str:
    return _set(backport, _records.FAILED, reason + "; torch left untouched",
                version or running_torch_version())
