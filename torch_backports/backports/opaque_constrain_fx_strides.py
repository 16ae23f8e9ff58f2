"""Inductor's needs_fixed_stride_order constraint leaves opaque-object arguments alone.

Upstream:
  https://github.com/pytorch/pytorch/pull/177991  the fix (first in 2.12.0)
  https://github.com/pytorch/pytorch/issues/175973 the upstream report
  vLLM carries a copy gated torch >= 2.11, < 2.12.0.dev (vllm/env_override.py,
  _apply_constrain_to_fx_strides_patch, "crashes on FakeScriptObject (the
  compile-time proxy for hoisted opaque types)"); the gate is where vLLM
  started passing opaque objects, not where the bug starts.

An opaque object (torch._library.opaque_object.register_opaque_type, new in
2.10) that is an input of the compiled graph -- every reference type, and on
2.11 a value type registered with hoist=True -- reaches Inductor as a
placeholder whose meta["val"] is a FakeScriptObject, and GraphLowering turns it
into ir.TorchBindObject, an IRNode (a NonTensorObj). When a custom op tagged
torch.Tag.needs_fixed_stride_order takes it, lowering.constrain_to_fx_strides
treats every IRNode argument as a tensor and calls
fx_arg.meta["val"].stride() on it, and FakeScriptObject refuses every
attribute it does not have:

  torch._inductor.exc.InductorError: LoweringException: AttributeError: Tried
  to call __getattr__ with attr 'stride' on a FakeScriptObject, ...

PR 177991 adds lowering._is_tensor_irnode (an IRNode that is not an
ir.NonTensorObj) and makes constrain_to_fx_strides constrain only such nodes,
and only when the FX value is a torch.Tensor. The same PR also switches
require_dense / require_contiguous / require_contiguous_strides /
require_channels_last / sdpa_constraint to _is_tensor_irnode and lets
constrain_to_fake_tensor skip opaque values; those are other layout tags'
paths and not part of this backport. This patch makes PR 177991's edit to
constrain_to_fx_strides, spelling _is_tensor_irnode out inline
(ir.NonTensorObj exists in 2.10 and 2.11; 2.12's ir.OpaqueMultiOutput, which
PR 178691 later adds to _is_tensor_irnode, does not).

Read from torch/_inductor/lowering.py of each wheel (constrain_to_fx_strides):

  release          constrain_to_fx_strides  register_opaque_type
  2.6.0 - 2.9.1    5438eb9184b60c9b         absent (torch._library.opaque_object is new in 2.10)
  2.10.0, 2.11.0   92b3f6bebfefc8ba (bug)   present (2.11: classes must subclass torch._opaque_base.OpaqueBase)
  2.12.0, 2.12.1   4960f652a88c1803 (fixed, PR 177991)
  2.13.0, 2.15.0   7166418cbf8810f2 (fixed; also recurses into lists/tuples
                   and reads fake values of non-Node arguments)

constrain_to_fx_strides is a module-level function without free variables
(its nested apply_constraint is a closure over its own cell, which the
compiled copy recreates), so _patching.rewritten applies to it. Callers that
look it up at call time see the patch: tag_to_layout_constraint, the path of a
tagged custom op, reads the module global. kernel/conv.py, which imports it
by name while lowering.py is still being imported, is rebound to the fixed
one, as 2.12 has it there. Entries that add_layout_constraint made before the
patch (for aten.convolution_backward and comm_lowering's c10d ops) keep the
shipped function: their arguments are tensors, so they never meet an opaque
object.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "opaque-constrain-fx-strides"

VERIFIED = {"92b3f6bebfefc8ba": "2.10.0 - 2.11.0"}
FIXED = {
    "4960f652a88c1803": "2.12.0 - 2.12.1",
    "7166418cbf8810f2": "2.13.0 - 2.15.0",
}

# pytorch/pytorch#177991's change to apply_constraint inside
# constrain_to_fx_strides, with _is_tensor_irnode(arg) written out.
EDITS = [
    ('''        if isinstance(arg, ir.IRNode):
            stride_order = ir.get_stride_order(
                fx_arg.meta["val"].stride(), V.graph.sizevars.shape_env
            )
''',
     '''        if isinstance(arg, ir.IRNode) and not isinstance(arg, ir.NonTensorObj):
            fake_val = fx_arg.meta.get("val")
            if not isinstance(fake_val, torch.Tensor):
                return arg
            stride_order = ir.get_stride_order(
                fake_val.stride(), V.graph.sizevars.shape_env
            )
'''),
]


def apply(lowering: ModuleType, release: Release) -> Revert:
    """Replace lowering.constrain_to_fx_strides by its own source with
    PR 177991's edit; return the undo."""
    shipped = vars(lowering)["constrain_to_fx_strides"]
    fixed = _patching.rewritten(shipped, EDITS, VERIFIED, FIXED)
    with _patching.all_or_nothing() as reverts:
        reverts.append(_patching.replace_attribute(lowering, "constrain_to_fx_strides", fixed,
                                                   VERIFIED, FIXED))
        # kernel/conv.py imports it by name while lowering.py is being
        # imported, so it holds the shipped one.
        reverts.append(_patching.rebind(["torch._inductor.kernel.conv"],
                                        "constrain_to_fx_strides", shipped, fixed))
    return _patching.undo_all(reverts)


# A reference-type opaque object passed, as a graph input, to a custom op
# tagged needs_fixed_stride_order, compiled with inductor on CPU and compared
# with eager. The op's other input is computed in the graph (x + 1), so the
# lowering has a pointwise kernel to compile: hence the C++ compiler check.
REPRODUCER = r'''
import os, sys, tempfile
# A fresh inductor cache, so that no cached graph skips the lowering.
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch

try:
    from torch._library.opaque_object import register_opaque_type
except ImportError:
    print("skipped: needs torch._library.opaque_object.register_opaque_type (torch >= 2.10)")
    sys.exit(77)
from torch._inductor import cpp_builder
try:
    cpp_builder.get_cpp_compiler()
except Exception as exc:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % exc)
    sys.exit(77)
try:  # 2.11 and later require opaque classes to derive from it; 2.10 has none
    from torch._opaque_base import OpaqueBase
except ImportError:
    OpaqueBase = object


class Scale(OpaqueBase):
    def __init__(self, factor):
        self.factor = factor


register_opaque_type(Scale, typ="reference")


@torch.library.custom_op("opaque_fx_strides_repro::scale", mutates_args=(),
                         tags=(torch.Tag.needs_fixed_stride_order,))
def scale(x: torch.Tensor, s: Scale) -> torch.Tensor:
    return x * s.factor


@scale.register_fake
def _(x, s):
    return torch.empty_like(x)


def f(x, s):
    return scale(x + 1, s) * 2


x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
s = Scale(3.0)
got = torch.compile(f, backend="inductor", fullgraph=True)(x, s)
assert torch.equal(got, f(x, s)), (got, f(x, s))
'''

BACKPORT = Backport(
    name=NAME,
    summary="inductor lowers custom ops tagged needs_fixed_stride_order that take an "
    "opaque object, instead of failing on FakeScriptObject.stride",
    headline=(
        "`LoweringException` on `FakeScriptObject.stride`: opaque object into a "
        "fixed-stride custom op"
    ),
    upstream=(
        "https://github.com/pytorch/pytorch/pull/177991",
        "https://github.com/pytorch/pytorch/issues/175973",
    ),
    first_affected=(2, 10, 0),
    first_fixed=(2, 12, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Tried to call __getattr__ with attr 'stride' on a FakeScriptObject",
    readme_symptom=(
        "`LoweringException: AttributeError: Tried to call __getattr__ with attr 'stride' "
        "on a FakeScriptObject` when an opaque object reaches a custom op tagged "
        "`needs_fixed_stride_order`"
    ),
    readme_fix=(
        "upstream's edit to `torch._inductor.lowering.constrain_to_fx_strides`: only "
        "tensor nodes with a tensor example value are asked for strides."
    ),
)
