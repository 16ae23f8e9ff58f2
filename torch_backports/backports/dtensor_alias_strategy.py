"""DTensor has a sharding strategy for aten.alias.default, so slicing a DTensor
with slices that cover whole dimensions works, and an identity as_strided on a
DTensor returns an alias of it.

Upstream:
  https://github.com/pytorch/pytorch/pull/166867   the fix (first in 2.10.0)
  https://github.com/pytorch/pytorch/issues/170427 the upstream report (2.9.0)
  https://github.com/NVIDIA-NeMo/RL/pull/1728      NeMo RL hit it (Qwen2.5, FSDP2 + TP)

`dt[:, :4]` on a DTensor whose last dim has size 4, or transformers'
`hidden_states[:, slice(-logits_to_keep, None), :]` with logits_to_keep=0
under tensor parallelism, raises in eager mode

  NotImplementedError: Operator aten.alias.default does not have a sharding
  strategy registered.

and `dt.as_strided(dt.size(), dt.stride(), dt.storage_offset())`, an
identity view (code that rebuilds a view from its size, stride and offset
asks for it), raises

  NotImplementedError: Operator aten.as_strided.default does not have a
  sharding strategy registered.

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

PR #166867 ("DTensor: Fix trivial as_strided case, add alias support") makes
two changes, both carried here, both or neither:

1. torch/distributed/tensor/_ops/_tensor_ops.py: aten.alias.default joins the
   ops registered with propagate_single_input_strategy (the 1:1 strategy of
   clone, contiguous, detach, view.dtype: the output keeps each input
   placement, the local op runs on the local shard). This patch makes the
   same registration, on this module's own register_op_strategy and
   propagate_single_input_strategy. The registry is
   ShardingPropagator.op_strategy_funcs (rules in op_to_rules), reached as
   DTensor._op_dispatcher.sharding_propagator; register_op_strategy
   (_ops/utils.py) fills it and, for alias, sets no RuntimeSchemaInfo.
2. torch/distributed/tensor/_dispatch.py: as_strided_handler, put in
   OpDispatcher's _custom_op_handlers for aten.as_strided.default. When size,
   stride and storage offset (or None) are the input's own, it returns
   aten.alias.default(input), a DTensor with the input's placements (through
   change 1); any other as_strided raises RuntimeError("as_strided not
   supported with DTensor") instead of the NotImplementedError above.
   OpDispatcher.dispatch looks up _custom_op_handlers before any sharding
   propagation. The dict is built in OpDispatcher.__init__ and the one
   instance is DTensor._op_dispatcher, made when torch.distributed.tensor._api
   is imported (it imports _dispatch): this patch puts the handler, written
   here from the PR, into that instance's dict. _dispatch is not the target,
   but it is always imported by the time this target is used, and apply()
   imports it (torch.distributed.tensor imports _ops, and so this target,
   before _api; importing _api from apply() is what the first version of this
   backport already did).

Fingerprints, read from the wheels (2.9.0's from its PyPI wheel):

  release         aten.alias   propagate_single_     OpDispatcher.dispatch  as_strided_handler
                  strategy     input_strategy
  2.7.0           none         absent                e44ae1bc771b781c       absent
  2.8.0           none         absent                95b95050e28077f4       absent
  2.9.0, 2.9.1    none (bug)   aeed7befc824896d      90285bd6817ad24f       absent (the bug)
  2.10.0, 2.11.0  registered   aee25ad089aa4f74      absent (moved to C++)  0e8a015fae66dacf
  2.12.x, 2.13.0  registered   aee25ad089aa4f74      absent                 d992c99619281108
  2.14.1, 2.15.0  registered*  absent*               absent                 cbdaada05ccc67be

  * 2.14.1 and 2.15.0 register alias with register_single_dim_strategy and
    propagate_single_input_single_dim_strategy.

apply() checks propagate_single_input_strategy and OpDispatcher.dispatch (the
function that must consult _custom_op_handlers first) against the 2.9
fingerprints, and probes the registries: both alias strategy and as_strided
handler present is a build carrying the fix (CarriesFix); exactly one of them
is neither the verified nor the fixed code (Unrecognised), and nothing is
changed in either case.

The claim is 2.9.0 - 2.9.x. 2.7.0 and 2.8.0 have neither the alias strategy
nor the as_strided handler either (their sources, above), so an identity
as_strided or `dt[...]` fails there too: on stock 2.7.0 REPRODUCER's
as_strided checks fail with the aten.as_strided.default symptom while its
full-dim slices, the reported bug, pass. The claim is not widened to them:
the strategy change 1 uses (propagate_single_input_strategy) does not exist
there (they register clone & co. with default_strategy), so carrying the PR
to them is another patch over other code, to be verified on its own.

The PR's own test, DTensorTest.test_as_strided_identity
(test/distributed/tensor/test_dtensor.py), asserts that the identity
as_strided of a Shard(0) DTensor has the input's size, stride and local
tensor; REPRODUCER asserts that for Shard(0), Shard(1) and Replicate, with and
without storage_offset, plus the placements and full tensor, the full-dim
slices above, and the RuntimeError of a non-identity as_strided.

Not carried: the permutation case of as_strided_handler
(_as_strided_permutation, pytorch#191784, first in 2.14.1), a later and
separate fix; here, as on 2.10 to 2.13, a transposing as_strided raises
RuntimeError. The handler's `assert not kwargs` is written
`if kwargs: raise AssertionError`, as 2.12 and later have it.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "dtensor-alias-strategy"

# propagate_single_input_strategy, the strategy this patch registers.
VERIFIED = {"aeed7befc824896d": "2.9.0 - 2.9.1"}
# 2.10's copy of it; the fix itself is found by the probes in apply().
FIXED = {"aee25ad089aa4f74": "2.10.0 - 2.13.0"}
# OpDispatcher.dispatch, which must look up _custom_op_handlers before
# propagating shardings. 2.10 and later have no such method (the entry point
# moved to C++), so no fixed fingerprint exists.
DISPATCH_VERIFIED = {"90285bd6817ad24f": "2.9.0 - 2.9.1"}


def _as_strided_handler(torch: ModuleType, fill_defaults):
    """as_strided_handler of pytorch#166867 (torch/distributed/tensor/_dispatch.py)."""

    def as_strided_handler(op_call, args, kwargs):
        args, kwargs = fill_defaults(op_call._schema, args, kwargs)
        if kwargs:
            raise AssertionError
        tensor, size, stride, storage_offset = args
        if (
            tensor.size() == tuple(size)
            and tensor.stride() == tuple(stride)
            and (storage_offset is None or tensor.storage_offset() == storage_offset)
        ):
            return torch.ops.aten.alias.default(tensor)
        raise RuntimeError("as_strided not supported with DTensor")

    return as_strided_handler


def apply(tensor_ops: ModuleType, release: Release) -> Revert:
    """Register tensor_ops.propagate_single_input_strategy for aten.alias.default
    and put an as_strided handler in DTensor's OpDispatcher, unless the build
    has either; return the undo of both."""
    import torch
    import torch.distributed.tensor._dispatch as dispatch
    from torch._library.utils import fill_defaults
    from torch.distributed.tensor._api import DTensor

    alias = torch.ops.aten.alias.default
    as_strided = torch.ops.aten.as_strided.default
    dispatcher = DTensor._op_dispatcher
    propagator = dispatcher.sharding_propagator
    for registry in ("op_strategy_funcs", "op_to_rules"):
        if not isinstance(getattr(propagator, registry, None), dict):
            raise _patching.Unrecognised("ShardingPropagator.%s is not a dict" % registry)
    handlers = vars(dispatcher).get("_custom_op_handlers")
    if not isinstance(handlers, dict):
        raise _patching.Unrecognised("DTensor._op_dispatcher has no _custom_op_handlers dict")
    # op_single_dim_strategy_funcs: where 2.15's register_single_dim_strategy puts it
    has_alias = [registry for registry in
                 ("op_strategy_funcs", "op_to_rules", "op_single_dim_strategy_funcs")
                 if alias in getattr(propagator, registry, {})]
    has_as_strided = as_strided in handlers
    if has_alias and has_as_strided:
        raise _patching.CarriesFix("DTensor already has a sharding strategy for "
                                   "aten.alias.default (ShardingPropagator.%s) and a "
                                   "handler for aten.as_strided.default" % has_alias[0])
    if has_alias or has_as_strided:
        raise _patching.Unrecognised(
            "DTensor has %s but not %s: half of pytorch#166867"
            % (("an aten.alias.default strategy", "an aten.as_strided.default handler")
               if has_alias else
               ("an aten.as_strided.default handler", "an aten.alias.default strategy")))
    strategy = vars(tensor_ops).get("propagate_single_input_strategy")
    register = vars(tensor_ops).get("register_op_strategy")
    if strategy is None or register is None:
        raise _patching.Unrecognised("%s has no propagate_single_input_strategy and "
                                     "register_op_strategy" % tensor_ops.__name__)
    _patching.check(strategy, tensor_ops.__name__ + ".propagate_single_input_strategy",
                    VERIFIED, FIXED)
    opdispatcher = vars(dispatch).get("OpDispatcher")
    if not isinstance(dispatcher, opdispatcher or ()):
        raise _patching.Unrecognised("DTensor._op_dispatcher is not a %s.OpDispatcher"
                                     % dispatch.__name__)
    _patching.check(vars(opdispatcher).get("dispatch"), "OpDispatcher.dispatch",
                    DISPATCH_VERIFIED, {})

    handler = _as_strided_handler(torch, fill_defaults)
    register(alias)(strategy)  # as PR #166867 does, in the list with clone & co.
    handlers[as_strided] = handler  # as PR #166867 does, in OpDispatcher.__init__

    def revert() -> None:
        if handlers.get(as_strided) is handler:
            del handlers[as_strided]
        if propagator.op_strategy_funcs.get(alias) is strategy:
            del propagator.op_strategy_funcs[alias]
            propagator.op_to_schema_info.pop(alias, None)
            # the calling thread's cached propagation results (LocalLRUCache)
            cache = getattr(propagator.propagate_op_sharding, "cache", None)
            if cache is not None:
                cache.cache_clear()

    return revert


# Slices covering whole dims of a DTensor and identity as_strided views of
# it, on a one-rank gloo group on CPU. Each check runs, so that stock prints
# every missing strategy.
REPRODUCER = r'''
import sys, traceback
import torch
import torch.distributed as dist

if not dist.is_available() or not dist.is_gloo_available():
    print("skipped: needs torch.distributed with gloo")
    sys.exit(77)

from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

# One rank needs no rendezvous: a HashStore binds no port another program
# could take first.
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
failed = []


def check(what, fn):
    try:
        fn()
    except Exception:
        traceback.print_exc()
        failed.append(what)


def same(y, dt, x):
    assert isinstance(y, DTensor), type(y)
    assert y.placements == dt.placements, (y.placements, dt.placements)
    assert y.size() == dt.size() and y.stride() == dt.stride(), (y.size(), y.stride())
    assert torch.equal(y.to_local(), dt.to_local()), (y.to_local(), dt.to_local())
    assert torch.equal(y.full_tensor(), x), (y.full_tensor(), x)


def slices(dt, x):
    # dt[:, :4] as in pytorch/pytorch#170427; dt[:, 0:] as transformers'
    # hidden_states[:, slice(-logits_to_keep, None), :] with logits_to_keep=0
    for y in (dt[:, :4], dt[:, 0:]):
        same(y, dt, x)


def identity_as_strided(dt, x):
    # pytorch#166867's test_as_strided_identity, and without storage_offset
    same(dt.as_strided(dt.size(), dt.stride(), dt.storage_offset()), dt, x)
    same(dt.as_strided(dt.size(), dt.stride()), dt, x)


def other_as_strided(dt, x):
    # anything else is refused, as in 2.10 and later
    for args in (((2, 2), (4, 1), 0), (dt.size(), dt.stride(), dt.storage_offset() + 1)):
        try:
            dt.as_strided(*args)
        except NotImplementedError:
            raise
        except RuntimeError as e:
            assert "as_strided not supported with DTensor" in str(e), e
        else:
            raise AssertionError("as_strided%r on a DTensor did not raise" % (args,))


try:
    mesh = init_device_mesh("cpu", (1,))
    x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    for placement in (Shard(0), Shard(1), Replicate()):
        dt = distribute_tensor(x, mesh, [placement])
        for test in (slices, identity_as_strided, other_as_strided):
            check("%s on %s" % (test.__name__, placement), lambda: test(dt, x))
finally:
    dist.destroy_process_group()
if failed:
    print("failed: " + ", ".join(failed), file=sys.stderr)
# Leave without the interpreter's own exit, whose C++ teardown of gloo's
# threads once ended a run that had passed with "terminate called without
# an active exception" (CI, torch 2.10.0, 2026-12-06).
import os
sys.stdout.flush()
sys.stderr.flush()
os._exit(1 if failed else 0)
'''

BACKPORT = Backport(
    name=NAME,
    summary="DTensor has a sharding strategy for aten.alias and an identity as_strided "
    "handler, so dt[:, :n] over a whole dim and dt.as_strided(dt.size(), dt.stride()) "
    "work instead of raising NotImplementedError",
    headline="`NotImplementedError`: no DTensor sharding strategy for `aten.alias` (`dt[:, :n]`)",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/166867",
        "https://github.com/pytorch/pytorch/issues/170427",
        "https://github.com/NVIDIA-NeMo/RL/pull/1728",
    ),
    first_affected=(2, 9, 0),
    first_fixed=(2, 10, 0),
    apply=apply,
    reproducer=REPRODUCER,
    # stock 2.9 prints it for aten.alias.default and aten.as_strided.default
    symptom="does not have a sharding strategy registered",
    readme_symptom=(
        "`NotImplementedError: Operator aten.alias.default does not have a sharding "
        "strategy registered` for `dt[:, :n]` over a whole dimension (transformers' "
        "`logits_to_keep=0` under tensor parallelism), in eager mode; `… "
        "aten.as_strided.default does not have a sharding strategy registered` for an "
        "identity `dt.as_strided(dt.size(), dt.stride(), dt.storage_offset())`"
    ),
    readme_fix=(
        "carries both halves of pytorch#166867, or neither. It registers the strategy "
        "2.10 registers for `aten.alias.default` (`propagate_single_input_strategy`), and "
        "puts 2.10's `as_strided` handler into DTensor's "
        "`OpDispatcher._custom_op_handlers`: an identity `dt.as_strided(dt.size(), "
        "dt.stride(), dt.storage_offset())` returns an alias with the same placements, "
        "and any other `as_strided` raises `RuntimeError: as_strided not supported with "
        "DTensor`, as 2.10 – 2.13 do. In place when `torch.distributed.tensor` is "
        "imported, before any DTensor exists. Not carried: 2.14's permutation case of the "
        "handler ([pytorch#191784]), a later fix. 2.7/2.8 lack both too, but their "
        "strategy code differs, so they are not claimed."
    ),
)
