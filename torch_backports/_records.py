"""What each backport did in this interpreter, for status() and the CLI.

Records hold only the outcome (state, reason, torch version): the facts of a
backport (summary, links, releases) come from its module when a report is
made, so that recording an outcome never imports another backport's module.
"""

from __future__ import annotations

import sys
import threading
from typing import Dict, List, Optional, Tuple

from . import _registry

PENDING = "pending"
APPLIED = "applied"
NOT_NEEDED = "not needed"
NOT_COVERED = "not covered"
DISABLED = "disabled"
OFF = "off"  # off by default (Backport.off_by_default), not turned on
UNRECOGNISED = "unrecognised"
FAILED = "failed"

STATES = (PENDING, APPLIED, NOT_NEEDED, NOT_COVERED, DISABLED, OFF, UNRECOGNISED, FAILED)

Outcome = Tuple[str, str, Optional[str]]
"""(state, reason, torch version)"""

_lock = threading.Lock()
_outcomes: Dict[str, Outcome] = {}
# Problems that belong to no single backport, such as unknown names in
# TORCH_BACKPORTS_DISABLE.
_notes: List[str] = []


def set_state(name: str, state: str, reason: str, torch: Optional[str] = None) -> None:
    """Record the outcome for backport `name`; the latest call wins."""
    with _lock:
        _outcomes[name] = (state, reason, torch)


def outside(name: str, release: "tuple[int, int, int]",
            version: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """(state, reason) of backport `name` on a `release` outside its
    affected range, read from the registry: not covered, or not needed;
    None for a release the backport must patch, and for a pre-release, dev
    or source build (`version`, _versions.judged_by_code) of its first
    fixed release, which may predate the fix: there its code decides."""
    from ._backport import affects, format_release
    from ._versions import judged_by_code

    first_affected, first_fixed = _registry.releases(name)
    if release < first_affected:
        return (NOT_COVERED, "torch %s predates the affected releases (%s)"
                % (format_release(release), affects(first_affected, first_fixed)))
    if release == first_fixed and judged_by_code(version):
        return None
    if release >= first_fixed:
        return (NOT_NEEDED, "torch %s ships the fix (since %s)"
                % (format_release(release), format_release(first_fixed)))
    return None


def ships_fix(name: str, release: "tuple[int, int, int] | None",
              version: Optional[str]) -> bool:
    """Whether torch `version` (its `release`, None if unread) ships backport
    `name`'s fix by its release alone: outside() says not needed."""
    judged = outside(name, release, version) if release is not None else None
    return judged is not None and judged[0] == NOT_NEEDED


def get(name: str) -> Outcome:
    with _lock:
        found = _outcomes.get(name)
    if found is not None:
        return found
    if sys.modules[__package__]._startup_state == "disabled":
        # A fix this torch ships, or a bug it predates, reads as such: the
        # opt-out changes nothing there, and require() says the same.
        from . import _versions

        version = getattr(sys.modules.get("torch"), "__version__", None)
        try:
            judged = outside(name, _versions.release_of(version), version)
        except _versions.UnknownRelease:
            judged = None
        if judged is not None:
            return judged + (version,)
        return (DISABLED, "TORCH_BACKPORTS_DISABLE turned every backport off when torch was "
                "imported, so none was armed in this process", None)
    return (PENDING, "its target %s has not been imported in this process"
            % _registry.target(name), None)


def report(name: str) -> dict:
    """The record of backport `name` with its facts, as a JSON-ready dict."""
    backport = _registry.load(name)
    state, reason, torch = get(name)
    return {
        "name": name,
        "summary": backport.summary,
        "upstream": list(backport.upstream),
        "affects": backport.affects(),
        "target": _registry.target(name),
        "torch": torch,
        "state": state,
        "reason": reason,
    }


def snapshot() -> List[dict]:
    """Every registered backport's record, in registry order."""
    return [report(name) for name in _registry.names()]


def add_note(note: str) -> bool:
    """Keep `note` for status; False if it was already kept."""
    with _lock:
        if note in _notes:
            return False
        _notes.append(note)
        return True


def notes() -> List[str]:
    with _lock:
        return list(_notes)
