"""Compile a CPU `x @ w` with an output of 2**32 elements through inductor's
Triton mm template (the CPU check of triton-mm-size-int64: Triton CPU
backend, max-autotune with one mm config, a stub sm_90 driver) with the
inductor cache dir of argv[1]; compile the template kernel that this process
got for sm_90 with Triton, and print as JSON its `M = ...` line and whether
its TTIR keeps the tt.dot loop (for test_triton_mm_size_cache.py). Exits 77
without triton."""

import json
import os
import sys

os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[1]
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

import torch  # noqa: E402

from torch_backports import _triton_cpu  # noqa: E402

try:
    _triton_cpu.use_sm90_stub_driver()
except ImportError as exc:
    print("skipped: needs triton (%s)" % exc)
    sys.exit(77)
import torch._inductor.config as config  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

sources = _triton_cpu.record_kernel_sources()
config.max_autotune = True
config.max_autotune_gemm_backends = "TRITON"
config.test_configs.max_mm_configs = 1

try:
    torch.compile(lambda a, b: a @ b)(torch.randn(32768, 16), torch.randn(16, 131072))
except Exception:
    pass  # Triton cannot compile for the CPU: expected, after codegen
(name, source), = [(n, s) for n, s in sources.items() if "M * N == 0" in s]
m_line = [line.strip() for line in source.splitlines() if line.strip().startswith("M = ")][0]
ttir = _triton_cpu.compile_for_sm90(source, name)
print(json.dumps({"m_line": m_line, "tt_dot": "tt.dot" in ttir,
                  "fx": dict(counters["inductor"])}))
