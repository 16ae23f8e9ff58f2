"""Every backport torch-backports knows, and the module each one patches.

One line per backport: its name, its target (the module whose import
applies it) and the releases it covers. The backport's own module,
torch_backports/backports/<name with underscores>.py, holds everything else
(the facts, the patch and the reproducer). It is imported only when its
target is, or by the CLI, so that nothing of a backport is loaded in a
process that never reaches its target.
"""

from __future__ import annotations

import importlib
from typing import Sequence, Tuple

from ._backport import Backport, Release

# (name, target module, first affected release, first fixed release), in the
# order hooks are registered. The releases repeat the backport's own, which
# a test holds equal: with them here, a target imported on a release outside
# the range is judged without loading the backport's module, as `import
# torch` does with fake_tensor and auto_functionalize on 2.13 (1.0 M
# instructions for the two modules, callgrind, 2026-12-04).
BACKPORTS: Tuple[Tuple[str, str, Release, Release], ...] = (
    ("fx-graph-cache-pickling", "torch._inductor.codecache", (2, 6, 0), (2, 11, 0)),
    ("fake-tensor-parameter-subclass", "torch._subclasses.fake_tensor", (2, 6, 0), (2, 13, 0)),
    ("cpp-vec-indirect-assert-mask", "torch._inductor.codegen.cpp", (2, 10, 0), (2, 12, 0)),
    ("dynamo-nnmodule-wrap-values", "torch._dynamo.variables.nn_module", (2, 10, 0), (2, 11, 0)),
    ("aot-compile-builtins", "torch._dynamo.convert_frame", (2, 10, 0), (2, 12, 0)),
    ("opaque-constrain-fx-strides", "torch._inductor.lowering", (2, 10, 0), (2, 12, 0)),
    ("dtensor-alias-strategy", "torch.distributed.tensor._ops._tensor_ops", (2, 9, 0), (2, 10, 0)),
    ("standalone-compile-atomic-save", "torch._inductor.standalone_compile",
     (2, 8, 0), (2, 10, 0)),
    ("einops-allow-in-graph", "torch._dynamo.decorators", (2, 7, 0), (2, 8, 0)),
    ("auto-functionalized-cacheable", "torch._higher_order_ops.auto_functionalize",
     (2, 6, 0), (2, 7, 1)),
    ("aot-autograd-cache-dtensor-key", "torch._functorch._aot_autograd.autograd_cache",
     (2, 6, 0), (2, 12, 0)),
    ("library-define-qualified-name", "torch.library", (2, 7, 0), (2, 14, 0)),
    ("inductor-mul-zero-nan", "torch._inductor.fx_passes.joint_graph", (2, 8, 0), (2, 14, 0)),
    ("inductor-lazy-fallback-log", "torch._inductor.graph", (2, 7, 0), (2, 13, 0)),
    ("custom-op-autograd-tensorlist-defaults", "torch._library.autograd", (2, 7, 0), (2, 14, 0)),
    ("fsdp-to-cpu-already-on-cpu", "torch.distributed.fsdp._flat_param", (2, 7, 0), (2, 14, 0)),
    ("dataloader-worker-releases-dataset", "torch.utils.data.dataloader", (2, 7, 0), (2, 14, 0)),
    ("export-proxy-map-retains-graph", "torch.fx.experimental.proxy_tensor",
     (2, 9, 0), (2, 15, 0)),
    ("aot-autograd-cache-autocast", "torch._functorch._aot_autograd.autograd_cache",
     (2, 12, 0), (2, 14, 0)),
    ("aot-autograd-cache-nonce-collision", "torch._functorch._aot_autograd.autograd_cache",
     (2, 10, 0), (2, 15, 0)),
    ("inductor-fused-mutation-read-alias", "torch._inductor.scheduler", (2, 10, 0), (2, 15, 0)),
    ("aot-bare-subclass-dispatch", "torch._functorch._aot_autograd.runtime_wrappers",
     (2, 11, 0), (2, 15, 0)),
    ("tensor-register-hook-stale-view", "torch._tensor", (2, 7, 0), (2, 15, 0)),
    ("fx-wrap-frame-cycle", "torch.fx._symbolic_trace", (2, 7, 0), (2, 15, 0)),
    ("inductor-reinplace-scatter-self-overlap", "torch._inductor.fx_passes.reinplace",
     (2, 7, 0), (2, 15, 0)),
    ("inductor-noop-copy-of-mutated-input", "torch._inductor.fx_passes.post_grad",
     (2, 7, 0), (2, 15, 0)),
    ("funcol-all-gather-negative-dim", "torch.distributed._functional_collectives",
     (2, 11, 0), (2, 15, 0)),
    ("fsdp2-inference-mode-unshard", "torch.distributed.fsdp._fully_shard._fsdp_param_group",
     (2, 7, 0), (2, 15, 0)),
    ("dynamo-checkpoint-symfloat-proxy", "torch._dynamo.variables.builder", (2, 7, 0), (2, 15, 0)),
    ("aot-noop-view-output-alias", "torch._functorch.aot_autograd", (2, 7, 0), (2, 15, 0)),
    ("tensorify-float-stale-cache", "torch.fx.passes._tensorify_python_scalars",
     (2, 7, 0), (2, 15, 0)),
    ("flex-attention-derived-symint", "torch._inductor.kernel.flex.flex_attention",
     (2, 10, 0), (2, 13, 0)),
    ("triton-mm-size-int64", "torch._inductor.select_algorithm", (2, 9, 0), (2, 12, 0)),
    ("flex-attention-scalar-grad", "torch._higher_order_ops.flex_attention", (2, 9, 0), (2, 14, 0)),
    ("cpp-wrapper-lazy-backward", "torch._inductor.compile_fx", (2, 9, 0), (2, 13, 0)),
    ("cudagraph-trees-threads", "torch._inductor.cudagraph_trees", (2, 9, 0), (2, 13, 0)),
    ("inductor-cache-dir-getuser", "torch._inductor.runtime.cache_dir_utils", (2, 7, 0),
     (2, 13, 0)),
)


# The names and entries of BACKPORTS, read many times inside `import torch`
# (for each hooked module there), and the names by key(), which only a name
# the user typed needs (made at its first use): made once per BACKPORTS
# (tests swap it).
_index: list = [None, (), {}, None]


def _indexed() -> list:
    if _index[0] is not BACKPORTS:
        _index[:] = [BACKPORTS, tuple(entry[0] for entry in BACKPORTS),
                     {entry[0]: entry for entry in BACKPORTS}, None]
    return _index


def _by_key() -> "dict[str, str]":
    index = _indexed()
    if index[3] is None:
        index[3] = {key(name): name for name in index[1]}
    return index[3]


def names() -> Tuple[str, ...]:
    return _indexed()[1]


def key(name: str) -> str:
    """How a name the user typed is matched: any case, with '_' and '-'
    alike, since users type them from memory."""
    return name.strip().lower().replace("_", "-")


def canonical(name: str) -> "str | None":
    """The registry's spelling of the backport `name` matches (key()), or
    None if it matches none."""
    return _by_key().get(key(name))


def nearest(name: str) -> "str | None":
    """The registered name closest to `name`, which matches none; None if
    nothing is near it."""
    import difflib  # only for a name that matched nothing: ~1 ms to import

    by_key = _by_key()
    close = difflib.get_close_matches(key(name), list(by_key), n=1, cutoff=0.6)
    return by_key[close[0]] if close else None


def did_you_mean(name: str) -> str:
    """"; did you mean 'x'?" for a `name` that matches no backport, or ""
    when no registered name is near it."""
    close = nearest(name)
    return "; did you mean %r?" % close if close else ""


def unknown_names(names: Sequence[str]) -> str:
    """What a command says of `names` that match no backport: each with the
    nearest registered name, not the whole catalogue."""
    def one(name: str) -> str:
        close = nearest(name)
        return repr(name) + (" (did you mean %r?)" % close if close else "")

    return "no backport named %s; `torch-backports status` lists them" % ", ".join(
        map(one, names))


def target(name: str) -> str:
    return _entry(name)[1]


def releases(name: str) -> Tuple[Release, Release]:
    """The first affected and the first fixed release of backport `name`."""
    entry = _entry(name)
    return entry[2], entry[3]


def _entry(name: str) -> Tuple[str, str, Release, Release]:
    return _indexed()[2][name]  # KeyError for a name that is not registered


def load(name: str) -> Backport:
    """Import backport `name`'s module and return its BACKPORT."""
    target(name)  # KeyError for a name that is not registered
    module = importlib.import_module("torch_backports.backports." + name.replace("-", "_"))
    return module.BACKPORT
