"""Arming the post-import hooks and applying the backports.

Imported when torch starts to import (or by a late install()), never at
interpreter start. Everything it imports but our own small modules, torch
imports too (benchmarks/run.py counts what the rest adds to `import
torch`). Every function that torch's import can reach catches what _CONTAINED names:
whatever goes wrong, the backport is recorded with the reason and torch is
left as shipped.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from types import ModuleType
from typing import Callable, Dict, Optional

from . import _CONTAINED, _config, _hooks, _patching, _records, _registry, _versions
from ._backport import Release, Revert, format_release

logger = logging.getLogger("torch_backports")

# Held while a backport is applied or reverted, so that each patch is made
# at most once however many threads trigger it. An RLock, because applying
# can import modules that fire further hooks in the same thread.
_lock = threading.RLock()
_armed = False
_reverts: Dict[str, Revert] = {}
# What each applied backport set, as _patching recorded it (Change tuples),
# for `torch-backports diff` and status's hashes (torch_backports._diff).
_changes: Dict[str, list] = {}
# Set by the CLI in the child process it starts: also look for attributes a
# patch set by hand (_patching.set_by_hand), which costs a comparison of
# every attribute of the target module and its classes, so never otherwise.
ENV_AUDIT = "TORCH_BACKPORTS_AUDIT"
_audit = os.environ.get(ENV_AUDIT) == "1"


def arm() -> None:
    """Register a post-import hook for every backport's target module; a
    hook whose target is imported already runs at once."""
    global _armed
    with _lock:
        if _armed:
            return
        _armed = True
    for name, target, _, _ in _registry.BACKPORTS:
        try:
            _hooks.register(target, _hook_for(name))
        except _CONTAINED as exc:
            _fail(name, "registering the import hook failed (%s: %s)" % (type(exc).__name__, exc))


def _hook_for(name: str) -> Callable[[ModuleType], None]:
    def hook(module: ModuleType) -> None:
        try:
            apply(name, module)
        except _CONTAINED as exc:
            _fail(name, "%s: %s" % (type(exc).__name__, exc))

    return hook


def apply(name: str, module: ModuleType) -> str:
    """Apply backport `name` to its imported target `module` unless it is
    off, not needed, unrecognised or already applied; record and return the
    resulting state. Whatever apply() raises, the target is restored."""
    with _lock:
        if name in _reverts:
            return _records.APPLIED
        version = running_torch_version()
        opt_out = _config.read_opt_out(_registry.names())
        _note_unknown(_config.ENV_DISABLE, opt_out.unknown)
        try:
            release = _versions.release_of(getattr(sys.modules.get("torch"), "__version__", None))
        except _versions.UnknownRelease as exc:
            if opt_out.disables(name):
                return _set(name, _records.DISABLED, opt_out.describe(), version)
            return _fail(name, str(exc), version)
        # Before the opt-out: a fix this torch ships reads "not needed",
        # opted out or not, as require() says.
        gated = _gate(name, release, version)
        if gated is not None:
            return gated
        if opt_out.disables(name):
            return _set(name, _records.DISABLED, opt_out.describe(), version)
        backport = _registry.load(name)
        # Read for every backport, not only those off by default, so that a
        # misspelt name is reported whichever target torch imports first.
        enabled, unknown = _config.read_opt_in(_registry.names())
        _note_unknown(_config.ENV_ENABLE, unknown)
        if backport.off_by_default:
            if name not in enabled:
                return _set(name, _records.OFF, "off by default: %s; %s=%s turns it on"
                            % (backport.off_by_default, _config.ENV_ENABLE, name), version)
        if backport.changes_codegen:
            from . import _cache_key

            unkeyed = _cache_key.ready()
            if unkeyed is not None:
                return _fail(name, "inductor's cache keys cannot name it, so graphs that stock "
                             "torch cached would be reused (%s)" % unkeyed, version)
        restore = _patching.snapshot(module, containers=_audit)
        changes: list = []
        outer = _patching.recording(changes)
        try:
            _reverts[name] = backport.apply(module, release)
        except (_patching.CarriesFix, _patching.Unrecognised) as exc:
            restore()
            return _refused(name, exc, version)
        except BaseException:
            restore()
            raise
        finally:
            _patching.recording(outer)
        if _audit:
            try:
                changes += _patching.set_by_hand(restore, changes)
            except _CONTAINED as exc:  # the patch is made: only the audit is short
                logger.debug("%s: the audit of what it set failed: %s", name, exc)
        _changes[name] = changes
        return _set(name, _records.APPLIED, "patched for torch %s" % format_release(release),
                    version)


def _note_unknown(variable: str, unknown: "tuple[str, ...]") -> None:
    """Warn once per process of each part of `variable` that names no backport."""
    for part in unknown:
        if _records.add_note("%s names no backport: %r" % (variable, part)):
            logger.warning("%s names no backport %r%s (`torch-backports status` lists them)",
                           variable, part, _registry.did_you_mean(part))


def _refused(name: str, exc: Exception, version: Optional[str]) -> str:
    """Record that the fingerprint check refused the code backport `name`
    would replace (torch is left, or put back, as shipped)."""
    if isinstance(exc, _patching.CarriesFix):
        return _set(name, _records.NOT_NEEDED, "this build carries the fix: %s" % exc, version)
    return _set(name, _records.UNRECOGNISED, "%s; torch left untouched" % exc, version)


def _gate(name: str, release: Release, version: Optional[str]) -> Optional[str]:
    """Record and return the state of a release outside the affected range,
    read from the registry, not the backport's module; None for a release
    the backport must patch."""
    judged = _records.outside(name, release, version)
    return None if judged is None else _set(name, judged[0], judged[1], version)


def settle(name: str) -> str:
    """For `status`, make the record of backport `name` final and return its
    state: run the fingerprint checks its patch put off (see
    finish_checks), and judge a backport whose target was never imported
    by the release alone, so that a target this torch does not have (a
    module newer than the release) reads "not covered", not "pending"."""
    with _lock:
        _finish_check(name)
        state = _records.get(name)[0]
        version = running_torch_version()
        if state != _records.PENDING or version is None:
            return state
        try:
            release = _versions.release_of(version)
        except _versions.UnknownRelease:
            return state
        return _gate(name, release, version) or state


def finish_checks() -> None:
    """Run now every fingerprint check that an applied patch put off until
    its function's first call (_patching.rewritten_on_first_call), so that
    a report never shows "applied" over code the check would refuse."""
    with _lock:
        for name in list(_reverts):
            _finish_check(name)


def _finish_check(name: str) -> None:
    undo = _reverts.get(name)
    if undo is None:
        return
    try:
        _patching.check_put_off(undo)
        return
    except _CONTAINED as exc:
        refusal = exc
    del _reverts[name]
    _changes.pop(name, None)
    version = _records.get(name)[2]
    try:
        undo()  # the refused function is back already; the rest of the patch
    except _CONTAINED as exc:
        _fail(name, "undoing it after its check failed raised %s: %s" % (type(exc).__name__, exc),
              version)
    else:
        if isinstance(refusal, (_patching.CarriesFix, _patching.Unrecognised)):
            _refused(name, refusal, version)
        else:
            _fail(name, "%s: %s" % (type(refusal).__name__, refusal), version)


def revert(name: str) -> bool:
    """Undo backport `name` in this process; True if it was applied."""
    with _lock:
        undo = _reverts.pop(name, None)
        _changes.pop(name, None)
        if undo is None:
            return False
        undo()
        _records.set_state(name, _records.PENDING, "reverted")
        return True


def _set(name: str, state: str, reason: str, version: "Optional[str]" = None) -> str:
    _records.set_state(name, state, reason, version)
    logger.debug("%s: %s (%s)", name, state, reason)
    return state


def running_torch_version() -> Optional[str]:
    """torch.__version__ of the torch imported in this process, if it is text."""
    version = getattr(sys.modules.get("torch"), "__version__", None)
    return str(version) if isinstance(version, str) else None


def _fail(name: str, reason: str, version: "Optional[str]" = None) -> str:
    return _set(name, _records.FAILED, reason + "; torch left untouched",
                version or running_torch_version())
