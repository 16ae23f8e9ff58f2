"""Inductor's C++ backend builds a VecMask from a scalar mask with VecMask::from.

Upstream:
  https://github.com/pytorch/pytorch/pull/178148    the fix (in 2.12.0)
  https://github.com/pytorch/pytorch/issues/178136  the upstream report
  https://github.com/vllm-project/vllm/issues/40972 Qwen3-VL on CPU, torch 2.11
  https://github.com/vllm-project/vllm/issues/37325
  https://github.com/vllm-project/vllm/pull/40973   vLLM's 2.11-only copy of the fix

CppVecKernel.indirect_assert writes the bounds check of an indirect index in
a vectorised loop. When the index is a vector but its mask is a scalar (a
condition on an outer, non-vectorised index, as Qwen3-VL's interleaved M-RoPE
`y[..., 1::3] = x[1, ..., 1::3]` makes), it wraps the scalar as
`VecMask<T,N>(mask)`. VecMask has no constructor from a scalar, so in a loop
with a vector tail the kernel does not compile: CppCompileError "no matching
function for call to 'VecMask<long int, 2>::VecMask(int&)'", raised as
InductorError (BackendCompilerFailed in older releases). PR #178148 writes
`VecMask<T,N>::from(mask)` instead, the static factory that broadcasts a
scalar to all lanes; this patch makes the same one-word edit.

  release        CppVecKernel.indirect_assert   VecMask::from(U scalar) in vec_mask.h
  2.6.0 - 2.11.0 9bfdd3595ee2d82c (the bug)    present (the same method already uses ::from(1))
  2.12.0 - 2.13.0 45d3124e4b753f5e (fixed)      present
  2.15.0         ad9d3b21248dcafb (fixed)       present (asserts became raise AssertionError)

Claimed for 2.10.0 - 2.11.x only: the method is the same from 2.6.0, but
the reproducer (the Qwen3-VL pattern, also at vLLM's (64, 20) / (3, 7)
shapes) compiles without the scalar mask on 2.9.1, where inductor's
vectoriser decides differently, so the bug is proven only from 2.10.0 (where
it was reported) and the backport claims no release it cannot show failing.

2.15's method differs from 2.12's only in turning its three `assert`s into
`raise AssertionError`; the fix is the same. The C++ side needs nothing new:
every release's torch/include/ATen/cpu/vec/vec_mask.h (2.6.0 - 2.15.0) has
`template <typename U> static VecMask<T, N> from(U b)`, and vec_mask.h is
identical in 2.11.0 and 2.12.0.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "cpp-vec-indirect-assert-mask"

VERIFIED = {"9bfdd3595ee2d82c": "2.6.0 - 2.11.0"}
FIXED = {"45d3124e4b753f5e": "2.12.0 - 2.13.0", "ad9d3b21248dcafb": "2.15.0"}

# The one line pytorch/pytorch#178148 changes.
EDITS = [
    ('mask = f"{self._get_mask_type(var.dtype)}({mask})"',
     'mask = f"{self._get_mask_type(var.dtype)}::from({mask})"'),
]


def apply(cpp: ModuleType, release: Release) -> Revert:
    """Replace cpp.CppVecKernel.indirect_assert by its own source with the
    scalar mask built by VecMask::from; return the undo."""
    kernel = cpp.CppVecKernel
    fixed = _patching.rewritten(vars(kernel)["indirect_assert"], EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(kernel, "indirect_assert", fixed, VERIFIED, FIXED)


# Indirect loads masked by a condition on the outer index, in a loop
# vectorised with a tail (2 rows < one vector of lanes).
REPRODUCER = r"""
import os, sys, tempfile
# A fresh inductor cache, so that no cached kernel hides the C++ compile.
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

# Qwen3-VL's interleaved M-RoPE: an indirect load whose lanes are masked by a
# scalar condition on the inner index, in a tail-vectorised loop.
def f(cache, positions):
    x = cache[positions]
    y = x[0].clone()
    y[..., 1::3] = x[1, ..., 1::3]
    y[..., 2::3] = x[2, ..., 2::3]
    return y

cache = torch.arange(12, dtype=torch.float32).reshape(4, 3)
positions = torch.tensor([[0, 1], [2, 3], [3, 0]])
got = torch.compile(f, backend="inductor", fullgraph=True)(cache, positions)
assert torch.equal(got, f(cache, positions)), (got, f(cache, positions))
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor's C++ backend compiles vectorised loops whose indirect index "
    "has a scalar mask, instead of failing with CppCompileError on VecMask(int&)",
    headline="`CppCompileError` on `VecMask(int&)` for indirect indexing in a vectorised CPU loop",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/178148",
        "https://github.com/pytorch/pytorch/issues/178136",
        "https://github.com/vllm-project/vllm/issues/40972",
    ),
    first_affected=(2, 10, 0),
    first_fixed=(2, 12, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="::VecMask(int&)",
    readme_symptom=(
        "`CppCompileError … no matching function for call to VecMask<long int, "
        "2>::VecMask(int&)` for indirect indexing in a tail-vectorised CPU loop "
        "(Qwen3-VL's interleaved M-RoPE)"
    ),
    readme_fix=(
        "upstream's one-word edit (`VecMask<…>::from(mask)`) applied to the source of the "
        "installed `CppVecKernel.indirect_assert`. The method is the same from 2.6.0, but "
        "the reproducer fails only from 2.10.0, so only those releases are claimed."
    ),
)

