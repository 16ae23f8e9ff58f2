"""Compile a CPU `x @ w` with an output of 2**32 elements through inductor's
Triton mm template (the CPU check of triton-mm-size-int64: Triton CPU
backend, max-autotune with one mm config, a stub sm_90 driver) with the
inductor cache dir of argv[1]; compile the template kernel that this process
got for sm_90 with Triton, and print as JSON its `M = ...` line, whether
its TTIR keeps the tt.dot loop, and the FX graph and AOTAutograd cache keys
the compile computed (with, for the FX one, whether its details name the
backport) (for test_triton_mm_size_cache.py). Exits 77 without triton."""

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
import torch._functorch._aot_autograd.autograd_cache as autograd_cache  # noqa: E402
import torch._inductor.codecache as codecache  # noqa: E402
import torch._inductor.config as config  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

NAME = "triton-mm-size-int64"
keys = {"fx": [], "aot": []}


def record_keys(module, function, kind):
    # Both return (key, debug lines); the caches look them up as module
    # globals, so a wrapper here sees every key the compile computes.
    original = getattr(module, function)

    def recorded(*args, **kwargs):
        key, lines = original(*args, **kwargs)
        keys[kind].append([key, any("torch_backports" in l and NAME in l for l in lines)])
        return key, lines

    setattr(module, function, recorded)


record_keys(codecache, "compiled_fx_graph_hash", "fx")
record_keys(autograd_cache, "autograd_cache_key", "aot")

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
                  "fx": dict(counters["inductor"]), "keys": keys}))
