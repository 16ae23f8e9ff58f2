"""torch.compile accepts a tensor subclass that has no __torch_dispatch__ of
its own (a bare `class T(torch.Tensor)`, or a __torch_function__-only one
such as torchvision's tv_tensors) instead of failing every op with
"Multiple dispatch failed".

Upstream:
  https://github.com/pytorch/pytorch/pull/193968   the fix (first in 2.15.0)
  https://github.com/pytorch/pytorch/issues/193932 the bug

  >>> class Plain(torch.Tensor): pass
  >>> a = torch.randn(3, 4).as_subclass(Plain)
  >>> torch.compile(lambda a, b: a @ b, backend="aot_eager")(a, torch.randn(4, 5))
  TypeError: Multiple dispatch failed for 'torch._ops.aten.mm.default'; all
  __torch_dispatch__ handlers returned NotImplemented            # 2.11 - 2.14
  (with inductor: 'torch._ops.aten.mm.out', from its extern mm kernel)

AOTAutograd runs the traced graph under _AnalyzeCustomOpInputOutputMode, a
dispatch mode that checks custom ops for aliasing. Its __torch_dispatch__
returned NotImplemented, to defer to the tensor's own handler, for every
tensor whose type is not in proxy_tensor's HANDLED_TYPES (Tensor,
Parameter, FakeTensor). A subclass without __torch_dispatch__ has no handler
to defer to, so the op failed outright. 2.15.0 defers only for a tensor
that is not fake and whose type overrides __torch_dispatch__ (its
__torch_dispatch__ is not torch._C._disabled_torch_dispatch_impl).

Read from each release's torch/_functorch/_aot_autograd/runtime_wrappers.py:

  release                  _AnalyzeCustomOpInputOutputMode.__torch_dispatch__
  2.9.1, 2.10.0            absent (no such mode; not affected)
  2.11.0 - 2.14.1          f7aa2bbdf26e20e4   `type(...) not in HANDLED_TYPES`
                           (2.11.0, 2.12.0, 2.12.1, 2.13.0, 2.14.1 read)
  2.15.0                   c6905ca6ba67b19e   the fix

The backport makes upstream's edit in the installed method
(torch_backports._patching.rewritten). Upstream's condition calls
fake_tensor.is_fake_tensor, which 2.14 added (it also knows C++ fakes, which
2.14 added too: torch._C._is_fake_tensor). On 2.14.x the module imports it
and the edit is upstream's text; on 2.11 - 2.13, which have neither, the
edit tests isinstance(..., FakeTensor), which is what is_fake_tensor
answers there. Only the method changes, so nothing that inductor generates
changes, and no cache key needs to.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "aot-bare-subclass-dispatch"

VERIFIED = {"f7aa2bbdf26e20e4": "2.11.0, 2.12.0, 2.12.1, 2.13.0, 2.14.1"}
FIXED = {"c6905ca6ba67b19e": "2.15.0"}

OLD = "        if type(underlying_tensor) not in HANDLED_TYPES:\n"
# pytorch/pytorch#193968, in the dedented source of __torch_dispatch__;
# %s is how the release tells a fake tensor (see the docstring).
NEW = (
    "        # A subclass with no __torch_dispatch__ has no handler to defer to\n"
    "        # (torch-backports: pytorch/pytorch#193968).\n"
    "        if (\n"
    "            not %s\n"
    "            and type(underlying_tensor).__torch_dispatch__\n"
    "            is not torch._C._disabled_torch_dispatch_impl\n"
    "        ):\n"
)


def apply(runtime_wrappers: ModuleType, release: Release) -> Revert:
    """Replace _AnalyzeCustomOpInputOutputMode.__torch_dispatch__ by the
    installed one with 2.15.0's condition; return the undo."""
    owner = _patching.own_class(runtime_wrappers, "_AnalyzeCustomOpInputOutputMode")
    method = vars(owner).get("__torch_dispatch__")
    if method is None:
        raise _patching.Unrecognised("_AnalyzeCustomOpInputOutputMode has no __torch_dispatch__")
    if "is_fake_tensor" in vars(runtime_wrappers):
        fake = "is_fake_tensor(underlying_tensor)"
    else:
        fake = "isinstance(underlying_tensor, torch._subclasses.fake_tensor.FakeTensor)"
    # TorchDispatchMode.__init_subclass__ sets the class's __torch_dispatch__
    # to torch._disable_dynamo(raw, recursive=True) (2.11 - 2.15): rewrite the
    # raw method and wrap the copy the same way.
    raw = getattr(method, "__wrapped__", method)
    fixed = _patching.rewritten(raw, [(OLD, NEW % fake)], VERIFIED, FIXED)
    if raw is not method:
        import torch

        fixed = torch._disable_dynamo(fixed, recursive=True)
    return _patching.replace_attribute(owner, "__torch_dispatch__", fixed, VERIFIED, FIXED)


# The PR's cases: a bare subclass and a __torch_function__-only one, each
# compiled with aot_eager (no C++ compiler needed) and compared with eager.
REPRODUCER = r"""
import torch

class Plain(torch.Tensor):
    pass

class OnlyTorchFunction(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})

def f(a, b):
    return (a @ b).relu() + 1

# aot_eager fails at aten.mm.default; inductor at aten.mm.out, from its extern
# mm kernel (the issue's report), where a C++ compiler builds the rest.
backends = ["aot_eager"]
try:
    from torch._inductor import cpp_builder
    cpp_builder.get_cpp_compiler()
    backends.append("inductor")
except Exception:
    pass
for backend in backends:
    for cls in (Plain, OnlyTorchFunction):
        torch._dynamo.reset()
        a = torch.randn(3, 4).as_subclass(cls)
        b = torch.randn(4, 5)
        want = f(a, b)
        got = torch.compile(f, backend=backend, fullgraph=True)(a, b)
        torch.testing.assert_close(got.as_subclass(torch.Tensor), want.as_subclass(torch.Tensor))
"""

BACKPORT = Backport(
    name=NAME,
    summary="torch.compile accepts a tensor subclass without __torch_dispatch__ (a bare "
    "subclass, tv_tensors) instead of failing with 'Multiple dispatch failed'",
    headline=(
        "`Multiple dispatch failed` compiling with a tensor subclass without "
        "`__torch_dispatch__`"
    ),
    upstream=(
        "https://github.com/pytorch/pytorch/pull/193968",
        "https://github.com/pytorch/pytorch/issues/193932",
    ),
    first_affected=(2, 11, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Multiple dispatch failed for 'torch._ops.aten.mm",
    readme_symptom=(
        "`TypeError: Multiple dispatch failed for 'torch._ops.aten.mm.default'` "
        "(`aten.mm.out` with inductor) when compiling with a tensor subclass that has no `__torch_dispatch__` (a bare `class "
        "T(torch.Tensor)`, torchvision's `tv_tensors`)"
    ),
    readme_fix=(
        "2.15's condition in `_AnalyzeCustomOpInputOutputMode.__torch_dispatch__`: the "
        "mode defers only to a non-fake tensor whose type has its own "
        '`__torch_dispatch__`. On 2.11 – 2.13, which have no `is_fake_tensor`, "fake" is '
        "`isinstance(…, FakeTensor)`, what that function answers there. The "
        "reproducer covers what the PR describes: a bare subclass and a "
        "`__torch_function__`-only one, through `aot_eager` (`aten.mm.default`) and "
        "inductor (its extern mm's `aten.mm.out`); pointwise ops, which inductor never "
        "re-dispatches, compiled before the fix too."
    ),
)
