"""Inductor no longer fuses the write-back of a mutated buffer into a kernel
that reads the same buffer, under an earlier mutation's name, at other
positions.

Upstream:
  https://github.com/pytorch/pytorch/issues/198270   the bug (high priority)
  The fix is in torch 2.15.0 (read from its wheel); no pull request is
  known for it, so the issue is the reference.

A silent wrong result, on the CPU and on CUDA:

  >>> def f(x):
  ...     x.index_put_((torch.arange(x.size(0)),), x * 2.0)
  ...     x.add_(x.flip(0))
  ...     return x
  >>> x = torch.rand(4, 8)
  >>> (torch.compile(f)(x.clone()) != f(x.clone())).sum()   # stock 2.9 - 2.14; fixed here from 2.10
  tensor(16)

The same with index_copy_, index_add_ or x[idx] = ... first, and with
x.copy_(x.flip(0)) second. The index_put_ makes a new buffer name for x (a
mutation of x's buffer); the add_ reads that name at flipped positions and
writes x back. Scheduler.fusable_weak_dep, which allows a read and a later
in-place write of one buffer into a single kernel only where each reads the
position it writes, looked for reads of the buffer under its real name
(`read.name == real_name`) and so missed the read under the earlier
mutation's name. The write-back was fused in, and later positions read
values already overwritten.

2.15.0 maps each read's name through mutation_real_name before comparing
(`self.mutation_real_name.get(read.name, read.name) == real_name`), with a
comment; nothing else in the function changed for this fix. The backport
makes exactly that edit in the installed function
(torch_backports._patching.rewritten) and sets it on Scheduler.

Read from each release's torch/_inductor/scheduler.py:

  release          Scheduler.fusable_weak_dep
  2.9.0, 2.9.1     e9e5012474ef23df   one reading node (affected, not claimed)
  2.10.0, 2.11.0   da337be84f1e421f   the same, per reading node (foreach)
  2.12.0 - 2.13.0 450a71faf72ffecd   plus the non-injective scatter check
  2.14.1           3f0ebd3d38587d7c   plus the halide check
  2.15.0           8f0b48b094dcbd92   maps read names (the fix)

The reproducer failed on stock 2.9.1, 2.10.0, 2.11.0 and 2.13.0 (16 of 32
elements wrong), and passed with the patch on 2.10.0, 2.11.0 and 2.13.0
(2026-12-05). It covers the issue's four writes: index_put_, index_copy_,
index_add_ and x[idx] = ...; on 2.13.0 each gives 16 of 32 wrong stock and
none fixed (2026-12-07). On 2.9.1 the same edit, applied, still left 16 of 32 wrong:
2.9's function looks at one reading node only and has neither 2.10's
foreach loop nor its StarDep check, so more than this fix is missing there.
2.9 is therefore not claimed (its fingerprint, e9e5012474ef23df for 2.9.0
and 2.9.1, is not accepted), and releases before 2.9 were not examined.
Releases whose wheels were not read (2.11.1, 2.14.0, ...) are patched only
where the function has a fingerprint above.

Graphs compiled by stock torch and stored in inductor's caches hold the
wrongly fused kernel under keys that hash torch's files, which the patch
leaves as they are. So the backport declares changes_codegen: while it is
applied those keys name it (torch_backports._cache_key), and a graph stock
torch cached is compiled anew.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "inductor-fused-mutation-read-alias"

VERIFIED = {
    "da337be84f1e421f": "2.10.0, 2.11.0",
    "450a71faf72ffecd": "2.12.0, 2.12.1, 2.13.0",
    "3f0ebd3d38587d7c": "2.14.1",
}
FIXED = {"8f0b48b094dcbd92": "2.15.0"}

# The 2.15.0 change, in the dedented source of fusable_weak_dep, where each
# claimed release has the comparison once.
EDITS = [
    (
        "if read.name == real_name",
        "if self.mutation_real_name.get(read.name, read.name) == real_name",
    ),
]


def apply(scheduler: ModuleType, release: Release) -> Revert:
    """Replace scheduler.Scheduler.fusable_weak_dep by the installed one with
    read names mapped through mutation_real_name; return the undo."""
    owner = _patching.own_class(scheduler, "Scheduler")
    method = vars(owner).get("fusable_weak_dep")
    if method is None:
        raise _patching.Unrecognised("Scheduler has no fusable_weak_dep")
    fixed = _patching.rewritten(method, EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(owner, "fusable_weak_dep", fixed, VERIFIED, FIXED)


# The program at its small shape, where the CPU gets it wrong every
# time, and its index_copy_ / copy_ variant.
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
def put(x):
    x.index_put_((torch.arange(x.size(0)),), x * 2.0)
    x.add_(x.flip(0))
    return x

def copy(x):
    x.index_copy_(0, torch.arange(x.size(0)), x * 2.0)
    x.copy_(x.flip(0))
    return x

def add(x):
    x.index_add_(0, torch.arange(x.size(0)), x * 2.0)
    x.add_(x.flip(0))
    return x

def setitem(x):
    x[torch.arange(x.size(0))] = x * 2.0
    x.add_(x.flip(0))
    return x

torch.manual_seed(0)
x = torch.rand(4, 8)
for f in (put, copy, add, setitem):
    want = f(x.clone())
    got = torch.compile(f, backend="inductor", fullgraph=True)(x.clone())
    wrong = int((got != want).sum())
    if wrong:
        raise AssertionError("compiled %s then a read of x at other positions: %d of %d "
                             "elements differ from eager" % (f.__name__, wrong, x.numel()))
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor no longer fuses an in-place write of x into a kernel that reads x "
    "at other positions after an index_put_/index_copy_ into x (silent wrong result)",
    headline=(
        "**silent wrong result**: an in-place update after `index_put_` fused with its "
        "write-back"
    ),
    upstream=("https://github.com/pytorch/pytorch/issues/198270",),
    first_affected=(2, 10, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="then a read of x at other positions",
    changes_codegen=True,
    readme_symptom=(
        "**silent wrong result**: after `x.index_put_(…)` (or `index_copy_`, "
        "`index_add_`, `x[idx] = …`), an in-place update that reads `x` at other "
        "positions (`x.add_(x.flip(0))`) is fused with the write-back of `x`: 16 of 32 "
        "elements wrong on the CPU (2.9 too, where this one edit does not fix it)"
    ),
    readme_fix=(
        "2.15's one edit in `Scheduler.fusable_weak_dep`: a read of the mutated buffer "
        "under an earlier mutation's name counts as a read of the buffer, so the "
        "write-back is fused only where each position reads what it writes. It changes "
        "generated code, so the cache keys name it, as for `inductor-mul-zero-nan` "
        "(tested warm-stock-then-fixed). The upstream PR was not identified; the change "
        "is read from 2.15.0's wheel."
    ),
)
