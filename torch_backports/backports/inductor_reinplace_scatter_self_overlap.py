"""Inductor no longer turns a slice assignment whose source is a view of
the same tensor into a copy over overlapping memory.

Upstream:
  https://github.com/pytorch/pytorch/issues/197829   the bug (high priority)
  https://github.com/pytorch/pytorch/pull/198010     the fix, in torch 2.15.0

A silent wrong result, on the CPU and on CUDA:

  >>> def f(x):
  ...     x[1:] = x[:-1].clone()
  ...     return x
  >>> x = torch.arange(24.).reshape(6, 4)
  >>> torch.compile(f)(x.clone())[-1]        # stock 2.7 - 2.14.1
  tensor([12., 13., 14., 15.])                 # eager: tensor([16., 17., 18., 19.])

The same with x[1:].copy_(x[:-1].clone()), and with 1-D tensors (3 of 64
elements wrong on the CPU here; the issue's x = torch.arange(8.) came out
right on this machine's AVX-512 CPU, whose one vector holds all of it).
AOT autograd traces the assignment to slice, clone, copy, slice_scatter,
copy_. remove_noop_ops drops the clone, which is sound while the graph is
functional. The reinplacing pass then turns _generalized_scatter(inp, src,
views) into view(inp).copy_(src), and by then src is a view of inp's own
storage: the copy reads what it is overwriting (row 0 spread over later
rows on the CPU, a race between blocks on a GPU). can_inplace looks at
later uses of the mutated storage, not at the node's other operands.

2.15.0's should_reinplace_scatter returns False when inp and src share a
storage (get_node_storage), so the functional decomposition, which clones
inp, is used instead; that is the whole of the PR's change to torch (it
also adds a CPU test to test/inductor/test_inplacing_pass.py). The backport
makes exactly that edit in the installed function
(torch_backports._patching.rewritten) and sets it on the module. The
reinplacing pass does not call the module's function by name: the
inplaceable_ops entry for _generalized_scatter, a frozen InplaceableOp
built at import, holds it as extra_check. So that entry is replaced as
well, by a copy (dataclasses.replace) whose extra_check is the fixed
function, after checking that its extra_check is the very function the
fingerprint was checked on; the undo puts both back where they are still
ours.

Two fixes meet here. inductor-noop-copy-of-mutated-input (also 2.15.0)
keeps the clone of an input the graph writes back to, and with it applied
src never shares inp's storage in these programs: either fix alone gives
the right result (torch 2.13.0, 2026-12-06), and 2.15.0 has both. So this
backport's reproducer runs with that one off, stock and fixed
(Backport.verify_without), to show the bug and that this patch alone fixes
it; a program the other fix does not cover was not found.

Not carried: 2.15.0's reinplace.py also adds should_reinplace_index_put
(index_put/_unsafe_index_put whose indices or values share the input's
storage, torch.put(x, x, x)), should_reinplace_all_reduce and the
_scaled_addmm and _philox_randint entries. Those are other changes, not
part of PR #198010, and are left to their own backports.

Read from each release's torch/_inductor/fx_passes/reinplace.py:

  release            should_reinplace_scatter
  2.7.0 - 2.14.1     829d40d1b7ae9b82   the same text in all twelve wheels
  2.15.0             3cd1970441103ccb   declines when src shares inp's storage

The inplaceable_ops entry is InplaceableOp(_inplace_generalized_scatter,
0, extra_check=should_reinplace_scatter), a frozen dataclass, in every one
of them, and get_node_storage is imported into the module from fx_utils in
every one.

The reproducer failed on stock 2.7.0, 2.10.0, 2.13.0 and 2.14.1 (on 2.13.0
every program at (64,), (6, 4) and (32, 16): 960 of the 1024 values of x and
the result wrong at (32, 16)), and passed with the patch on each; it passes
on stock 2.15.0 (2026-12-06). 2.8, 2.9, 2.11 and 2.12 have the same function
and entry and are claimed on that reading.

Graphs compiled by stock torch and stored in inductor's caches hold the
in-place copy under keys that hash torch's files, which the patch leaves
as they are. So the backport declares changes_codegen: while it is applied
those keys name it (torch_backports._cache_key), and a graph stock torch
cached is compiled anew.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "inductor-reinplace-scatter-self-overlap"

VERIFIED = {
    "829d40d1b7ae9b82": "2.7.0, 2.8.0, 2.9.0, 2.9.1, 2.10.0, 2.11.0, 2.12.0, 2.12.1, "
                        "2.13.0, 2.14.0, 2.14.1",
}
FIXED = {"3cd1970441103ccb": "2.15.0"}

# The 2.15.0 change, in the dedented source of should_reinplace_scatter.
EDITS = [
    (
        "    inp, _src, _view_ops = node.args\n",
        "    inp, src, _view_ops = node.args\n"
        "\n"
        "    # The mutating decomposition is view(inp).copy_(src). If src is itself a\n"
        "    # view of inp's storage (x[1:] = x[:-1].clone(), once the clone has been\n"
        "    # removed as a no-op), that copy reads what it is overwriting.\n"
        "    if isinstance(inp, torch.fx.Node) and isinstance(src, torch.fx.Node):\n"
        "        inp_storage = get_node_storage(inp)\n"
        "        if inp_storage is not None and inp_storage == get_node_storage(src):\n"
        "            return False\n",
    ),
]


def apply(reinplace: ModuleType, release: Release) -> Revert:
    """Replace reinplace.should_reinplace_scatter by the installed one that
    declines when src shares inp's storage, and the inplaceable_ops entry
    for _generalized_scatter by one whose extra_check is it; return the undo."""
    import dataclasses

    original, where = _patching.own_attribute(reinplace, "should_reinplace_scatter")
    ops, _ = _patching.own_attribute(reinplace, "inplaceable_ops")
    scatter, _ = _patching.own_attribute(reinplace, "_generalized_scatter")
    if not isinstance(ops, dict):
        raise _patching.Unrecognised("reinplace.inplaceable_ops is not a dict")
    entry = ops.get(scatter)
    if entry is None or getattr(entry, "extra_check", None) is not original:
        raise _patching.Unrecognised("inplaceable_ops[_generalized_scatter] does not check "
                                     "with %s" % where)
    if not dataclasses.is_dataclass(entry):
        raise _patching.Unrecognised("inplaceable_ops[_generalized_scatter] is not a dataclass")
    for name in ("torch", "get_node_storage"):
        if name not in vars(reinplace):
            raise _patching.Unrecognised("reinplace has no %s for the fix to use" % name)
    fixed = _patching.rewritten(original, EDITS, VERIFIED, FIXED)
    new_entry = dataclasses.replace(entry, extra_check=fixed)
    revert_function = _patching.replace_attribute(reinplace, "should_reinplace_scatter", fixed,
                                                  VERIFIED, FIXED)
    ops[scatter] = new_entry

    def revert() -> None:
        if ops.get(scatter) is new_entry:  # nobody has replaced ours since
            ops[scatter] = entry
        revert_function()

    return revert


# The program and its copy_ spelling, each returning x and once
# more inside a graph that goes on to use x, at the 1-D shape, a
# longer one and 2-D rows; every one compared with eager, x included.
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
def assign(x):
    x[1:] = x[:-1].clone()
    return x

def copy(x):
    x[1:].copy_(x[:-1].clone())
    return x

def assign_then_sum(x):
    x[1:] = x[:-1].clone()
    return x.sum()

for f in (assign, copy, assign_then_sum):
    compiled = torch.compile(f, backend="inductor", fullgraph=True, dynamic=False)
    for shape in ((8,), (64,), (6, 4), (32, 16)):
        x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
        want_x = x.clone()
        want = f(want_x)
        got_x = x.clone()
        got = compiled(got_x)
        wrong = int((got != want).sum()) + int((got_x != want_x).sum())
        if wrong:
            raise AssertionError("compiled %s on %s: a copy that reads what it overwrites, "
                                 "%d elements differ from eager" % (f.__name__, shape, wrong))
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor no longer compiles x[1:] = x[:-1].clone() to a copy over overlapping "
    "memory (silent wrong result)",
    headline=(
        "**silent wrong result**: compiled `x[1:] = x[:-1].clone()` copies over "
        "overlapping memory"
    ),
    upstream=("https://github.com/pytorch/pytorch/issues/197829",
              "https://github.com/pytorch/pytorch/pull/198010"),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="a copy that reads what it overwrites",
    changes_codegen=True,
    # 2.15.0 also keeps the clone of a mutated input (that backport), which
    # on its own avoids this program's overlap; each fix is shown alone.
    verify_without=("inductor-noop-copy-of-mutated-input",),
    readme_symptom=(
        "**silent wrong result**: compiled `x[1:] = x[:-1].clone()` copies over "
        "overlapping memory (480 of 512 elements wrong for a (32, 16) input on the CPU)"
    ),
    readme_fix=(
        "2.15's early `return False` in `should_reinplace_scatter` when the scatter's "
        "input and source share a storage, set both on the module and in the pass's "
        "`inplaceable_ops[_generalized_scatter]` entry, which holds its own reference. "
        "With `inductor-noop-copy-of-mutated-input` applied too, the known programs are "
        "already right (2.15 has both fixes), so its reproducer runs with that one off, "
        "stock and fixed. It changes generated code, so the cache keys name it (tested "
        "warm-stock-then-fixed on 2.13.0, in the full runs). Not carried: 2.15's other "
        "reinplace.py changes (`should_reinplace_index_put`, all-reduce), separate fixes."
    ),
)
