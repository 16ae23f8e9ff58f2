"""The TORCH_BACKPORTS_DISABLE opt-out, and TORCH_BACKPORTS_ENABLE, the
opt-in for a backport that is off by default (Backport.off_by_default)."""

from __future__ import annotations

import os
from typing import Collection, FrozenSet, Mapping, Optional, Tuple

from . import _ALL_WORDS, _ENV_DISABLE

ENV_DISABLE = _ENV_DISABLE
ENV_ENABLE = "TORCH_BACKPORTS_ENABLE"

# The obvious spellings of "off" and "on" are what they say; anything else
# is a list of names, and a name that matches no backport is reported (a
# warning on our logger and a note in `status`), never guessed at.
_ENABLED_WORDS = frozenset({"", "0", "false", "no", "n", "off", "none"})


class OptOut:
    """What TORCH_BACKPORTS_DISABLE turns off."""

    # A plain class, not a dataclass: read inside `import torch`, where
    # creating a frozen dataclass cost 2.5 M instructions (callgrind, Python
    # 3.11, 2026-12-04).
    __slots__ = ("everything", "names", "unknown")

    def __init__(self, everything: bool, names: FrozenSet[str], unknown: Tuple[str, ...]) -> None:
        self.everything = everything
        self.names = names
        self.unknown = unknown

    def disables(self, name: str) -> bool:
        return self.everything or name in self.names

    def describe(self) -> str:
        if self.everything:
            return "%s turns off every backport" % ENV_DISABLE
        return "%s lists %s" % (ENV_DISABLE, ", ".join(sorted(self.names)))


def read_opt_out(
    known: Collection[str], environ: Optional[Mapping[str, str]] = None
) -> OptOut:
    """Parse TORCH_BACKPORTS_DISABLE against the `known` backport names.

    The value is only compared with fixed words and names, never evaluated.
    Names are matched case-insensitively with '_' and '-' alike, since users
    type them from memory.
    """
    raw = (os.environ if environ is None else environ).get(ENV_DISABLE, "")
    word = raw.strip().lower()
    if word in _ENABLED_WORDS:
        return OptOut(False, frozenset(), ())
    if word in _ALL_WORDS:
        return OptOut(True, frozenset(), ())
    names, unknown = _names(raw, known)
    return OptOut(False, names, unknown)


def read_opt_in(
    known: Collection[str], environ: Optional[Mapping[str, str]] = None
) -> Tuple[FrozenSet[str], Tuple[str, ...]]:
    """The backports TORCH_BACKPORTS_ENABLE turns on, and the parts of it
    that name none. Only names count: a backport off by default is off for
    a reason (a hunk no CPU test reaches), so there is no word for "all"."""
    return _names((os.environ if environ is None else environ).get(ENV_ENABLE, ""), known)


def _names(raw: str, known: Collection[str]) -> Tuple[FrozenSet[str], Tuple[str, ...]]:
    if not raw.strip():
        # The usual case, read at each backport's target import inside
        # `import torch`: no name to key, so no known name is keyed.
        return frozenset(), ()
    by_key = {_key(name): name for name in known}
    names = set()
    unknown = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        name = by_key.get(_key(part))
        if name is None:
            unknown.append(part)
        else:
            names.add(name)
    return frozenset(names), tuple(unknown)


def _key(name: str) -> str:
    from ._registry import key

    return key(name)
