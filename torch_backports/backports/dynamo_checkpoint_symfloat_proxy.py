"""torch.compile with dynamic shapes traces a module that holds a Python
float (nn.RMSNorm's eps) and is activation-checkpointed at two call sites,
instead of failing with "lift_tracked_freevar_to_input should not be called
on root SubgraphTracer".

Upstream:
  https://github.com/pytorch/pytorch/pull/193254   the fix (first in 2.15.0)
  https://github.com/pytorch/pytorch/issues/193194 the bug

  >>> block = Block()        # nn.RMSNorm(8, eps=1e-6), then nn.Linear(8, 8)
  >>> def f(x):
  ...     y = checkpoint(block, x, use_reentrant=False)
  ...     return checkpoint(block, y, use_reentrant=False)
  >>> x = torch.randn(4, 8, requires_grad=True)
  >>> torch.compile(f, backend="eager", dynamic=True)(x)
  torch._dynamo.exc.InternalTorchDynamoError: AssertionError:
  lift_tracked_freevar_to_input should not be called on root SubgraphTracer

With dynamic shapes, dynamo does not specialize on a float attribute such as
RMSNorm.eps: VariableBuilder.wrap_symfloat makes it a float64 tensor input of
the root graph (root_tracer.create_graph_input) and then an `.item()` of it,
the SymFloat the traced code sees, and dynamo keeps the result per source for
the rest of the frame (OutputGraph.unspec_variable_map, and the variable
tracker cache). The `.item()` proxy was created with
tx.output.create_proxy, i.e. on whichever tracer is current. When eps is
first read inside a checkpoint body, that is the checkpoint HOP's subgraph
tracer; the second checkpoint call is a sibling subgraph, which gets the
cached proxy back, finds it belongs to no tracer among its parents, and
lifting it as a free variable walks up to the root tracer, which asserts.
2.15.0 creates the `.item()` proxy on root_tracer, like the input it reads,
so every subgraph lifts it from the root graph as usual.

Read from each release's torch/_dynamo/variables/builder.py:

  release           VariableBuilder.wrap_symfloat   the .item() proxy on
  2.7.0             8b6779a195ef0b72                 the current tracer
  2.8.0 - 2.9.1     88426986c3207e91                 the current tracer
  2.10.0            6e4656b11c0cc1c7                 the current tracer
  2.11.0 - 2.12.1   14158bcbedeb0e94                 the current tracer
  2.13.0 - 2.14.1   bd46a85f2caea238                 the current tracer
  2.15.0            c311b9f1cc6094b9                 root_tracer (the fix)

Every release read, 2.7.0 - 2.14.1, creates the `.item()` proxy the same
way, but the float gets that far at the first compile only from 2.10, whose
wrap_symfloat makes every float dynamic under `dynamic=True`
(assume_static_by_default False); 2.7 - 2.9 specialize a float until its
value changes between calls (automatic dynamic) and then recompile with it
dynamic. The reproducer therefore runs twice, the second time with another
eps. It failed with the assertion on stock 2.7.0, 2.9.1, 2.10.0, 2.12.1,
2.13.0 and 2.14.1 (2.7.0 at the second round, 2.10.0 at the first: seen),
and passed with the patch on all six; it passes on stock 2.15.0
(2026-12-06). 2.8.0, 2.9.0, 2.11.0, 2.12.0 and 2.14.0 were not run; each
has the fingerprint of a release that was. Releases whose wheels were not
read (2.7.1, 2.11.1, ...) are patched only where the method has a
fingerprint above.

The patch makes upstream's edit in the installed method (see Cost for
when): `self.tx.output.create_proxy(` becomes
`self.tx.output.root_tracer.create_proxy(`, on the same line, so torch's
line numbers stay right in tracebacks. The method is called only through
`self.wrap_symfloat` (wrap_unspecialized_primitive, and from 2.11
_wrap_symfloat_for_lazy), which looks it up on the class at each call, so
setting it on VariableBuilder reaches every caller.

Not carried: the PR's comment on the call (why root_tracer; the edit cites
the PR instead), its added comment in OutputGraph's
lift_tracked_freevar_to_input (a comment only: the assertion and its message
are unchanged), and its test (per the PR thread a minimal checkpoint case
with fullgraph=True, a compile count, requires_grad and backward; its text
was not found in the search index, and the reproducer below is such a
case). The patch changes the graph dynamo captures where a float is first
read inside a HOP body (the `.item()` node moves to the root graph, and the
body takes its result as a lifted input, as on stock when the float is first
read outside the HOP, and as on 2.15); the compile caches hash that graph
itself, and nothing inductor generates from a given graph changes, so the
backport does not declare changes_codegen.

Cost: dynamo's builder is imported by inductor whether or not anything is
compiled, and checking the fingerprint reads the source of wrap_symfloat,
some 2,000 - 3,600 lines into builder.py. So apply() puts a stand-in in
place (_patching.rewritten_on_first_call), which checks the fingerprint and
compiles the fix at the first call: the first float that dynamo wraps
from a source, inside a compile. wrap_symfloat has no zero-argument super(), so its copy is
compiled directly, not through ast.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "dynamo-checkpoint-symfloat-proxy"

VERIFIED = {
    "8b6779a195ef0b72": "2.7.0",
    "88426986c3207e91": "2.8.0, 2.9.0, 2.9.1",
    "6e4656b11c0cc1c7": "2.10.0",
    "14158bcbedeb0e94": "2.11.0, 2.12.0, 2.12.1",
    "bd46a85f2caea238": "2.13.0, 2.14.0, 2.14.1",
}
FIXED = {"c311b9f1cc6094b9": "2.15.0"}

# pytorch/pytorch#193254, in the dedented source of wrap_symfloat, where each
# verified release creates one proxy, the `.item()` call, through
# tx.output.create_proxy (its graph input goes through root_tracer already).
EDITS = [
    (
        "        self.tx.output.create_proxy(\n",
        "        self.tx.output.root_tracer.create_proxy(  # pytorch/pytorch#193254\n",
    ),
]


def apply(builder: ModuleType, release: Release) -> Revert:
    """Replace builder.VariableBuilder.wrap_symfloat by the installed one with
    the `.item()` proxy made on the root tracer; return the undo."""
    owner = _patching.own_class(builder, "VariableBuilder")
    return _patching.rewritten_on_first_call(owner, "wrap_symfloat", EDITS, VERIFIED, FIXED)


# The structure at its smallest: one block holding an RMSNorm with a
# float eps, checkpointed (non-reentrant) at two call sites in one compiled
# frame, with dynamic shapes; then the backward through both checkpoints.
# From 2.10 dynamic=True makes eps a SymFloat at the first compile; 2.7 - 2.9
# still specialize a float until it changes (automatic dynamic), so the
# second round, with another eps, recompiles with eps dynamic.
REPRODUCER = r"""
import torch
from torch.utils.checkpoint import checkpoint

if not hasattr(torch.nn, "RMSNorm"):
    print("skipped: needs torch.nn.RMSNorm")
    raise SystemExit(77)

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(8, eps=1e-6)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(self.norm(x))

torch.manual_seed(0)
block = Block()

def f(x):
    y = checkpoint(block, x, use_reentrant=False)
    return checkpoint(block, y, use_reentrant=False)

compiled = torch.compile(f, backend="eager", dynamic=True, fullgraph=True)
for eps in (1e-6, 1e-5):
    block.norm.eps = eps
    x = torch.randn(4, 8, requires_grad=True)
    want = f(x)
    want.sum().backward()
    want_grad, x.grad = x.grad, None
    got = compiled(x)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    torch.testing.assert_close(x.grad, want_grad)
"""

BACKPORT = Backport(
    name=NAME,
    summary="torch.compile with dynamic shapes traces a module with a float attribute "
    "(nn.RMSNorm's eps) checkpointed at two call sites, instead of failing with "
    "'lift_tracked_freevar_to_input should not be called on root SubgraphTracer'",
    headline="`lift_tracked_freevar_to_input` assertion: checkpointed block with a float attribute",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/193254",
        "https://github.com/pytorch/pytorch/issues/193194",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="lift_tracked_freevar_to_input should not be called on root SubgraphTracer",
    readme_symptom=(
        "`AssertionError: lift_tracked_freevar_to_input should not be called on root "
        "SubgraphTracer` from `torch.compile` with dynamic shapes of a block holding a float "
        "attribute (`nn.RMSNorm`'s eps) that is activation-checkpointed "
        "(`use_reentrant=False`) at two call sites (2.7 – 2.9: once the float's value changes)"
    ),
    readme_fix=(
        "[pytorch#193254]'s one-word edit in `VariableBuilder.wrap_symfloat`: the float's "
        "`.item()` proxy is created on the root tracer, like the graph input it reads, so "
        "a second checkpoint body lifts it from the root graph instead of asserting. "
        "Checked and compiled at the method's first call, so importing dynamo costs "
        "nothing more. Not carried: the PR's comments."
    ),
)
