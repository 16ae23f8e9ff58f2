"""FSDP2 (fully_shard) unshards its parameters under torch.inference_mode()
on one rank, and with a Shard(i) placement, i != 0, on several.

Upstream:
  https://github.com/pytorch/pytorch/pull/197327   the fix (first in 2.15.0)
  https://github.com/pytorch/torchtitan/pull/3070  torchtitan RL skips FSDP
                                                   for inference because of it

A forward of a fully_shard model inside torch.inference_mode() unshards
each parameter group into its all-gather output tensors, which, created in
inference mode, are inference tensors. FSDP hides its in-place copies into
them from autograd with torch.autograd._unsafe_preserve_version_counter,
which reads each tensor's _version, and an inference tensor has none:

  RuntimeError: Inference tensors do not track version counter.

The copy-out after a real all-gather already left inference tensors out of
that guard (pytorch/pytorch#146709), but two other copies did not:

  * FSDPParamGroup.wait_for_unshard, in the one-rank branch (new in 2.9.0)
    that copies each sharded parameter straight into its output: any
    fully_shard model on a mesh of one, the dp_shard=1 case of torchtitan;
  * foreach_all_gather_copy_out, where the output of a Shard(i), i != 0,
    placement (fully_shard's shard_placement_fn) is chunk-catted from a
    temporary into the all-gather outputs: two ranks or more from 2.9.0;
    in 2.7.0 and 2.8.0, which had no one-rank branch, one rank as well.

Read from each release's torch/distributed/fsdp/_fully_shard/:

  release          FSDPParamGroup.wait_for_unshard  foreach_all_gather_copy_out
  2.7.0            71552fad71f916b1 (no one-rank    96b9aadcab2e712c
                   branch: not patched)
  2.8.0            3e0fc2c95a6e1fc8 (likewise)      f3dfe376b5c14e88
  2.9.0, 2.9.1     2bd1114041bcbbd6                 f3dfe376b5c14e88
  2.10.0, 2.11.0   bcb104e8f8161bc7                 f3dfe376b5c14e88
  2.12.0, 2.12.1   bcb104e8f8161bc7                 fed41a564b8d09e4
  2.13.0 - 2.14.1  068dd26aced4de32                 e0307941a9a3e970
  2.15.0           4a182a934e0d3ee2 fixed           2f7f1cc8d994549a fixed

The chunk-cat in 2.15.0 lives in a new helper, _reassemble_all_gather_outputs,
that foreach_all_gather_copy_out reaches through the new all_gather_output_fn
hook; its text is the same as the loop at the end of the older
foreach_all_gather_copy_out, except for the fix.

PR #197327 guards the one-rank copy with the version-counter context only
when the output is not an inference tensor (contextlib.nullcontext()
otherwise), and passes the chunk-cat's guard only the outputs that are not
inference tensors. The patch recompiles the installed functions from their
own source with those two edits, word for word as in 2.15.0: wait_for_unshard
(set on FSDPParamGroup, 2.9.0 - 2.14.1) and foreach_all_gather_copy_out (set
on _fsdp_collectives and on _fsdp_param_group, which imports it by name, so
that wait_for_unshard calls the fixed one).

Not carried: the rest of what 2.15.0 changed in these two functions, none
of it about inference tensors (the PR's description names only the version
counter error; its diff was not read here): in the one-rank branch the view
of a uint8 output as bytes ("copy a byte payload bytewise into a cached
output of another dtype"), and the all_gather_output_fn hook and the split
of foreach_all_gather_copy_out into helpers. In 2.7.0 and 2.8.0,
wait_for_unshard has no one-rank branch (one rank takes the all-gather path,
whose dim-0 copy-out already skips inference tensors), so only
foreach_all_gather_copy_out is patched there.
"""

from __future__ import annotations

import sys
from types import ModuleType

from .. import _fingerprint, _patching
from .._backport import Backport, Release, Revert, two_gloo_ranks

NAME = "fsdp2-inference-mode-unshard"

VERIFIED_UNSHARD = {
    "2bd1114041bcbbd6": "2.9.0 - 2.9.1",
    "bcb104e8f8161bc7": "2.10.0 - 2.12.1",
    "068dd26aced4de32": "2.13.0 - 2.14.1",
}
FIXED_UNSHARD = {"4a182a934e0d3ee2": "2.15.0"}
# Before 2.9.0: no one-rank branch, nothing to change in wait_for_unshard.
NO_ONE_RANK_BRANCH = {
    "71552fad71f916b1": "2.7.0",
    "3e0fc2c95a6e1fc8": "2.8.0",
}

VERIFIED_COPY_OUT = {
    "96b9aadcab2e712c": "2.7.0",
    "f3dfe376b5c14e88": "2.8.0 - 2.11.0",
    "fed41a564b8d09e4": "2.12.0 - 2.12.1",
    "e0307941a9a3e970": "2.13.0 - 2.14.1",
}
FIXED_COPY_OUT = {"2f7f1cc8d994549a": "2.15.0"}

# pytorch/pytorch#197327, in the dedented source of
# FSDPParamGroup.wait_for_unshard (the one-rank branch).
UNSHARD_EDITS = [
    (
        "            # find alternative way to check if tensor.is_inference\n"
        "            with torch.autograd._unsafe_preserve_version_counter(tensor):\n"
        "                tensor.copy_(all_gather_input)\n",
        "            with (\n"
        "                torch.autograd._unsafe_preserve_version_counter(tensor)\n"
        "                if not tensor.is_inference()\n"
        "                else contextlib.nullcontext()\n"
        "            ):\n"
        "                tensor.copy_(all_gather_input)\n",
    ),
]

# pytorch/pytorch#197327, in the dedented source of foreach_all_gather_copy_out
# (the Shard(i), i != 0, chunk-cat).
COPY_OUT_EDITS = [
    (
        "        with torch.autograd._unsafe_preserve_version_counter(\n"
        "            tuple(fsdp_param.all_gather_outputs)\n"
        "        ):\n",
        "        with torch.autograd._unsafe_preserve_version_counter(\n"
        "            tuple(t for t in fsdp_param.all_gather_outputs if not t.is_inference())\n"
        "        ):\n",
    ),
]


def _undecorated(function, where: str):
    inner = getattr(function, "__wrapped__", None)
    if inner is None:
        raise _patching.Unrecognised("%s is not decorated as expected" % where)
    if getattr(function, _patching._MARK, False) or getattr(inner, _patching._MARK, False):
        raise RuntimeError("%s is already patched by torch-backports" % where)
    return inner


def apply(param_group: ModuleType, release: Release) -> Revert:
    """Replace FSDPParamGroup.wait_for_unshard and foreach_all_gather_copy_out
    (in _fsdp_collectives and where _fsdp_param_group imported it) by copies
    that leave inference tensors out of the version-counter guard; return the
    undo."""
    collectives = sys.modules.get(param_group.__name__.rpartition(".")[0] + "._fsdp_collectives")
    if collectives is None:
        raise _patching.Unrecognised("_fsdp_collectives is not imported with _fsdp_param_group")
    copy_out = vars(collectives).get("foreach_all_gather_copy_out")
    if copy_out is None or vars(param_group).get("foreach_all_gather_copy_out") is not copy_out:
        raise _patching.Unrecognised(
            "_fsdp_param_group.foreach_all_gather_copy_out is not _fsdp_collectives'")
    owner = param_group.FSDPParamGroup
    unshard = vars(owner).get("wait_for_unshard")
    if unshard is None:
        raise _patching.Unrecognised("FSDPParamGroup.wait_for_unshard is missing")

    # Everything is checked, and every copy compiled, before anything is set.
    # foreach_all_gather_copy_out is decorated with @torch.no_grad(), and
    # wait_for_unshard from 2.13.0 with @_disable_functorch_if_active: their
    # sources hold the decorators, so the rewritten copies come back decorated.
    new_copy_out = _patching.rewritten(
        _undecorated(copy_out, "foreach_all_gather_copy_out"),
        COPY_OUT_EDITS, VERIFIED_COPY_OUT, FIXED_COPY_OUT)
    new_unshard = None
    unshard_inner = getattr(unshard, "__wrapped__", unshard)
    try:
        found, _ = _fingerprint.source_of(
            unshard_inner, {**VERIFIED_UNSHARD, **FIXED_UNSHARD, **NO_ONE_RANK_BRANCH})
    except (OSError, TypeError) as exc:
        raise _patching.Unrecognised(
            "FSDPParamGroup.wait_for_unshard: its source cannot be read (%s)" % exc) from None
    if found not in NO_ONE_RANK_BRANCH:
        # Undecorated in 2.9.0 - 2.12.1, @_disable_functorch_if_active from 2.13.0.
        if getattr(unshard, _patching._MARK, False):
            raise RuntimeError("FSDPParamGroup.wait_for_unshard is already patched by "
                               "torch-backports")
        new_unshard = _patching.rewritten(unshard_inner, UNSHARD_EDITS, VERIFIED_UNSHARD,
                                          FIXED_UNSHARD)

    reverts = [
        _patching.replace_attribute(collectives, "foreach_all_gather_copy_out", new_copy_out,
                                    VERIFIED_COPY_OUT, FIXED_COPY_OUT),
        _patching.replace_attribute(param_group, "foreach_all_gather_copy_out", new_copy_out,
                                    VERIFIED_COPY_OUT, FIXED_COPY_OUT),
    ]
    if new_unshard is not None:
        reverts.append(_patching.replace_attribute(owner, "wait_for_unshard", new_unshard,
                                                   VERIFIED_UNSHARD, FIXED_UNSHARD))

    return _patching.undo_all(reverts)


# One gloo rank in this interpreter (a HashStore, no rendezvous), then two:
# this program as rank 0, a second interpreter as rank 1. Each runs a
# fully_shard model with Shard(0) and then Shard(1) placements forward twice
# under inference_mode and compares with the unwrapped model. One rank
# reaches wait_for_unshard's one-rank branch (from 2.9.0; before, the
# all-gather copy-out's chunk-cat for Shard(1)); two ranks with Shard(1)
# reach the chunk-cat.
REPRODUCER = two_gloo_ranks(r"""
import os, sys
from datetime import timedelta
import torch
import torch.distributed as dist
from torch import nn

try:
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
except ImportError as exc:
    print("skipped: needs torch.distributed.fsdp.fully_shard (%s)" % exc)
    sys.exit(77)


def check(world, rank):
    if world == 1:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group("gloo", init_method=os.environ["RENDEZVOUS"], rank=rank,
                                world_size=world, timeout=timedelta(seconds=60))
    try:
        mesh = init_device_mesh("cpu", (world,))
        for dim in (0, 1):
            torch.manual_seed(0)
            ref = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
            model.load_state_dict(ref.state_dict())
            place = (lambda param: Shard(dim if param.dim() > 1 else 0))
            for layer in (model[0], model[2]):
                fully_shard(layer, mesh=mesh, shard_placement_fn=place)
            fully_shard(model, mesh=mesh, shard_placement_fn=place)
            x = torch.randn(3, 8)
            # Twice: the second forward reuses the inference all-gather outputs.
            for _ in range(2):
                with torch.inference_mode():
                    got = model(x)
                with torch.no_grad():
                    want = ref(x)
                torch.testing.assert_close(got, want)
        dist.barrier()
    finally:
        dist.destroy_process_group()


rank = int(os.environ["RANK"])
if rank == 0:
    check(1, 0)  # alone on a HashStore, while rank 1 waits at the rendezvous
check(2, rank)
""")

BACKPORT = Backport(
    name=NAME,
    summary="FSDP2 (fully_shard) runs forward under torch.inference_mode() on one rank "
    "and with Shard(i != 0) placements (RuntimeError: Inference tensors do not track "
    "version counter)",
    headline="`Inference tensors do not track version counter` from FSDP2 under `inference_mode`",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/197327",
        "https://github.com/pytorch/torchtitan/pull/3070",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Inference tensors do not track version counter",
    readme_symptom=(
        "`RuntimeError: Inference tensors do not track version counter.` for an FSDP2 "
        "(`fully_shard`) forward under `torch.inference_mode()` on one rank (from 2.9) or "
        "with a Shard(i ≠ 0) placement"
    ),
    readme_fix=(
        "[pytorch#197327]'s two guards: the one-rank copy in "
        "`FSDPParamGroup.wait_for_unshard` (2.9 – 2.14; 2.7 – 2.8 have no such branch) "
        "and the Shard(i ≠ 0) copy in `foreach_all_gather_copy_out` (also under the name "
        "`_fsdp_param_group` imported it by) leave inference tensors out of "
        "`_unsafe_preserve_version_counter`. Not carried: 2.15's one-rank byte view and "
        "its split of the copy-out into helpers, other changes."
    ),
)
