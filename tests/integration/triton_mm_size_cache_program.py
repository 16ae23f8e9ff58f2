"""Compile a CPU `x @ w` with an output of 2**32 elements through inductor's
Triton mm template (the CPU check of triton-mm-size-int64: Triton CPU
backend, max-autotune with one mm config, a stub sm_90 driver) with the
inductor cache dir of argv[1]; compile the template kernel that this process
got for sm_90 with Triton, and print as JSON its `M = ...` line and whether
its TTIR keeps the tt.dot loop (for test_triton_mm_size_cache.py). Exits 77
without triton."""

import importlib.util
import json
import os
import sys
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[1]
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

import torch  # noqa: E402

try:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from triton.compiler import ASTSource
except ImportError as exc:
    print("skipped: needs triton (%s)" % exc)
    sys.exit(77)
import torch._inductor.config as config  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402


def refuse(*args, **kwargs):
    raise RuntimeError("the stub driver has no device")


stub = type("StubDriver", (DriverBase,), {name: refuse for name in DriverBase.__abstractmethods__})
stub.is_active = classmethod(lambda cls: True)
stub.get_current_target = lambda self: GPUTarget("cuda", 90, 32)
stub.get_current_device = lambda self: 0
stub.get_current_stream = lambda self, device=None: 0
stub.get_active_torch_device = lambda self: torch.device("cpu")
stub.get_device_interface = lambda self: torch.cpu
triton.runtime.driver.set_active(stub())

sources = {}
triton_of = AsyncCompile.triton


def record(self, kernel_name, source_code, *args, **kwargs):
    sources[kernel_name] = source_code
    return triton_of(self, kernel_name, source_code, *args, **kwargs)


AsyncCompile.triton = record
config.cpu_backend = "triton"
config.max_autotune = True
config.max_autotune_gemm_backends = "TRITON"
config.test_configs.max_mm_configs = 1

try:
    torch.compile(lambda a, b: a @ b)(torch.randn(32768, 16), torch.randn(16, 131072))
except Exception:
    pass  # Triton cannot compile for the CPU: expected, after codegen
(name, source), = [(n, s) for n, s in sources.items() if "M * N == 0" in s]
m_line = [line.strip() for line in source.splitlines() if line.strip().startswith("M = ")][0]
with tempfile.TemporaryDirectory() as scratch:
    path = os.path.join(scratch, "kernel_alone.py")
    with open(path, "w") as f:
        f.write(source[:source.index("@triton_heuristics.template")]
                + source[source.index("@triton.jit"):])
    spec = importlib.util.spec_from_file_location("kernel_alone", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, name)
    ttir = triton.compile(ASTSource(fn, {arg: "*fp32" for arg in fn.arg_names}, {}),
                          target=GPUTarget("cuda", 90, 32)).asm["ttir"]
print(json.dumps({"m_line": m_line, "tt_dot": "tt.dot" in ttir,
                  "fx": dict(counters["inductor"])}))
