"""Dynamo puts einops' operations in the graph again, as torch 2.6 and 2.8 do.

Upstream:
  https://github.com/pytorch/pytorch/issues/153476  the regression in 2.7.0
  https://github.com/pytorch/pytorch/pull/142847    2.7.0: the einops < 0.7.0 gate
  https://github.com/pytorch/pytorch/pull/153925    2.7.1: the gate moved to einops <= 0.8.1
  https://github.com/pytorch/pytorch/issues/157601  2.7.1 breaks once einops 0.8.2 ships
  https://github.com/pytorch/pytorch/pull/157600    the fix: the gate removed (in 2.8.0)
  https://github.com/arogozhnikov/einops/issues/377 the same report on einops' side

torch._dynamo.decorators registers `_allow_in_graph_einops` with
trace_rules.add_module_init_func("einops", ...): dynamo calls it (and drops
it) the first time its trace rules look at an object whose __module__ is
einops or under it, so einops is never imported by torch. Up to 2.6 and
again from 2.8 it imports `einops._torch_specific`, whose import calls
torch._dynamo.allow_in_graph on rearrange, reduce, repeat, einsum, pack and
unpack (einops >= 0.6.2), or calls allow_in_graph on them itself (older
einops). 2.7.0 does that only for einops < 0.7.0, 2.7.1 only for einops
<= 0.8.1. Otherwise einops imports _torch_specific only when it first builds
its torch backend, on the first einops call; if that first call is traced
by torch.compile, dynamo inlines einops and fails:
"torch._dynamo.exc.Unsupported: ... Dynamo does not know how to trace method
`symmetric_difference` of class `type`" with fullgraph=True, a graph break
per einops call without.

  release          _allow_in_graph_einops  einops it registers
  2.6.0            d5ce6550433490dc        all (the 2.8 code)
  2.7.0            beb8e6edb6c55df6        < 0.7.0 only (bug)
  2.7.1            3dab5eafd695b5bf        <= 0.8.1 only (bug with einops >= 0.8.2)
  2.8.0            d5ce6550433490dc        all (PR #157600 restored 2.6's code)
  2.9.0 - 2.10.0   08928831bb2ec35a        all (adds "-> None")
  2.11.0           bbd7780887804fc9        all (a commented-out 0.8.2 branch)
  2.12.0 - 2.12.1  cbfdea0b2d8114a9        all (also patches einops <= 0.6.1's lru_cache)
  2.13.0, 2.15.0   92e33e3825fbd925        all; for einops >= 0.8.2 it warms up the
                                           torch backend instead (pytorch#173611)

2.13's einops >= 0.8.2 branch runs einops.rearrange(torch.empty(1), "i -> i"),
which also imports einops._torch_specific; einops 0.8.2 skips allow_in_graph
when `torch.__version__ >= "2.8"` (a string comparison), never the case on
2.7.x. So on a 2.7 release the newest branch and 2.8's import end the same
way: einops' six operations allowed in the graph. This patch installs 2.8's
function. The rest of 2.13's branch (lru_cache trace allowlist) uses dynamo
APIs that 2.7 does not have and only matters when dynamo traces inside einops,
which allow_in_graph prevents.

apply() replaces decorators._allow_in_graph_einops and the reference that
trace_rules._lazy_module_init["einops"] holds, since that list, not the
module attribute, is what dynamo calls. It raises Unrecognised if that entry
is already gone (dynamo has looked at einops before the patch).
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "einops-allow-in-graph"

VERIFIED = {
    "beb8e6edb6c55df6": "2.7.0",
    "3dab5eafd695b5bf": "2.7.1",
}
FIXED = {
    "d5ce6550433490dc": "2.6.0, 2.8.0",
    "08928831bb2ec35a": "2.9.0 - 2.10.0",
    "bbd7780887804fc9": "2.11.0",
    "cbfdea0b2d8114a9": "2.12.0 - 2.12.1",
    "92e33e3825fbd925": "2.13.0 - 2.15.0",
}


def _fixed_function(decorators: ModuleType):
    """2.8's _allow_in_graph_einops (pytorch/pytorch#157600), calling the
    allow_in_graph of `decorators` as the original does."""

    def _allow_in_graph_einops():
        import einops

        try:
            # einops >= 0.6.2 calls allow_in_graph on its operations when
            # this module is imported.
            from einops._torch_specific import (  # noqa: F401
                _ops_were_registered_in_torchdynamo,
            )
        except ImportError:
            # einops <= 0.6.1
            allow_in_graph = decorators.allow_in_graph
            allow_in_graph(einops.rearrange)
            allow_in_graph(einops.reduce)
            for name in ("repeat", "einsum", "pack", "unpack"):  # einops 0.2.0, 0.5.0, 0.6.0
                if hasattr(einops, name):
                    allow_in_graph(getattr(einops, name))

    _allow_in_graph_einops.__module__ = decorators.__name__
    _allow_in_graph_einops.__qualname__ = "_allow_in_graph_einops"
    return _allow_in_graph_einops


def apply(decorators: ModuleType, release: Release) -> Revert:
    """Put 2.8's _allow_in_graph_einops in place of 2.7's, both in
    torch._dynamo.decorators and in dynamo's pending module-init list;
    return the undo."""
    original = vars(decorators).get("_allow_in_graph_einops")
    _patching.check(original, "torch._dynamo.decorators._allow_in_graph_einops", VERIFIED, FIXED)
    trace_rules = decorators.trace_rules
    # A defaultdict: .get() so that looking does not add an entry.
    pending = trace_rules._lazy_module_init.get("einops")
    if not isinstance(pending, list) or original not in pending:
        raise _patching.Unrecognised(
            "trace_rules._lazy_module_init holds no pending _allow_in_graph_einops "
            "(dynamo has already initialised einops, or registers it differently)")
    fixed = _fixed_function(decorators)
    revert_attribute = _patching.replace_attribute(
        decorators, "_allow_in_graph_einops", fixed, VERIFIED, FIXED)
    pending[pending.index(original)] = fixed

    def revert() -> None:
        revert_attribute()
        still = trace_rules._lazy_module_init.get("einops")
        if isinstance(still, list) and fixed in still:
            still[still.index(fixed)] = original

    return revert


# The first einops call is the compiled one: an eager call before it would
# import einops._torch_specific itself and hide the bug.
REPRODUCER = r"""
import sys
try:
    import einops
except ImportError:
    print("skipped: needs einops")
    sys.exit(77)
import torch

def f(x):
    return einops.rearrange(x, "b c -> c b")

x = torch.arange(6.0).reshape(2, 3)
got = torch.compile(f, backend="eager", fullgraph=True)(x)
assert torch.equal(got, x.t()), (got, x.t())
"""

BACKPORT = Backport(
    name=NAME,
    summary="torch.compile puts einops' rearrange, reduce, repeat, einsum, pack and "
    "unpack in the graph (einops >= 0.7), instead of failing on set.symmetric_difference",
    headline=(
        "`Unsupported … symmetric_difference` for einops under "
        "`torch.compile(fullgraph=True)`"
    ),
    upstream=(
        "https://github.com/pytorch/pytorch/pull/157600",
        "https://github.com/pytorch/pytorch/issues/153476",
        "https://github.com/pytorch/pytorch/issues/157601",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 8, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Dynamo does not know how to trace method `symmetric_difference`",
    readme_symptom=(
        "`torch._dynamo.exc.Unsupported … symmetric_difference` for "
        "`einops.rearrange`/`reduce`/`repeat` under `torch.compile(fullgraph=True)` "
        "(graph breaks without it), einops ≥ 0.7 on 2.7.0, ≥ 0.8.2 on 2.7.1"
    ),
    readme_fix=(
        "puts 2.8's `_allow_in_graph_einops` (import `einops._torch_specific`, whatever "
        "the einops version) in place of 2.7's version-gated one, in "
        "`torch._dynamo.decorators` and in dynamo's pending lazy-init list. einops itself "
        "is imported only when dynamo meets it, as stock torch does."
    ),
)
