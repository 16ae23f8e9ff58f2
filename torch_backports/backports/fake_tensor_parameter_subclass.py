"""FakeTensorMode handles a metadata-only subclass of nn.Parameter like nn.Parameter.

Upstream:
  https://github.com/pytorch/pytorch/pull/184871   the fix (first in 2.13.0)
  https://github.com/pytorch/pytorch/issues/174274  the report (vLLM ModelWeightParameter)
  https://github.com/pytorch/pytorch/pull/174278   the broader issubclass(..., Parameter)
                                                   check, abandoned upstream; NOT what we do

Symptom: with a subclass of torch.nn.Parameter that only adds attributes
(`class P(torch.nn.Parameter): pass`, vLLM's ModelWeightParameter), any op
under FakeTensorMode fails with

  TypeError: Multiple dispatch failed for 'torch._ops.aten.mm.default';
  all __torch_dispatch__ handlers returned NotImplemented

and torch.compile with torch._inductor.config.freezing = True (which
propagates fake tensors through the frozen parameters) ends in
BackendCompilerFailed wrapping that TypeError.

Cause: FakeTensorMode.dispatch returns NotImplemented ("[subclass inputs]")
when _check_for_subclass_arg(x) is true for some argument, so that a tensor
subclass gets its own __torch_dispatch__ turn. Up to 2.12.1 the check exempts
Tensor, FakeTensor and exactly torch.nn.Parameter (`type(x) is not
Parameter`). A Parameter subclass is not exempt, but it has no
__torch_dispatch__ of its own (it inherits Tensor's disabled one), so nobody
handles the op.

Fix (2.13.0, PR 184871): also exempt x when type(x) is a subclass of
Parameter AND type(x).__torch_dispatch__ is still Tensor.__torch_dispatch__
(torch._C._disabled_torch_dispatch_impl, a class attribute in every release
2.6 - 2.15, so `is` is reliable). A Parameter subclass that defines its own
__torch_dispatch__ still gets NotImplemented from FakeTensorMode and its own
turn, as before; one that defines only __torch_function__ counts as
metadata-only. A wrapper subclass made a Parameter (Parameter(TwoTensor(..)))
keeps its own type, which is not a Parameter subclass, and stays unrecognised.

Releases, read from the wheels (torch/_subclasses/fake_tensor.py):

  release          _check_for_subclass_arg          fingerprint
  2.6.0 - 2.12.1   exempts exact Parameter only     e0d1ca9bd9d02966
  2.13.0           PR 184871                        f88e6e9526d4639c
  2.15.0           PR 184871 + a `# noqa` comment   33da0f489ce8c548

The fix is entirely inside _check_for_subclass_arg. Its only callers,
FakeTensorMode._dispatch_impl and _check_for_subclass (same module, same
body in every release), look it up as a module global at call time, and
nothing else in torch imports it (torch/distributed/_local_tensor has its
own, unrelated copy), so replacing the module attribute is enough.
"""

from __future__ import annotations

import types
from types import ModuleType
from typing import Callable

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "fake-tensor-parameter-subclass"

VERIFIED = {"e0d1ca9bd9d02966": "2.6.0 - 2.12.1"}
FIXED = {"f88e6e9526d4639c": "2.13.0", "33da0f489ce8c548": "2.15.0"}


# Written from PR 184871. Its names (FakeTensor, Tensor, torch) are those of
# torch._subclasses.fake_tensor: apply() rebinds this code to that module's
# globals, so they are looked up there at call time, as the original does.
def _check_for_subclass_arg(x: object) -> bool:
    if isinstance(x, FakeTensor) or not isinstance(x, Tensor):  # noqa: F821
        return False
    kind = type(x)
    if kind is Tensor:  # noqa: F821
        return False
    # A Parameter subclass that only adds metadata inherits Tensor's disabled
    # __torch_dispatch__ and is handled like Parameter; one that dispatches
    # must still get its own turn.
    if (issubclass(kind, torch.nn.Parameter)  # noqa: F821
            and kind.__torch_dispatch__ is Tensor.__torch_dispatch__):  # noqa: F821
        return False
    return True


def apply(fake_tensor: ModuleType, release: Release) -> Revert:
    """Put a stand-in for fake_tensor._check_for_subclass_arg that checks the
    shipped one and installs 2.13's at its first call; return the undo. The
    same code for every affected release (one fingerprint). `import torch`
    loads fake_tensor but never calls the function: the check (reading its
    source) waits for the first fake-tensor dispatch, as on a pre-release of
    2.13.0, which is judged by this check."""
    def fixed() -> Callable:
        new = types.FunctionType(_check_for_subclass_arg.__code__, vars(fake_tensor),
                                 "_check_for_subclass_arg")
        new.__module__ = fake_tensor.__name__
        new.__qualname__ = "_check_for_subclass_arg"
        new.__doc__ = "torch-backports: _check_for_subclass_arg of pytorch/pytorch#184871"
        return new

    return _patching.rewritten_on_first_call(fake_tensor, "_check_for_subclass_arg", [],
                                             VERIFIED, FIXED, replacement=fixed)


REPRODUCER = r'''
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode


class MetadataParameter(torch.nn.Parameter):
    """Only adds metadata, like vLLM's ModelWeightParameter."""


class FunctionParameter(torch.nn.Parameter):
    """Has __torch_function__ but no __torch_dispatch__: still metadata-only."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class DispatchingParameter(torch.nn.Parameter):
    """Has its own __torch_dispatch__: FakeTensorMode must yield to it."""

    seen = []

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(func)
        return NotImplemented


for kind in (MetadataParameter, FunctionParameter):
    p = kind(torch.randn(3, 3))
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = torch.mm(p, p)
    assert isinstance(out, FakeTensor) and out.shape == (3, 3), (kind, out)

q = DispatchingParameter(torch.randn(3, 3))
try:
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.mm(q, q)
except TypeError as error:
    assert "DispatchingParameter" in str(error), error
else:
    raise AssertionError("FakeTensorMode did not yield to DispatchingParameter")
assert DispatchingParameter.seen, "DispatchingParameter.__torch_dispatch__ was not called"
'''


BACKPORT = Backport(
    name=NAME,
    summary="FakeTensorMode (and torch.compile with freezing) treats a metadata-only "
    "subclass of nn.Parameter like nn.Parameter instead of failing with "
    "'all __torch_dispatch__ handlers returned NotImplemented'",
    headline=(
        "`Multiple dispatch failed` for an `nn.Parameter` subclass under fake tensors, "
        "export or compile"
    ),
    upstream=(
        "https://github.com/pytorch/pytorch/pull/184871",
        "https://github.com/pytorch/pytorch/issues/174274",
    ),
    first_affected=(2, 6, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="__torch_dispatch__ handlers returned NotImplemented",
    readme_symptom=(
        "`TypeError: Multiple dispatch failed … all __torch_dispatch__ handlers returned "
        "NotImplemented` for a metadata-only `nn.Parameter` subclass (vLLM's "
        "`ModelWeightParameter`) under `FakeTensorMode`, export, or `torch.compile` with "
        "freezing"
    ),
    readme_fix=(
        "replaces `torch._subclasses.fake_tensor._check_for_subclass_arg` with 2.13's "
        "logic, which exempts a `Parameter` subclass only if it keeps Tensor's disabled "
        "`__torch_dispatch__`. A `Parameter` subclass that dispatches still gets its turn "
        "(the broader `issubclass` fix of pytorch#174278 was rejected upstream for hiding "
        "those)."
    ),
)
