"""A Python float argument of a torch.compile'd function (a clamp bound, a
fill value) no longer keeps an old value after a recompile: the float symbols
that the tensorify pass cannot turn into tensor compute are specialized by
restarting Dynamo, not by a guard that AOTAutogradCache drops.

Upstream:
  https://github.com/pytorch/pytorch/pull/195040   the fix (first in 2.15.0)
  https://github.com/pytorch/pytorch/issues/194976 the bug
  https://github.com/NVIDIA/Megatron-LM/issues/6918 clamped_swiglu, the same

A silent wrong result, forward and backward, with the default inductor
backend (and specialize_float=False, the default in every release read):

  >>> def f(x, limit):
  ...     gate, up = x.chunk(2, -1)
  ...     return F.silu(gate).clamp(max=limit) * up.clamp(-limit, limit)
  >>> g = torch.compile(f)
  >>> x = torch.randn(4, 8, requires_grad=True) * 3
  >>> [(g(x, s) - f(x, s)).abs().max().item() for s in (0.5, 1.0, 2.0, 3.0)]
  [0.0, 0.0, 3.0, 5.54]                       # stock 2.13.0, CPU

The first call compiles with the float as a constant; the second makes it
dynamic: a 0-d tensor input and an item() that gives a backed SymFloat. The
tensorify pass (torch/fx/passes/_tensorify_python_scalars.py) turned the
backward's gt/lt.Scalar uses of that symbol into tensor compute, but not
clamp_min/clamp_max.default. Its last sweep then replaced the leftover use by
guard_scalar(val): the current value (1.0) burned into the joint graph with
only a ShapeEnv guard, and, the symbol being among the tensorified ones, no
TensorifyState.specialize and restart. AOTAutogradCache keys the entry by
the Dynamo graph, which is the same for every value of the float, and
prunes guards on symbols that are not placeholder SymInts. The third value
fails the guard, Dynamo recompiles the same graph, the cache hands back the
entry with 1.0 in it, and the result is wrong, in the forward and the
backward. Any op the pass does not tensorify does the same beside one it
does (torch.full_like(x, v) + x * v; x.pow(p) + x * p without grad).

2.15.0 changes the file in three places, all carried here:
  * the sweep marks every float symbol of such a node with
    TensorifyState.specialize and restarts analysis (should_restart), even
    when other uses were tensorified, so that Dynamo bakes the value into its
    graph: the value is in the cache key and its guard is in place before
    anything is cached. The guard_scalar replacement stays as it was (the
    graph that runs it is thrown away by the restart);
  * SUPPORTED_OPS maps clamp_min.default and clamp_max.default to their
    .Tensor overloads, so a clamp bound is tensorified like a mul operand
    and the clamp case needs no restart, and no recompile per value;
  * failed_tensorify_ops.update(str(node.target)) becomes .add(...) (the
    metrics set held the target's characters; metrics only).
The first is written from PR #195040's description and 2.15.0's code, with
2.15.0's comment; which PR brought the other two is not known (the search
tool gave the PR's description, not its diff), so they are carried as the
2.15.0 code. The PR's tests (test/ files) are not carried; the reproducer
covers the clamp case and an op that 2.15.0 does not tensorify either
(full_like), which takes the restart.

Read from each release's torch/fx/passes/_tensorify_python_scalars.py:

  release          patched function                      fingerprint
  2.7.0            tensorify_python_scalars              0ed6f33bc80c3712
  2.8.0            tensorify_python_scalars              2881a63ed168759e
  2.9.0, 2.9.1     tensorify_python_scalars              ead330694fa84d81
  2.10.0           tensorify_python_scalars              fe857a87987193bf
  2.11.0           tensorify_python_scalars              a3710bd174269bf0
  2.12.0, 2.12.1   _tensorify_impl                       7b423ec2514d28f7
  2.13.0           _tensorify_impl                       9151d98216bb9a4a
  2.14.0, 2.14.1   _tensorify_impl                       881aaff5d8837bbd
  2.15.0           _tensorify_impl (the fix)             a72f4c2d3d87b0ab

The sweep with guard_scalar and the restart that skips tensorified symbols
is older than 2.7 (pytorch/pytorch#138868, #140346, 2024); every release
read has it. 2.12 moved the body of tensorify_python_scalars into
_tensorify_impl, which the former calls through the module's global; before
that the body is tensorify_python_scalars itself, which 2.7 and 2.8's
torch._functorch._aot_autograd.jit_compile_runtime_wrappers and 2.9 - 2.11's
graph_compile import by name (`from ... import tensorify_python_scalars`).
Those modules import this one, so normally they bind the fixed function
after the patch; should one hold the original already, it is set there too,
and put back by the undo. The copy is made without the function's
@compatibility decorator (whose only work, a docstring note and a registry
entry, the original has done already).

In 2.7.0 failed_tensorify_ops is filled differently (from node.users, no
`.update(str(node.target))`), so that edit is not made there.

Cache keys: the backport changes what inductor compiles (the clamp bound as
a tensor input; a specialized constant after a restart) and, above all, what
is stored under a key. A stock process saves, under the key of the Dynamo
graph with the dynamic float, an entry with a value burned in and no guard
that survives the cache; a fixed process compiles the same Dynamo graph, and
AOTAutogradCache looks it up before the tensorify pass runs, so it would be
served that entry, wrong value and all. So the backport declares
changes_codegen: while it is applied, the FX graph cache and AOTAutogradCache
keys name it (torch_backports._cache_key), and neither process is served the
other's entries.

The reproducer (torch-backports verify, 2026-12-06) failed on stock 2.7.0,
2.10.0, 2.13.0 and 2.14.1 with the symptom (on 2.13.0: "compiled
clamped_swiglu with the float 1.0: stale value, forward off by 0.75,
gradient off by 0.4712") and passed with the patch there; stock 2.15.0
passes it. On 2026-12-07 a stock run on every claimed CI release (2.7.0,
2.9.1, 2.10.0, 2.11.0, 2.12.1, 2.13.0, 2.14.1; docs/cells.md) failed the same
way (2.7.0: "filled with the float 2.0 ..."), and each passed with the patch.
The releases not in CI (2.7.1, 2.8.0, 2.9.0, 2.12.0) are claimed on the
code: the same sweep, the same edits, and a status run there found the
fingerprint accepted (tests/matrix.py --status-only).

Not carried, not fixed here: with requires_grad, x.abs().pow(p) + x * p
fails on stock 2.13.0, patched or not, in inductor's lowering of
_local_scalar_dense (KeyError: 'unbacked_bindings'; fake propagation of
pow.Tensor_Scalar had replaced the symbol by its value, so the sweep sees no
free symbol); 2.15.0 compiles it, through changes elsewhere. Other float
parameters that fake propagation specializes (norm eps, interpolate's
scale_factor: pytorch/pytorch#197889) stay stale in 2.15.0 too.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "tensorify-float-stale-cache"

# The function whose body holds the pass, by release.
VERIFIED_OUTER = {
    "0ed6f33bc80c3712": "2.7.0",
    "2881a63ed168759e": "2.8.0",
    "ead330694fa84d81": "2.9.0, 2.9.1",
    "fe857a87987193bf": "2.10.0",
    "a3710bd174269bf0": "2.11.0",
}
VERIFIED_IMPL = {
    "7b423ec2514d28f7": "2.12.0, 2.12.1",
    "9151d98216bb9a4a": "2.13.0",
    "881aaff5d8837bbd": "2.14.0, 2.14.1",
}
VERIFIED = {**VERIFIED_OUTER, **VERIFIED_IMPL}
FIXED_IMPL = {"a72f4c2d3d87b0ab": "2.15.0"}
FIXED = FIXED_IMPL

# The modules that import tensorify_python_scalars by name, by release.
HOLDERS = (
    "torch._functorch._aot_autograd.jit_compile_runtime_wrappers",  # 2.7, 2.8
    "torch._functorch._aot_autograd.graph_compile",  # 2.9 - 2.15
)

# pytorch/pytorch#195040, in the dedented source of the function (its body
# at 4 spaces): before the leftover node is replaced by guard_scalar(val),
# its float symbols are marked for specialization and analysis restarts.
RESTART = (
    "                    node.replace_all_uses_with(guard_scalar(val))\n",
    "                    # This node has a live use we could not tensorify, so its\n"
    "                    # symfloats must be specialized by restarting analysis and\n"
    "                    # letting Dynamo bake the values into its output graph,\n"
    "                    # even if other uses of the same symbol were tensorified.\n"
    "                    # Specializing only here, by burning the hint into this\n"
    "                    # joint graph with a local ShapeEnv guard, is unsound with\n"
    "                    # caching: AOTAutogradCache keys on the graph, which is\n"
    "                    # identical for any value of the float, and prunes guards\n"
    "                    # on symbols that are not placeholder symints, so the\n"
    "                    # cached artifact would be silently reused for other\n"
    "                    # values of the float (#194976; torch-backports).\n"
    "                    for s in val.node.expr.free_symbols:\n"
    "                        name = str(s)\n"
    "                        if not TensorifyState.should_specialize(name):\n"
    "                            TensorifyState.specialize(name)\n"
    "                            should_restart = True\n"
    "\n"
    "                    node.replace_all_uses_with(guard_scalar(val))\n",
)
# 2.15.0: the metrics set gets the target, not its characters (2.8 - 2.14).
ADD = ("failed_tensorify_ops.update(str(node.target))",
       "failed_tensorify_ops.add(str(node.target))")
# The copy of tensorify_python_scalars (2.7 - 2.11) is made without its
# decorator, on the decorator's line, so line numbers stay the file's.
UNDECORATED = ("@torch.fx._compatibility.compatibility(is_backward_compatible=False)\n", "\n")


def _edits(source: str) -> "list[tuple[str, str]]":
    edits = [RESTART]
    if ADD[0] in source:
        edits.append(ADD)
    if source.startswith(UNDECORATED[0]):
        edits.append(UNDECORATED)
    return edits


def _supported_ops(module: ModuleType) -> "list[tuple[object, object]]":
    """2.15.0's new SUPPORTED_OPS entries, checked absent from this release's."""
    import torch

    table = vars(module).get("SUPPORTED_OPS")
    if not isinstance(table, dict):
        raise _patching.Unrecognised("%s has no SUPPORTED_OPS dict" % module.__name__)
    aten = torch.ops.aten
    entries = [(aten.clamp_min.default, aten.clamp_min.Tensor),
               (aten.clamp_max.default, aten.clamp_max.Tensor)]
    for key, _ in entries:
        if key in table:  # 2.15.0's entry: this build carries the fix
            raise _patching.CarriesFix("%s.SUPPORTED_OPS has %s already, as in torch 2.15.0"
                                       % (module.__name__, key))
    return entries


def apply(module: ModuleType, release: Release) -> Revert:
    """Replace the pass's body (_tensorify_impl from 2.12, before that
    tensorify_python_scalars and the names other modules hold of it) by the
    installed one with 2.15.0's sweep, and add 2.15.0's clamp entries to
    SUPPORTED_OPS; return the undo."""
    if "_tensorify_impl" in vars(module):
        name, verified = "_tensorify_impl", VERIFIED_IMPL
        fixed_prints = FIXED_IMPL
    else:
        name, verified = "tensorify_python_scalars", VERIFIED_OUTER
        fixed_prints = {}
    original, _ = _patching.own_attribute(module, name)
    entries = _supported_ops(module)  # checked before anything changes
    fixed = _patching.rewritten(original, _edits, verified, fixed_prints)
    reverts = [_patching.replace_attribute(module, name, fixed, verified, fixed_prints)]
    undo = _patching.undo_all(reverts)

    table = module.SUPPORTED_OPS
    table.update(entries)

    def unsupport() -> None:
        for key, value in entries:
            if table.get(key) is value:
                del table[key]

    reverts.append(unsupport)
    if name == "tensorify_python_scalars":
        # Normally a holder is still importing this module and binds the
        # name afterwards; should one have bound the original already, fix it.
        reverts.append(_patching.rebind(HOLDERS, name, original, fixed))
    return undo


# The clamped SwiGLU (forward and backward), and an op that 2.15.0
# does not tensorify either beside one it does (full_like and *), each
# compiled with inductor and the float dynamic from the first call, then
# called with other values: stock torch serves the first value's graph from
# AOTAutogradCache for the others.
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
import torch.nn.functional as F

def clamped_swiglu(x, limit):
    gate, up = torch.chunk(x, 2, dim=-1)
    return F.silu(gate).clamp(max=limit) * up.clamp(min=-limit, max=limit)

def filled(x, value):
    return torch.full_like(x, value) + x * value

torch.manual_seed(0)
x0 = torch.randn(4, 8) * 3
for f in (clamped_swiglu, filled):
    compiled = torch.compile(f, backend="inductor", dynamic=True)
    for value in (0.5, 1.0, 2.0):
        x = x0.clone().requires_grad_()
        xe = x0.clone().requires_grad_()
        got, want = compiled(x, value), f(xe, value)
        off = (got - want).abs().max().item()
        got.sum().backward()
        want.sum().backward()
        grad_off = (x.grad - xe.grad).abs().max().item()
        if off > 1e-5 or grad_off > 1e-5:
            raise AssertionError(
                "compiled %s with the float %s: stale value, forward off by %.4g, "
                "gradient off by %.4g" % (f.__name__, value, off, grad_off))
"""

BACKPORT = Backport(
    name=NAME,
    summary="a Python float argument of a torch.compile'd function (a clamp bound) no "
    "longer keeps an old value after recompiles (AOTAutogradCache served a graph with "
    "the value burned in; silent wrong result)",
    headline="**stale cache hit**: a float argument keeps its old value after recompiles",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/195040",
        "https://github.com/pytorch/pytorch/issues/194976",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="stale value, forward off by",
    changes_codegen=True,
    readme_symptom=(
        "**stale cache hit, wrong result**: a Python float argument of a compiled function "
        "(a clamp bound, Megatron-LM's `clamped_swiglu`) keeps an old value after "
        "recompiles: the AOTAutograd cache serves a graph with the old value burned in, "
        "forward and gradient off"
    ),
    readme_fix=(
        "2.15's final pass of the tensorify pass ([pytorch#195040]): a float symbol left "
        "over after the supported uses are turned into tensor compute is marked for "
        "specialization and Dynamo restarts, so the value goes into Dynamo's graph, "
        "guarded, before anything is cached; `clamp_min`/`clamp_max` bounds become tensor "
        "compute, as in 2.15, so a clamp needs no recompile per value. A text edit of "
        "the installed `_tensorify_impl` (2.12+) or `tensorify_python_scalars` (before), "
        "and the copies other modules imported by name. It changes what inductor compiles "
        "and the cache keys cannot tell the values apart, so the FX graph and "
        "AOTAutograd cache keys name it: neither a stock nor a fixed process is served "
        "the other's entries. Carried less: the PR's tests (the reproducer covers the "
        "clamp case and `full_like`, which takes the restart); two smaller 2.15 edits of "
        "the same pass whose PR is not known are carried as 2.15.0's code. Not fixed, "
        "in 2.15.0 either: other floats that fake propagation specializes (norm eps, "
        "`interpolate`'s scale_factor, [pytorch#197889]); `x.abs().pow(p) + x * p` with "
        "grad still fails in inductor on 2.13.0, patched or not (2.15.0 compiles it "
        "through changes elsewhere)."
    ),
)
