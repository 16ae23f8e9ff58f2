"""A DTensor program for the AOTAutograd cache tests (issue 12), after
pytorch#179597's reproducer moved from nccl/CUDA to gloo/CPU. It never
imports torch_backports.

usage: python -m torch.distributed.run --nproc_per_node=N dtensor_program.py compile OUT
       python -m torch.distributed.run --nproc_per_node=2 dtensor_program.py keys OUT

Each rank writes its result to OUT/rank-<rank>.json (ranks share stdout,
where their lines interleave).
compile  each rank compiles `x * 2 + 1` on a DTensor sharded over a
         flattened mesh, checks the result against eager, and records its
         rank and the AOTAutograd cache counters.
keys     each rank records, for DTensors that differ in one object of the
         key (mesh rank order, mesh dim name, placement, shape, dtype,
         requires_grad), a digest of AOTAutogradCachePickler.dumps(dtensor),
         or the error that stopped it.
"""

import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard


def flattened(mesh, name):
    # _flatten is what makes the DeviceMesh cyclic (pytorch#179597).
    flatten = getattr(mesh, "_flatten", None)
    return flatten(mesh_dim_name=name) if flatten is not None else mesh


def compile_once(world):
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("world",))
    local = torch.arange(12.0).reshape(3, 4) + 100 * dist.get_rank()
    x = DTensor.from_local(local, flattened(mesh["world"], "dp"), [Shard(0)])
    out = torch.compile(lambda t: t * 2 + 1)(x)
    aot = counters["aot_autograd"]
    return {"rank": dist.get_rank(), "equal": torch.equal(out.to_local(), local * 2 + 1),
            "hit": aot["autograd_cache_hit"], "miss": aot["autograd_cache_miss"],
            "bypass": aot["autograd_cache_bypass"]}


def digest(dtensor):
    from torch._functorch._aot_autograd.autograd_cache import AOTAutogradCachePickler

    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    try:
        return hashlib.sha256(AOTAutogradCachePickler(gm).dumps(dtensor)).hexdigest()[:16]
    except Exception as exc:  # the cache's caller turns this into a bypass
        return "error: %s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:80])


def keys(world):
    ranks = list(range(world))
    mesh = DeviceMesh("cpu", ranks, mesh_dim_names=("world",))
    reversed_mesh = DeviceMesh("cpu", ranks[::-1], mesh_dim_names=("world",))
    renamed = DeviceMesh("cpu", ranks, mesh_dim_names=("tp",))
    local = torch.ones(2, 4)
    variants = {
        "base": DTensor.from_local(local, mesh, [Shard(0)]),
        "same-again": DTensor.from_local(local.clone(), mesh, [Shard(0)]),
        "mesh-reversed": DTensor.from_local(local, reversed_mesh, [Shard(0)]),
        "mesh-renamed": DTensor.from_local(local, renamed, [Shard(0)]),
        "flattened": DTensor.from_local(local, flattened(mesh, "dp"), [Shard(0)]),
        "replicate": DTensor.from_local(local, mesh, [Replicate()]),
        "shard-dim-1": DTensor.from_local(local, mesh, [Shard(1)]),
        "shape": DTensor.from_local(torch.ones(2, 5), mesh, [Shard(0)]),
        "dtype": DTensor.from_local(local.double(), mesh, [Shard(0)]),
        "requires-grad": DTensor.from_local(local.requires_grad_(), mesh, [Shard(0)]),
    }
    return {"rank": dist.get_rank(), "keys": {k: digest(v) for k, v in variants.items()}}


def main(mode, out):
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    result = compile_once(world) if mode == "compile" else keys(world)
    dist.barrier()
    dist.destroy_process_group()
    Path(out, "rank-%d.json" % result["rank"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:3])
