"""Inductor's Triton codegen on a machine without a GPU, for CPU checks.

A backport of GPU code proves its fix with a CPU check (Backport.cpu_check,
docs/gpu.md): a program that drives the fixed code path on the CPU. For
Triton kernels the path is inductor's own, with `config.cpu_backend =
"triton"`: a stub driver that reports an sm_90 target (which inductor only
hashes), the kernel sources recorded as inductor hands them to
AsyncCompile.triton, and Triton's compiler run on one of them for sm_90,
which gives the TTIR an H100 would run, with no GPU.

Only CPU checks and tests import this module, in a process of their own;
it imports torch and triton inside its functions, so importing it costs
nothing else.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import tempfile
from typing import Callable, Dict, Optional

SM90 = ("cuda", 90, 32)  # GPUTarget(backend, arch, warp size)


def use_sm90_stub_driver() -> None:
    """Make Triton's active driver one that reports an sm_90 target and
    refuses everything that would touch a device. Raises ImportError
    without triton."""
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the stub driver has no device")

    stub = type("StubDriver", (DriverBase,),
                {name: refuse for name in DriverBase.__abstractmethods__})
    stub.is_active = classmethod(lambda cls: True)
    stub.get_current_target = lambda self: GPUTarget(*SM90)
    stub.get_current_device = lambda self: 0
    stub.get_current_stream = lambda self, device=None: 0
    stub.get_active_torch_device = lambda self: torch.device("cpu")
    stub.get_device_interface = lambda self: torch.cpu
    triton.runtime.driver.set_active(stub())


def record_kernel_sources(compile: bool = True) -> Dict[str, str]:
    """Set inductor's Triton backend for CPU tensors and keep each Triton
    kernel's source, by name, in the dict returned. With `compile` False no
    kernel is compiled: the compiled code stops at its first launch, after
    all of its kernels were generated."""
    import torch._inductor.config as config
    from torch._inductor.async_compile import AsyncCompile

    sources: Dict[str, str] = {}
    original: Callable = AsyncCompile.triton

    def record(self: object, kernel_name: str, source_code: str, *args: object,
               **kwargs: object) -> object:
        sources[kernel_name] = source_code
        return original(self, kernel_name, source_code, *args, **kwargs) if compile else None

    AsyncCompile.triton = record  # type: ignore[method-assign]
    config.cpu_backend = "triton"
    return sources


def compile_for_sm90(source: str, name: str, pointers: bool = False) -> str:
    """The TTIR of kernel `name` of an inductor kernel `source`, compiled
    alone (without inductor's launcher) by Triton for sm_90. With
    `pointers`, the signature inductor wrote is used, every `in_ptr*` made a
    pointer (a 0-dim CPU tensor goes to a CPU kernel by value, to a GPU
    kernel as a pointer); else every argument is an fp32 pointer."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = (source[:source.index("@triton_heuristics.template")]
              + source[source.index("@triton.jit"):])
    with tempfile.TemporaryDirectory(prefix="kernel-alone-") as scratch:
        path = os.path.join(scratch, "kernel_alone.py")
        with open(path, "w") as f:
            f.write(kernel)
        spec = importlib.util.spec_from_file_location("kernel_alone", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        fn = getattr(module, name)
        signature: Optional[Dict[str, str]] = None
        if pointers:
            found = ast.literal_eval(re.search(r"'signature': (\{[^{}]*\})", source).group(1))  # type: ignore[union-attr]
            signature = {arg: kind if kind.startswith("*") or not arg.startswith("in_ptr")
                         else "*" + kind for arg, kind in found.items()}
        else:
            signature = {arg: "*fp32" for arg in fn.arg_names}
        return triton.compile(ASTSource(fn, signature, {}), target=GPUTarget(*SM90)).asm["ttir"]
