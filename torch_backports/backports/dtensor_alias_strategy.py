"""DTensor has a sharding strategy for aten.alias.default, so slicing a DTensor
with slices that cover whole dimensions works.

Upstream:
  https://github.com/pytorch/pytorch/pull/166867   the fix (first in 2.10.0)
  https://github.com/pytorch/pytorch/issues/170427 the upstream report (2.9.0)
  https://github.com/NVIDIA-NeMo/RL/pull/1728      NeMo RL hit it (Qwen2.5, FSDP2 + TP)

`dt[:, :4]` on a DTensor whose last dim has size 4, or transformers'
`hidden_states[:, slice(-logits_to_keep, None), :]` with logits_to_keep=0
under tensor parallelism, raises in eager mode

  NotImplementedError: Operator aten.alias.default does not have a sharding
  strategy registered.

Python indexing (at::indexing::get_item, ATen/TensorIndexing.h) skips a slice
that starts at 0 with step 1 and covers its whole dim, and when every index
was skipped returns at::alias(self) so that the result is a new tensor. 2.9.0
widened the skip test from `length == stop` to `length <= stop`, so an
open-ended slice (`:`, stop = INT64_MAX) is skipped too: on 2.8 `dt[:, :4]`
still dispatched aten.slice for the leading `:`, on 2.9 nothing is dispatched
but aten.alias. DTensor registered no strategy for aten.alias before 2.10
(no release up to 2.9.1 names it in torch/distributed/tensor/), so the same
error was already reachable on older releases by `dt[...]` or a slice whose
stops all equal the sizes; 2.9 made it what every full-dim slice does.

PR #166867 ("DTensor: Fix trivial as_strided case, add alias support") adds
aten.alias.default to the ops registered with propagate_single_input_strategy
in torch/distributed/tensor/_ops/_tensor_ops.py (the 1:1 strategy of clone,
contiguous, detach, view.dtype: the output keeps each input placement, the
local op runs on the local shard), and separately an as_strided handler in
_dispatch.py that is not part of this backport. This patch makes the same
registration, on torch.distributed.tensor._ops._tensor_ops's own
register_op_strategy and propagate_single_input_strategy, when nothing is
registered for aten.alias.default yet.

  release         aten.alias strategy   propagate_single_input_strategy
  2.6.0 - 2.8.0   none                  absent (default_strategy instead)
  2.9.0, 2.9.1    none (the bug)        aeed7befc824896d
  2.10.0 - 2.13.0 registered (fixed)    aee25ad089aa4f74 (asserts -> raise)
  2.15.0          registered (fixed)    absent: register_single_dim_strategy,
                                        propagate_single_input_single_dim_strategy

The registry is ShardingPropagator.op_strategy_funcs (rules in op_to_rules),
reached as DTensor._op_dispatcher.sharding_propagator; register_op_strategy
(torch/distributed/tensor/_ops/utils.py) fills it and, for alias, sets no
RuntimeSchemaInfo (alias has no memory_format argument).
"""

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "dtensor-alias-strategy"

# propagate_single_input_strategy, the strategy this patch registers.
VERIFIED = {"aeed7befc824896d": "2.9.0 - 2.9.1"}
# 2.10's copy of it; the fix itself is found by the probe in apply().
FIXED = {"aee25ad089aa4f74": "2.10.0 - 2.13.0"}


def apply(tensor_ops: ModuleType, release: Release) -> Revert:
    """Register tensor_ops.propagate_single_input_strategy for aten.alias.default
    unless a strategy or rule is registered for it; return the undo."""
    import torch
    from torch.distributed.tensor._api import DTensor

    alias = torch.ops.aten.alias.default
    propagator = DTensor._op_dispatcher.sharding_propagator
    for registry in ("op_strategy_funcs", "op_to_rules"):
        if not isinstance(getattr(propagator, registry, None), dict):
            raise _patching.Unrecognised("ShardingPropagator.%s is not a dict" % registry)
    # op_single_dim_strategy_funcs: where 2.15's register_single_dim_strategy puts it
    for registry in ("op_strategy_funcs", "op_to_rules", "op_single_dim_strategy_funcs"):
        if alias in getattr(propagator, registry, {}):
            raise _patching.CarriesFix("DTensor already has a sharding strategy for "
                                       "aten.alias.default (ShardingPropagator.%s)" % registry)
    strategy = vars(tensor_ops).get("propagate_single_input_strategy")
    register = vars(tensor_ops).get("register_op_strategy")
    if strategy is None or register is None:
        raise _patching.Unrecognised("%s has no propagate_single_input_strategy and "
                                     "register_op_strategy" % tensor_ops.__name__)
    _patching.check(strategy, tensor_ops.__name__ + ".propagate_single_input_strategy",
                    VERIFIED, FIXED)

    register(alias)(strategy)  # as PR #166867 does, in the list with clone & co.

    def revert() -> None:
        if propagator.op_strategy_funcs.get(alias) is strategy:
            del propagator.op_strategy_funcs[alias]
            propagator.op_to_schema_info.pop(alias, None)
            # the calling thread's cached propagation results (LocalLRUCache)
            cache = getattr(propagator.propagate_op_sharding, "cache", None)
            if cache is not None:
                cache.cache_clear()

    return revert


# Slices covering whole dims of a DTensor, on a one-rank gloo group on CPU.
REPRODUCER = r'''
import os, socket, sys
import torch
import torch.distributed as dist

if not dist.is_available() or not dist.is_gloo_available():
    print("skipped: needs torch.distributed with gloo")
    sys.exit(77)

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo", rank=0, world_size=1)
try:
    mesh = init_device_mesh("cpu", (1,))
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    for placement in (Shard(0), Shard(1), Replicate()):
        dt = distribute_tensor(x, mesh, [placement])
        # dt[:, :4] as in pytorch/pytorch#170427; dt[:, 0:] as transformers'
        # hidden_states[:, slice(-logits_to_keep, None), :] with logits_to_keep=0
        for y in (dt[:, :4], dt[:, 0:]):
            assert y.placements == (placement,), (y.placements, placement)
            assert torch.equal(y.full_tensor(), x), (y.full_tensor(), x)
finally:
    dist.destroy_process_group()
'''

BACKPORT = Backport(
    name=NAME,
    summary="DTensor has a sharding strategy for aten.alias, so dt[:, :n] over a whole "
    "dim works instead of raising NotImplementedError",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/166867",
        "https://github.com/pytorch/pytorch/issues/170427",
        "https://github.com/NVIDIA-NeMo/RL/pull/1728",
    ),
    first_affected=(2, 9, 0),
    first_fixed=(2, 10, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Operator aten.alias.default does not have a sharding strategy registered",
)
