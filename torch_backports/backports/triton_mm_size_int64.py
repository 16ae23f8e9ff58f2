"""With max-autotune on CUDA, a matmul whose output has a multiple of 2**32
elements (32768 tokens x 131072 vocabulary) computes its result instead of
returning uninitialised memory: the Triton mm/bmm/mm_plus_mm templates' sizes
are int64 where the kernel indexes in int64.

Upstream:
  https://github.com/pytorch/pytorch/pull/172925   the fix (first in 2.12.0)
  https://github.com/pytorch/pytorch/issues/171389 the bug
  https://github.com/pytorch/pytorch/issues/189054 the same, 32768 x 131072

A silent wrong result, no error:

  >>> x = torch.randn(32768, 64, device="cuda", dtype=torch.bfloat16)
  >>> w = torch.randn(64, 131072, device="cuda", dtype=torch.bfloat16)
  >>> torch.compile(lambda x, w: x @ w, mode="max-autotune")(x, w)
  # stock 2.9 - 2.11: whatever the output's memory held; eager: x @ w

The Triton mm template begins

    M = {{size("A", 0)}}
    N = {{size("B", 1)}}
    K = {{size("A", 1)}}
    if M * N == 0:
        # early exit due to zero-size input(s)
        return

and TritonTemplateKernel.size() (torch/_inductor/select_algorithm.py), the
hook that fills in {{size(...)}}, writes a static size as a bare literal:
`M = 32768`, `N = 131072`. Triton types those as int32, whatever the
kernel's INDEX_DTYPE (tl.int64 here: the output has 2**32 elements), so
M * N wraps to 0 and the kernel returns at once; Triton folds the constant
test, and the kernel is a bare `tt.return`. Autotuning then times that empty
kernel as the fastest choice, and the program reads an output no kernel
wrote. bmm and mm_plus_mm begin the same way.

PR #172925 makes size() return `tl.full([], <size>, dtype=INDEX_DTYPE)`
when the kernel's index dtype is tl.int64 (the plain literal otherwise), for
every Triton template that calls it, so M * N is computed in int64. The same
PR edits the templates' own text: each `tl.arange` of triton_mm,
triton_mm_rocm, triton_bmm and triton_mm_grouped is cast to INDEX_DTYPE;
and, because int64 sizes make the tile offsets int64, the TMA templates
cast the offsets they give their tensor descriptors back to int32, which is
all descriptors take (`rm_desc = rm.to(tl.int32)` and the like in
triton_persistent_tma_mm; `offs_am.to(tl.int32)` and the like in
triton_blackwell_ws_persistent_device_tma_mm, triton_epilogue_scaled_mm and
triton_main_loop_scaled_mm). 2.13.0 and 2.14.1 do the same in size() and in
all these templates (2.14.1's size() raises AssertionError where 2.12 uses
assert, and since #179333 an index_dtype_override decides the dtype; the
same output here).

What the backport carries, and what not:
  1. size(): upstream's three lines, but only in a kernel that renders the
     mm, bmm or mm_plus_mm template (torch._inductor.kernel.mm.mm_template,
     .bmm.bmm_template, .mm_plus_mm.mm_plus_mm_template; mm_template is the
     ROCm text on ROCm). Every other template's sizes (the TMA and scaled-mm
     templates, convolution, ...) stay the bare literals stock writes.
  2. render(): wrapped to mark the kernel with whether the template it
     renders is one of those three, by identity of the jinja template that
     the TritonTemplate renders (the kernel's name is only a placeholder
     when the chosen kernel is rendered again for the output code). size()
     is called from inside render(), as jinja fills in the template.
The template-text edits are not carried:
  * the TMA templates (persistent TMA, Blackwell warp-specialized device
    TMA, the scaled-mm templates) are left as shipped, bug included: with
    int64 sizes and without upstream's int32 descriptor casts they would
    hand int64 offsets to tensor descriptors, which breaks them, and the
    casts would mean rewriting jinja text that differs between releases.
    They are chosen only where a config or op asks for them
    (triton.enable_persistent_tma_matmul, Blackwell's warp-specialized TMA,
    a float8 scaled mm); the default max-autotune mm (addmm, int mm), bmm
    and mm_plus_mm templates are fixed.
  * the `tl.arange(...).to(INDEX_DTYPE)` casts: in triton_mm they change
    nothing once size() is fixed (rm and rn meet the program id, which
    meets grid_n, made of N; offs_k meets k_idx, which runs over
    `range(0, tl.cdiv(K, BLOCK_K))`; all int64). In triton_bmm the cast of
    rk also widens `rk * stride_ak` and `rk * stride_bk`, an int32 arange
    times a stride literal, which overflow only where BLOCK_K times a
    K-stride passes 2**31; that case stays as on stock. (mm_plus_mm's rk is
    int32 upstream too.) The other changes to triton_bmm between 2.11 and
    2.12 (BATCH, a batch index split over two grid axes) are not part of
    this fix. 2.9.1's mm and mm_plus_mm templates take the program id as
    int32 (2.10 casts it to INDEX_DTYPE); it meets the int64 sizes at once.

Read from each release's torch/_inductor/select_algorithm.py:

  release          TritonTemplateKernel.size  TritonTemplateKernel.render
  2.9.1            deb73712aa7e1e96           62b6f9c22a43e559
  2.10.0, 2.11.0   0e0a863ea4941e38           2d25afbd8b0c8e58
  2.12.1, 2.13.0   12efc2011abb6bf0           2d25afbd8b0c8e58   (the fix)
  2.14.1, 2.15.0   2b3ce9b555b946de           2d25afbd8b0c8e58 / 6856ceb7f2c58a84 (2.15.0)

render() is the same from 2.10 to 2.14.1 (2.15.0 changed it); the fix is recognised by size().
2.9.0 and 2.12.0, read from their wheels (2026-12-06), have 2.9.1's and
2.12.1's select_algorithm.py byte for byte: 2.12.0 ships the fix. Releases before 2.9 are not claimed: their
templates were not read here.

This is a fix of GPU code that runs on the CPU up to Triton's compiler.
CPU_CHECK compiles `x @ w` (32768 x 16 @ 16 x 131072, float32, CPU tensors)
with inductor's Triton CPU backend (config.cpu_backend = "triton"),
max_autotune, the TRITON gemm backend only and one mm config
(test_configs.max_mm_configs = 1): one choice, so nothing is benchmarked
and the 2**32-element output is never allocated. tuned_mm then renders
triton_mm's template through TritonTemplateKernel.render and size() as on
CUDA: both hunks run. A stub Triton driver (triton.runtime.driver.set_active)
reports an sm_90 target, which inductor only hashes; the kernel's compile
for the CPU target then fails, as expected, once its source is made. The
check takes that source (recorded at AsyncCompile.triton) and compiles it
with triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32)), no
GPU needed, and requires the `tt.dot` loop in its TTIR. Stock 2.9.1, 2.10.0
and 2.11.0 give `M = 32768` and a TTIR that is a bare `tt.return`; with the
backport, and on stock 2.12.1, `M = tl.full([], 32768, dtype=INDEX_DTYPE)`
and the dot loop. (With M * N = 2**31 the body is kept on stock, which
shows the check tells the two apart.) So the backport is on by default.
It needs triton, which CUDA wheels bring; on a CPU-only wheel it skips.

changes_codegen is True: every int64-indexed mm, bmm and mm_plus_mm
template kernel changes text, the ones stock gets wrong (an empty kernel)
and the ones it gets right (M * N between 2**31 and 2**32, where only the
literal's type changes). A graph that stock torch compiled and cached (FX
graph and AOTAutograd caches) holds the empty kernel and is keyed by
torch's unchanged files, so while the backport is applied those keys name
it (torch_backports._cache_key). The autotuning and Triton caches key by
the kernel's source, which the fix changes by itself.
tests/integration/test_triton_mm_size_cache.py shows a process with the
fix, on an inductor cache stock torch warmed, writing the fixed kernel.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Callable

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "triton-mm-size-int64"

SIZE = (
    {"deb73712aa7e1e96": "2.9.1", "0e0a863ea4941e38": "2.10.0, 2.11.0"},
    {"12efc2011abb6bf0": "2.12.1, 2.13.0", "2b3ce9b555b946de": "2.14.1, 2.15.0"},
)
RENDER = (
    {"62b6f9c22a43e559": "2.9.1", "2d25afbd8b0c8e58": "2.10.0, 2.11.0"},
    {},  # unchanged by the fix: size() tells the fixed releases apart
)

# The attribute render() sets on the kernel: whether its template is one
# of TEMPLATES, whose sizes are int64 where the kernel indexes in int64.
MARK = "_torch_backports_int64_sizes"

# The TritonTemplates that get the fix: (module, name).
TEMPLATES = (
    ("torch._inductor.kernel.mm", "mm_template"),
    ("torch._inductor.kernel.bmm", "bmm_template"),
    ("torch._inductor.kernel.mm_plus_mm", "mm_plus_mm_template"),
)

# pytorch/pytorch#172925, in the dedented source of size(), for the
# kernels render() marked.
SIZE_EDITS = [
    ("    return texpr(self.rename_indexing(val))",
     "    result = texpr(self.rename_indexing(val))\n"
     "    if self.index_dtype == \"tl.int64\" and getattr(self, %r, False):\n"
     "        return f\"tl.full([], {result}, dtype=INDEX_DTYPE)\"\n"
     "    return result" % MARK),
]


def _fixed_template(template: Any) -> bool:
    """Whether `template` (a jinja template) is that of mm_template,
    bmm_template or mm_plus_mm_template. A template's module is loaded
    before it can be rendered."""
    for module_name, name in TEMPLATES:
        module = sys.modules.get(module_name)
        found = vars(module).get(name) if module is not None else None
        if found is not None and getattr(found, "template", None) is template:
            return True
    return False


def _mark(wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
    template = args[0] if args else kwargs.get("template")
    setattr(instance, MARK, _fixed_template(template))
    return wrapped(*args, **kwargs)


def apply(select_algorithm: ModuleType, release: Release) -> Revert:
    """Replace TritonTemplateKernel.size by the installed one with
    upstream's tl.full for marked kernels, and wrap render to mark them;
    return the undo."""
    kernel = _patching.own_class(select_algorithm, "TritonTemplateKernel")
    size, _ = _patching.own_attribute(kernel, "size")
    render, where = _patching.own_attribute(kernel, "render")
    new_size = _patching.rewritten(size, SIZE_EDITS, *SIZE)  # checks size() first
    _patching.check(render, where, *RENDER)
    with _patching.all_or_nothing() as reverts:
        reverts.append(_patching.wrap_attribute(kernel, "render", _mark, *RENDER))
        reverts.append(_patching.replace_attribute(kernel, "size", new_size, *SIZE))
    return _patching.undo_all(reverts)


# The program: a bf16 `x @ w` of 32768 x 64 by 64 x 131072 (an
# output of 2**32 elements, 8 GiB) compiled with max-autotune, against
# eager, a block of rows at a time to keep memory low.
REPRODUCER = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
import torch

if not torch.cuda.is_available():
    print("skipped: needs a CUDA GPU")
    sys.exit(77)
free, _ = torch.cuda.mem_get_info()
if free < 30 * 2**30:
    print("skipped: needs a CUDA GPU with 30 GiB free (has %.1f GiB)" % (free / 2**30))
    sys.exit(77)

torch.manual_seed(0)
M, K, N = 32768, 64, 131072  # M * N == 2**32
compiled = torch.compile(lambda a, b: a @ b, mode="max-autotune")
# The first call autotunes, and autotuning's aten choice computes x @ w into
# a buffer that the output may reuse; so the check is on a second call,
# whose product nothing has computed before.
out = compiled(torch.randn(M, K, device="cuda", dtype=torch.bfloat16),
               torch.randn(K, N, device="cuda", dtype=torch.bfloat16))
del out
x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
got = compiled(x, w)
torch.cuda.synchronize()
for start in range(0, M, 1024):
    want = x[start:start + 1024] @ w
    if not torch.allclose(got[start:start + 1024], want, atol=5e-2, rtol=2e-2):
        bad = (got[start:start + 1024].float() - want.float()).abs().max().item()
        sys.exit("compiled x @ w differs from eager: rows %d - %d off by up to %g "
                 "(M * N = 2**32)" % (start, start + 1023, bad))
print("compiled x @ w matches eager (M * N = 2**32)")
"""

# On the CPU: the template's codegen through tuned_mm, then Triton's
# compiler for sm_90 on its source (see the docstring). Internal APIs and
# stubs, as a test.
CPU_CHECK = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch
from torch_backports import _triton_cpu

# A driver that says sm_90, which inductor only hashes: nothing runs.
try:
    _triton_cpu.use_sm90_stub_driver()
except ImportError as exc:
    print("skipped: needs triton (%s)" % exc)
    sys.exit(77)
import torch._inductor.config as config

sources = _triton_cpu.record_kernel_sources()
config.max_autotune = True
config.max_autotune_gemm_backends = "TRITON"
config.test_configs.max_mm_configs = 1  # one choice: nothing is benchmarked

M, K, N = 32768, 16, 131072  # M * N == 2**32: 2**32 elements, never allocated
x, w = torch.randn(M, K), torch.randn(K, N)
try:
    torch.compile(lambda a, b: a @ b)(x, w)
except Exception:
    pass  # Triton cannot compile for the CPU here: expected, after codegen
else:
    sys.exit("the compile did not stop at Triton's CPU target: this check shows nothing")

mm = [(name, src) for name, src in sources.items() if "def " + name + "(" in src
      and "M * N == 0" in src and "INDEX_DTYPE : tl.constexpr = tl.int64" in src]
if len(mm) != 1:
    sys.exit("expected one int64 mm template kernel, got %s" % sorted(sources))
name, source = mm[0]
print([line.strip() for line in source.splitlines() if line.strip().startswith("M = ")][0])

# The kernel alone, without inductor's launcher, compiled for sm_90.
ttir = _triton_cpu.compile_for_sm90(source, name)
if "tt.dot" not in ttir:
    print(ttir[-600:])  # before the verdict, so that the verdict is the last line
    sys.exit("the mm template's kernel compiles to a bare tt.return: M * N wrapped to 0 "
             "in int32")
print("the mm template's kernel keeps its tt.dot loop")
"""

BACKPORT = Backport(
    name=NAME,
    summary="with max-autotune, a CUDA matmul whose output has a multiple of 2**32 elements "
    "(32768 x 131072) is computed (was: the Triton mm template's M * N wrapped to 0 in "
    "int32, and its empty kernel won autotuning)",
    headline=(
        "**silent wrong result**: max-autotune CUDA matmul with a multiple of 2³² output "
        "elements"
    ),
    upstream=("https://github.com/pytorch/pytorch/pull/172925",
              "https://github.com/pytorch/pytorch/issues/171389",
              "https://github.com/pytorch/pytorch/issues/189054"),
    first_affected=(2, 9, 0),
    first_fixed=(2, 12, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="compiled x @ w differs from eager",
    changes_codegen=True,
    cpu_check=CPU_CHECK,
    cpu_check_symptom="the mm template's kernel compiles to a bare tt.return",
    readme_symptom=(
        "**silent wrong result**: with `mode=\"max-autotune\"` on CUDA, a matmul whose "
        "output has a multiple of 2³² elements (32768 tokens × 131072 vocabulary) returns "
        "uninitialised memory: the Triton mm template's `M * N == 0` early exit wraps in "
        "int32, and the empty kernel wins autotuning"
    ),
    readme_fix=(
        "2.12's `TritonTemplateKernel.size()` ([#172925](https://github.com/pytorch/"
        "pytorch/pull/172925)): a size is `tl.full([], size, INDEX_DTYPE)` where the "
        "kernel indexes in int64, for the mm, bmm and mm_plus_mm templates only (not "
        "the TMA templates, which also need upstream's int32 descriptor casts in their "
        "text). Checked on the CPU by compiling the template's kernel for sm_90 with "
        "Triton and a stub driver. It changes generated code, so inductor's cache keys "
        "name it."
    ),
)
