"""Every backport torch-backports knows, in the order they are applied.

Adding a backport: write torch_backports/backports/<name>.py with a
BACKPORT, list it here, and add its reproducer test under tests/.
"""

from typing import Tuple

from ._backport import Backport
from .backports import fx_graph_cache_pickling

BACKPORTS: Tuple[Backport, ...] = (fx_graph_cache_pickling.BACKPORT,)


def names() -> Tuple[str, ...]:
    return tuple(backport.name for backport in BACKPORTS)


def get(name: str) -> Backport:
    for backport in BACKPORTS:
        if backport.name == name:
            return backport
    raise KeyError(name)
