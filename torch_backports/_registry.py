"""Every backport torch-backports knows, and the module each one patches.

One line per backport: its name and its target, the module whose import
applies it. The backport's own module, torch_backports/backports/<name
with underscores>.py, holds everything else (the facts, the patch and the
reproducer). It is imported only when its target is, or by the CLI, so that
nothing of a backport is loaded in a process that never reaches its target.
"""

import importlib
from typing import Tuple

from ._backport import Backport

# (name, target module), in the order hooks are registered.
BACKPORTS: Tuple[Tuple[str, str], ...] = (
    ("fx-graph-cache-pickling", "torch._inductor.codecache"),
    ("fake-tensor-parameter-subclass", "torch._subclasses.fake_tensor"),
    ("cpp-vec-indirect-assert-mask", "torch._inductor.codegen.cpp"),
    ("dynamo-nnmodule-wrap-values", "torch._dynamo.variables.nn_module"),
    ("aot-compile-builtins", "torch._dynamo.convert_frame"),
    ("opaque-constrain-fx-strides", "torch._inductor.lowering"),
    ("dtensor-alias-strategy", "torch.distributed.tensor._ops._tensor_ops"),
    ("standalone-compile-atomic-save", "torch._inductor.standalone_compile"),
    ("einops-allow-in-graph", "torch._dynamo.decorators"),
    ("auto-functionalized-cacheable", "torch._higher_order_ops.auto_functionalize"),
    ("aot-autograd-cache-dtensor-key", "torch._functorch._aot_autograd.autograd_cache"),
    ("library-define-qualified-name", "torch.library"),
    ("inductor-mul-zero-nan", "torch._inductor.fx_passes.joint_graph"),
    ("inductor-lazy-fallback-log", "torch._inductor.graph"),
    ("custom-op-autograd-tensorlist-defaults", "torch._library.autograd"),
    ("fsdp-to-cpu-already-on-cpu", "torch.distributed.fsdp._flat_param"),
    ("dataloader-worker-releases-dataset", "torch.utils.data.dataloader"),
    ("export-proxy-map-retains-graph", "torch.fx.experimental.proxy_tensor"),
    ("aot-autograd-cache-autocast", "torch._functorch._aot_autograd.autograd_cache"),
)


def names() -> Tuple[str, ...]:
    return tuple(name for name, _ in BACKPORTS)


def target(name: str) -> str:
    for known, module in BACKPORTS:
        if known == name:
            return module
    raise KeyError(name)


def load(name: str) -> Backport:
    """Import backport `name`'s module and return its BACKPORT."""
    target(name)  # KeyError for a name that is not registered
    module = importlib.import_module("torch_backports.backports." + name.replace("-", "_"))
    return module.BACKPORT
