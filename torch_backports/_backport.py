"""The description every backport module gives of itself."""

from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Tuple

Release = Tuple[int, int]
"""A torch release as (major, minor): 2.10.0+cu128 and 2.10.0a0 are both (2, 10)."""

Revert = Callable[[], None]
"""Undoes a patch; returned by Backport.apply."""


@dataclass(frozen=True)
class Backport:
    """One fix from a newer torch and the releases that lack it.

    `apply(module, release)` patches `module` (the imported `target`) for the
    given release and returns a callable that reverts the patch. It raises
    on anything it does not recognise, before changing anything.
    """

    name: str
    summary: str
    upstream: Tuple[str, ...]
    target: str
    first_affected: Release
    last_affected: Release
    apply: Callable[[ModuleType, Release], Revert]

    def affects(self) -> str:
        """The affected releases as text, e.g. '2.6 - 2.10'."""
        return "%d.%d - %d.%d" % (self.first_affected + self.last_affected)

    def needed_by(self, release: Release) -> bool:
        return self.first_affected <= release <= self.last_affected
