"""FSDP's summon_full_params(offload_to_cpu=True) and full state dicts with
offload_to_cpu=True work when the flat parameter is on the CPU already.

Upstream:
  https://github.com/pytorch/pytorch/pull/188990   the fix (first in 2.14.0)
  https://github.com/pytorch/pytorch/issues/188989 the report (2.9.1)

FSDP1 (FullyShardedDataParallel) unshards a sharded flat parameter for
`summon_full_params(..., offload_to_cpu=True)`, and for a FULL_STATE_DICT
whose FullStateDictConfig has offload_to_cpu=True (Lightning saves its FSDP
checkpoints that way), and then enters FlatParamHandle.to_cpu(), which copies
the unsharded flat parameter to the CPU and frees the unsharded storage on
the compute device. When that device is the CPU (gloo, device_id=cpu), or
the flat parameter already lives there, the "copy" is the tensor itself, so
freeing the unsharded storage frees the very storage that the flat parameter
and its views now alias, and the next view of it raises

  RuntimeError: setStorage: sizes [60], strides [1], storage offset 0, and
  itemsize 4 requiring a storage size of 240 are out of bounds for storage
  of size 0

A world of one is clamped to NO_SHARD, which never calls to_cpu(), so it
takes two ranks or more.

FlatParamHandle.to_cpu (a contextlib.contextmanager), read from each
release's torch/distributed/fsdp/_flat_param.py:

  release          FlatParamHandle.to_cpu
  2.7.0 - 2.13.0   c6719aeeeae583d3   (2.7.0, 2.8.0, 2.9.1, 2.10.0, 2.11.0,
                                       2.12.0, 2.12.1, 2.13.0 alike)
  2.14.1 - 2.15.0  743f046bc4036d44   fixed

PR #188990 makes to_cpu() a no-op context when the flat parameter's device
type is "cpu" (`contextlib.nullcontext()`), after the same precondition
checks, and moves the old body into a new context manager
FlatParamHandle._offload_to_cpu, whose restore step becomes a new method
_restore_unsharded_flat_param_from_cpu. The patch recompiles the installed
to_cpu from its own source with the same condition as an early return
before the move to the CPU (`yield; return`, which behaves as the
nullcontext does: nothing moved, freed or restored) and sets it on the class.

Not carried: the two new methods. They only hold the code that to_cpu()
already runs in place (nothing in 2.14 or 2.15 calls them from anywhere
else), so adding them would change no behaviour.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert, two_gloo_ranks

NAME = "fsdp-to-cpu-already-on-cpu"

VERIFIED = {"c6719aeeeae583d3": "2.7.0 - 2.13.0"}
FIXED = {"743f046bc4036d44": "2.14.1 - 2.15.0"}

# pytorch/pytorch#188990, in the dedented source of FlatParamHandle.to_cpu.
EDITS = [
    (
        "    )\n"
        '    self.flat_param_to(torch.device("cpu"))\n'
        "    self._free_unsharded_flat_param()\n",
        "    )\n"
        '    if self.flat_param.device.type == "cpu":\n'
        "        yield\n"
        "        return\n"
        '    self.flat_param_to(torch.device("cpu"))\n'
        "    self._free_unsharded_flat_param()\n",
    ),
]


def apply(flat_param: ModuleType, release: Release) -> Revert:
    """Replace _flat_param.FlatParamHandle.to_cpu by one that leaves a flat
    parameter on the CPU where it is; return the undo."""
    owner = flat_param.FlatParamHandle
    old = vars(owner).get("to_cpu")
    # The generator function under @contextlib.contextmanager: its source
    # holds the decorator, so the rewritten copy comes back decorated.
    generator = getattr(old, "__wrapped__", None)
    if generator is None:
        raise _patching.Unrecognised("FlatParamHandle.to_cpu is not a contextmanager")
    if getattr(old, _patching._MARK, False):
        raise RuntimeError("FlatParamHandle.to_cpu is already patched by torch-backports")
    fixed = _patching.rewritten(generator, EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(owner, "to_cpu", fixed, VERIFIED, FIXED)


# Two gloo ranks on the CPU: this program is rank 0, a second interpreter
# rank 1. Each takes its FSDP model through summon_full_params(offload_to_cpu=
# True) and a rank-0-only full state dict offloaded to the CPU, checks the
# values against the unwrapped model, and that FSDP's own parameters still
# compute the same afterwards. CPUOffload(offload_params=True) pins memory,
# which needs an accelerator, so the CPU-only reproducer cannot use it; the
# flat parameter is on the CPU in both cases, the condition the fix tests.
REPRODUCER = two_gloo_ranks(r"""
import copy, os
from datetime import timedelta
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import (
    FullStateDictConfig, FullyShardedDataParallel as FSDP, StateDictType)

rank = int(os.environ["RANK"])
dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=rank,
                        world_size=2, timeout=timedelta(seconds=60))
try:
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))
    x = torch.randn(4, 6)
    # Twice: the first summon also runs FSDP's lazy init.
    model = FSDP(copy.deepcopy(ref), device_id=torch.device("cpu"))
    for _ in range(2):
        with FSDP.summon_full_params(model, offload_to_cpu=True):
            full = [p.detach().clone() for p in model.parameters()]
        assert len(full) == len(list(ref.parameters()))
        for got, want in zip(full, ref.parameters()):
            torch.testing.assert_close(got, want.detach())
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                  FullStateDictConfig(offload_to_cpu=True, rank0_only=True)):
            state = model.state_dict()
        if rank == 0:
            want = ref.state_dict()
            assert sorted(state) == sorted(want), (sorted(state), sorted(want))
            for key, value in want.items():
                assert state[key].device.type == "cpu"
                torch.testing.assert_close(state[key], value)
        else:
            assert not state, sorted(state)
        torch.testing.assert_close(model(x), ref(x))
    # Neither rank tears gloo down while the other is still in a collective:
    # without this, rank 1 ended in "terminate called without an active
    # exception" in 4 of 42 runs on 2.11.0 (0 of 60 with it), after every
    # check had passed.
    dist.barrier()
finally:
    dist.destroy_process_group()
""")

BACKPORT = Backport(
    name=NAME,
    summary="FSDP summon_full_params(offload_to_cpu=True) and FULL_STATE_DICT with "
    "offload_to_cpu=True work on a flat parameter already on the CPU, instead of "
    "freeing its storage (RuntimeError: setStorage: ... out of bounds for storage of size 0)",
    headline="`setStorage … out of bounds` from FSDP1 `offload_to_cpu=True` with CPU parameters",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/188990",
        "https://github.com/pytorch/pytorch/issues/188989",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="out of bounds for storage of size 0",
    readme_symptom=(
        "`RuntimeError: setStorage: … out of bounds for storage of size 0` from FSDP1's "
        "`summon_full_params(offload_to_cpu=True)`, or a `FULL_STATE_DICT` saved with "
        "`offload_to_cpu=True` (Lightning's FSDP checkpoints), when the flat parameter is "
        "on the CPU already (gloo, `device_id=cpu`), with two ranks or more"
    ),
    readme_fix=(
        "[pytorch#188990]'s condition: `FlatParamHandle.to_cpu` does nothing (as 2.14's "
        "`nullcontext()` does) when the flat parameter is already on the CPU, so it no "
        "longer frees the storage the parameter and its views alias. The installed "
        "`to_cpu` is recompiled from its own source with that early return, after the "
        "same precondition checks."
    ),
)
