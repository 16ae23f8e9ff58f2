"""What each backport did in this interpreter, for status() and the CLI."""

import threading
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional

from . import _registry

PENDING = "pending"
APPLIED = "applied"
NOT_NEEDED = "not needed"
NOT_COVERED = "not covered"
DISABLED = "disabled"
FAILED = "failed"

STATES = (PENDING, APPLIED, NOT_NEEDED, NOT_COVERED, DISABLED, FAILED)


@dataclass(frozen=True)
class Record:
    """The state of one backport in this interpreter."""

    name: str
    summary: str
    upstream: List[str]
    affects: str
    torch: Optional[str]
    state: str
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


_lock = threading.Lock()
_records: Dict[str, Record] = {}
# Problems that belong to no single backport, such as unknown names in
# TORCH_BACKPORTS_DISABLE.
_notes: List[str] = []


def _initial(name: str) -> Record:
    backport = _registry.get(name)
    return Record(
        name=backport.name,
        summary=backport.summary,
        upstream=list(backport.upstream),
        affects=backport.affects(),
        torch=None,
        state=PENDING,
        reason="torch's inductor has not been imported in this process",
    )


def set_state(name: str, state: str, reason: str, torch: Optional[str] = None) -> None:
    """Record the outcome for backport `name`; the latest call wins."""
    with _lock:
        current = _records.get(name) or _initial(name)
        _records[name] = replace(current, state=state, reason=reason, torch=torch)


def get(name: str) -> Record:
    with _lock:
        return _records.get(name) or _initial(name)


def snapshot() -> List[Record]:
    """Every registered backport's record, in registry order."""
    return [get(backport.name) for backport in _registry.BACKPORTS]


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
