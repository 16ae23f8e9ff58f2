"""Functional collectives' all_gather_tensor (and all_gather_single) gather
along a negative gather_dim, instead of failing, or viewing the result with a
wrong shape, when the local tensor's dim 0 is 1.

Upstream:
  https://github.com/pytorch/pytorch/pull/194865   the fix (first in 2.15.0)
  https://github.com/pytorch/pytorch/issues/194856 the report

  >>> x = torch.zeros(1, 2, 3)                       # on each of 2 ranks
  >>> funcol.all_gather_tensor(x, -1, dist.group.WORLD)
  RuntimeError: shape '[1, 2, 6, 2, 2, 3]' is invalid for input of size 12
                                                     # stock 2.11 - 2.14.1

The same in torch.compile (the fake tensor's view fails while dynamo traces),
with all_gather_tensor_autograd, and with gather_dim=-3 here. The
all-gather stacks the ranks' tensors on dim 0; torch._utils.
_maybe_view_chunk_cat (new in 2.11) then moves that dim to gather_dim, by a
view where dim 0 is the group size and every dim between has size 1, and
otherwise by narrow + cat. It slices the shape with gather_dim as if it were
non-negative: `shape[gather_dim + 1:]` is the whole shape for -1, and the
test of the dims between (`if gather_dim > 1 else 1`) lets every negative dim
through. So with local dim 0 of 1 (dim 0 gathered = the group size) a
negative gather_dim takes the view path with a wrong shape. 2.7 - 2.10 did
torch.cat(torch.chunk(...), dim=gather_dim), which takes a negative dim: not
affected. From 2.12 the gather function itself repeats the same test
(`can_use_view`) to decide whether to wait for the collective before the
helper runs, with the same assumption.

PR #194865 makes each of them add res.dim() (self.dim()) to a negative
gather_dim first: _maybe_view_chunk_cat before its `gather_dim == 0` early
return (so -res.dim() is the no-op too), and all_gather_single before the
collective, so that its can_use_view test and the helper see the same dim.

Read from each release's torch/_utils.py and
torch/distributed/_functional_collectives.py (tools/fingerprint.py):

  release          _maybe_view_chunk_cat   function holding can_use_view
  2.7.0 - 2.10.0   absent (not affected)   -
  2.11.0           0bac5737d8b51ccd        none: all_gather_tensor
                                           aa84c9f4326de83f waits, then calls
                                           the helper; all_gather_tensor_autograd
                                           7849d0ca0480a977 still cats
  2.12.0, 2.12.1   eaee8cb7f0e74faf        all_gather_tensor f9b61af83eee3b65,
                                           all_gather_tensor_autograd f59c509a6aa145ef
  2.13.0 - 2.14.1  eaee8cb7f0e74faf        all_gather_single 594fa23d511e4d7d
                   (2.13.0, 2.14.0,        (all_gather_tensor 723bbc96403b2905 and
                   2.14.1 read)            all_gather_tensor_autograd 8dc7bf7a89b01ac1
                                           call it)
  2.15.0           f7249a7d7908c709 fixed  all_gather_single 24a7153f0b5f1846 fixed

The patch makes upstream's edits in the installed functions
(torch_backports._patching.rewritten) and sets the copies in place: the
helper in torch._utils and under the same name in _functional_collectives,
which binds it by `from torch._utils import _maybe_view_chunk_cat` (nothing
else in torch holds it: grep of each release; dynamo's trace_rules names it
as a string, see below); on 2.12 all_gather_tensor and
all_gather_tensor_autograd, which 2.15 reaches through all_gather_single
(all_gather_tensor_autograd -> all_gather_single_autograd ->
all_gather_single), so both normalise as 2.15 does; on 2.13 - 2.14
all_gather_single. On 2.11 only the helper changes: all_gather_tensor has no
can_use_view there. The helper's normalisation takes the blank line after
its docstring, so its lines keep torch's numbers in tracebacks; the gather
functions' two lines shift the rest of those functions by two.

Dynamo traces these functions; the copies stay plain functions with
torch's file name and globals. 2.13 on, dynamo inlines
_maybe_view_chunk_cat by a rule for the object that
trace_rules.load_object("torch._utils._maybe_view_chunk_cat") finds when it
builds its rule map, at the first compile (torch._utils itself is in
MOD_SKIPLIST). This target is imported by `import torch._dynamo` (not by
`import torch`), so the copy is in place before that map is built and gets
the rule. That is also why the copies are made at import and not at their
first call (_patching.rewritten_on_first_call): dynamo would trace into the
stand-in and its fingerprint check. The cost lands in `import torch._dynamo`
(or of this module), not in `import torch`: apply() took 0.7 ms with a cold
linecache against 2.5 s for `import torch._dynamo` (0.03 %; wall clock,
torch 2.13.0, Python 3.11, 2026-12-06). On 2.11 and 2.12 dynamo skips
_maybe_view_chunk_cat (no rule yet), so a compiled gather breaks the graph
there, on stock as with the patch, and the helper runs eagerly.

The reproducer failed on stock 2.11.0, 2.12.0, 2.13.0 and 2.14.1 with
"shape '[1, 2, 6, 2, 2, 3]' is invalid for input of size 12", in eager and
(run alone) in torch.compile, and passed with the patch on all four and on
stock 2.15.0 (2026-12-06). With the patch, the compiled gathers along -1, -2,
-3 and 1 compile with fullgraph=True on 2.13.0 and 2.14.1.

Not carried: 2.15's comments beside the new lines, and its
`shape = res.shape` for `shape = list(res.shape)` in all_gather_single,
which is not in PR #194865 and behaves the same (slices of a torch.Size,
math.prod). The PR's tests are torch's own (test_fake_distributed,
test_view_ops); the reproducer covers the same cases with two gloo ranks.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Callable, Dict, List, Tuple

from .. import _fingerprint, _patching
from .._backport import Backport, Release, Revert, two_gloo_ranks

NAME = "funcol-all-gather-negative-dim"

# torch._utils._maybe_view_chunk_cat
VERIFIED = {"0bac5737d8b51ccd": "2.11.0", "eaee8cb7f0e74faf": "2.12.0 - 2.14.1"}
FIXED = {"f7249a7d7908c709": "2.15.0"}

# PR #194865 in the dedented source of _maybe_view_chunk_cat: the blank line
# after the docstring becomes the normalisation (one line, as the line count
# stays).
HELPER_EDITS = [
    (
        '    """\n'
        "\n"
        "    if gather_dim == 0:\n",
        '    """\n'
        "    gather_dim = gather_dim + res.dim() if gather_dim < 0 else gather_dim\n"
        "    if gather_dim == 0:\n",
    ),
]

# The functions of _functional_collectives that test can_use_view, with the
# fingerprints of the releases where they do (edited), and of those where
# the same name holds no such test (left as they are).
GATHERS: Dict[str, Tuple[Dict[str, str], Dict[str, str], Dict[str, str]]] = {
    # name: (verified, fixed, left)
    "all_gather_tensor": (
        {"f9b61af83eee3b65": "2.12.0, 2.12.1"},
        {},
        {"aa84c9f4326de83f": "2.11.0", "723bbc96403b2905": "2.13.0 - 2.15.0"},
    ),
    "all_gather_tensor_autograd": (
        {"f59c509a6aa145ef": "2.12.0, 2.12.1"},
        {},
        {"7849d0ca0480a977": "2.7.0 - 2.11.0", "8dc7bf7a89b01ac1": "2.13.0 - 2.15.0"},
    ),
    "all_gather_single": (
        {"594fa23d511e4d7d": "2.13.0 - 2.14.1"},
        {"24a7153f0b5f1846": "2.15.0"},
        {},  # absent before 2.13
    ),
}

# PR #194865 in all_gather_single (and 2.12's two functions, which hold the
# same lines): normalise before the collective, as 2.15 does.
GATHER_EDITS = [
    (
        "    tensor = torch.ops._c10d_functional",
        "    if gather_dim < 0:\n"
        "        gather_dim += self.dim()\n"
        "    tensor = torch.ops._c10d_functional",
    ),
]


def _gathers(funcol: ModuleType) -> List[Tuple[str, Callable]]:
    """The gather functions of this release to edit, each rewritten; raise
    Unrecognised for one that is neither edited nor known to need no edit."""
    out = []
    for name, (verified, fixed, left) in GATHERS.items():
        function = vars(funcol).get(name)
        if function is None:
            if name == "all_gather_single" and "all_gather_single_autograd" not in vars(funcol):
                continue  # before 2.13
            raise _patching.Unrecognised("_functional_collectives has no %s" % name)
        _patching._refuse_ours(function, name)
        known = {**verified, **fixed, **left}
        try:
            found = _fingerprint.of_function(function, known)
        except (OSError, TypeError) as exc:
            raise _patching.Unrecognised("%s: its source cannot be read (%s)"
                                         % (name, exc)) from None
        if found in left:
            continue
        out.append((name, _patching.rewritten(function, GATHER_EDITS, verified, fixed)))
    return out


def apply(funcol: ModuleType, release: Release) -> Revert:
    """Replace torch._utils._maybe_view_chunk_cat (and _functional_collectives'
    name for it) and the gather functions that test can_use_view by copies
    that add dim() to a negative gather_dim; return the undo."""
    utils = sys.modules.get("torch._utils")
    if utils is None:
        raise _patching.Unrecognised("torch._utils is not loaded")
    helper, where = _patching.own_attribute(utils, "_maybe_view_chunk_cat")
    if vars(funcol).get("_maybe_view_chunk_cat") is not helper:
        raise _patching.Unrecognised("_functional_collectives._maybe_view_chunk_cat is not %s"
                                     % where)
    # Everything checked and compiled before anything is set.
    fixed_helper = _patching.rewritten(helper, HELPER_EDITS, VERIFIED, FIXED)
    gathers = _gathers(funcol)
    with _patching.all_or_nothing() as reverts:  # torch._utils is outside the snapshot
        for owner in (utils, funcol):
            reverts.append(_patching.replace_attribute(
                owner, "_maybe_view_chunk_cat", fixed_helper, VERIFIED, FIXED))
        for name, new in gathers:
            verified, fixed, _ = GATHERS[name]
            reverts.append(_patching.replace_attribute(funcol, name, new, verified, fixed))
    return _patching.undo_all(reverts)


# Two gloo ranks on the CPU: this program is rank 0, a second interpreter
# rank 1. Each gathers a local tensor whose dim 0 is 1 along negative and
# positive dims, eagerly with all_gather_tensor and all_gather_tensor_autograd,
# and compiled (aot_eager), and checks the result against torch.cat of the
# ranks' tensors; one tensor with dim 0 of 2 takes the cat path throughout.
REPRODUCER = two_gloo_ranks(r"""
import os, warnings
from datetime import timedelta
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

warnings.simplefilter("ignore", FutureWarning)  # all_gather_tensor is deprecated from 2.13
rank = int(os.environ["RANK"])
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=rank,
                        world_size=2, timeout=timedelta(seconds=60))
try:
    group = dist.group.WORLD

    def local(r, shape):
        return torch.arange(float(torch.Size(shape).numel())).reshape(shape) + 100 * r

    def wanted(shape, dim):
        return torch.cat([local(r, shape) for r in range(2)], dim=dim)

    def wait(t):
        return funcol.wait_tensor(t) if isinstance(t, funcol.AsyncCollectiveTensor) else t

    def check(how, got, shape, dim):
        want = wanted(shape, dim)
        assert got.shape == want.shape and torch.equal(got, want), (
            "%s gather of %s along %d: got shape %s, want %s"
            % (how, tuple(shape), dim, tuple(got.shape), tuple(want.shape)))

    # Local dim 0 of 1 is what sends a negative dim down the view path.
    cases = [((1, 2, 3), dim) for dim in (-1, -2, -3, 0, 1, 2)] + [((2, 3), -1)]
    for gather in (funcol.all_gather_tensor, funcol.all_gather_tensor_autograd):
        for shape, dim in cases:
            check(gather.__name__, wait(gather(local(rank, shape), dim, group)), shape, dim)

    dims = (-1, -2, -3, 1)

    def gather_all(x):
        return [funcol.all_gather_tensor(x, dim, group) for dim in dims]

    compiled = torch.compile(gather_all, backend="aot_eager")
    for got, dim in zip(compiled(local(rank, (1, 2, 3))), dims):
        check("compiled", wait(got), (1, 2, 3), dim)
    # Neither rank tears gloo down while the other is still in a collective.
    dist.barrier()
finally:
    dist.destroy_process_group()
""")

BACKPORT = Backport(
    name=NAME,
    summary="functional collectives' all_gather_tensor/all_gather_single take a negative "
    "gather_dim when the local dim 0 is 1 (RuntimeError: shape '[...]' is invalid for "
    "input of size ...), eager and compiled",
    headline="`shape … is invalid` from `all_gather_tensor` with a negative gather dim",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/194865",
        "https://github.com/pytorch/pytorch/issues/194856",
    ),
    first_affected=(2, 11, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="is invalid for input of size",
    readme_symptom=(
        "`RuntimeError: shape '[1, 2, 6, 2, 2, 3]' is invalid for input of size 12` from "
        "functional collectives' `all_gather_tensor(x, -1, group)` when the local dim 0 "
        "is 1, eager and compiled"
    ),
    readme_fix=(
        "[pytorch#194865]'s normalisation of a negative `gather_dim`, in "
        "`torch._utils._maybe_view_chunk_cat` (also under the name functional collectives "
        "imported it by) and in the gather functions that repeat its test "
        "(`all_gather_single`; on 2.12 `all_gather_tensor` and "
        "`all_gather_tensor_autograd`). Applied when functional collectives is imported "
        "(by `torch._dynamo`, not by `import torch`), so dynamo's trace rules pick up the "
        "copies."
    ),
)
