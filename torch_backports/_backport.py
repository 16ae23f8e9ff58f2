"""The description every backport module gives of itself."""

from __future__ import annotations

from types import ModuleType
from typing import Callable, Mapping, Tuple

Release = Tuple[int, int, int]
"""A torch release as (major, minor, micro): 2.10.0+cu128, 2.10.0a0+git... and
2.10.0rc1 are all (2, 10, 0)."""

Revert = Callable[[], None]
"""Undoes a patch; returned by Backport.apply."""


class Backport:
    """One fix from a newer torch, the releases that lack it, and its proof.

    `apply(module, release)` patches `module`, the imported target that the
    registry names, on torch `release`, and returns a callable that reverts
    the patch. It raises before
    changing anything if the code is not what it was verified against
    (torch_backports._patching raises Unrecognised or CarriesFix for that).

    `reproducer` is the source of a small program that uses public torch
    APIs only and never imports torch_backports. On stock torch of an
    affected release it fails, and its stderr contains `symptom`; with the
    fix it exits 0. It exits 77 after printing "skipped: <what it needs>"
    when a prerequisite (a C++ compiler, gloo, a package) is missing.
    `torch-backports verify` and the real-wheel tests run it.

    `changes_codegen` is True for a patch that changes the code inductor
    generates: while it is applied, inductor's graph cache keys name it
    (torch_backports._cache_key), so that its process never loads a graph
    stock torch compiled, nor stock torch one of its own; and it is not
    applied where that cannot be done.

    `verify_without` names other backports whose fixes also hide this one's
    symptom (in the newest torch both fixes are in): verify and the tests
    turn them off in both runs of this reproducer, so that the stock run
    shows the bug and the fixed run shows that this patch alone fixes it.
    """

    # A plain class, not a NamedTuple or a dataclass: this module is imported
    # inside `import torch`, where creating a NamedTuple class cost 3.5 M
    # instructions (callgrind, Python 3.11, 2026-12-04) and a plain one next
    # to nothing.
    __slots__ = ("name", "summary", "upstream", "first_affected", "first_fixed", "apply",
                 "reproducer", "symptom", "changes_codegen", "verify_without")

    def __init__(self, *, name: str, summary: str, upstream: Tuple[str, ...],
                 first_affected: Release, first_fixed: Release,
                 apply: Callable[[ModuleType, Release], Revert], reproducer: str,
                 symptom: str, changes_codegen: bool = False,
                 verify_without: Tuple[str, ...] = ()) -> None:
        self.name = name
        self.summary = summary
        self.upstream = upstream
        self.first_affected = first_affected
        self.first_fixed = first_fixed
        self.apply = apply
        self.reproducer = reproducer
        self.symptom = symptom
        self.changes_codegen = changes_codegen
        self.verify_without = verify_without

    def disabled_when_verified(self, stock: bool) -> str:
        """TORCH_BACKPORTS_DISABLE's value for a run of the reproducer:
        the backports that would hide the symptom, and this one for stock."""
        return ",".join(((self.name,) if stock else ()) + self.verify_without)

    def __repr__(self) -> str:
        return "<Backport %s %s>" % (self.name, self.affects())

    def affects(self) -> str:
        """The affected releases as a version specifier, e.g. '>=2.6.0,<2.11.0'."""
        return affects(self.first_affected, self.first_fixed)

    def needed_by(self, release: Release) -> bool:
        return self.first_affected <= release < self.first_fixed


def format_release(release: Release) -> str:
    return "%d.%d.%d" % release


def affects(first_affected: Release, first_fixed: Release) -> str:
    """The releases from `first_affected` up to `first_fixed` as a version
    specifier, e.g. '>=2.6.0,<2.11.0'."""
    return ">=%s,<%s" % (format_release(first_affected), format_release(first_fixed))


# The start of a reproducer that compiles with inductor's C++ backend: a
# fresh inductor cache, so that no graph or kernel another run cached is
# loaded instead of compiled; one compile worker; and a skip (exit 77) where
# there is no C++ compiler. The reproducer's own code follows it.
INDUCTOR_CPU_PRELUDE = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch
from torch._inductor import cpp_builder

try:
    cpp_builder.get_cpp_compiler()
except Exception as exc:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % exc)
    sys.exit(77)
"""

Fingerprints = Mapping[str, str]
"""Fingerprint (torch_backports._fingerprint) -> the releases it was read from."""
