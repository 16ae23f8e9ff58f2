"""A small model over DTensors on a flattened 1-rank mesh, compiled with
inductor: the warm-start program for aot-autograd-cache-dtensor-key, after
pytorch#179597's reproducer on gloo/CPU. Run it under
`python -m torch.distributed.run --standalone --nproc_per_node=1`. It never
imports torch_backports. Prints the cache counters as one JSON line."""

import json

import torch
import torch.distributed as dist
from torch._dynamo.utils import counters
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, distribute_tensor

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("world",))
flat = mesh["world"]._flatten(mesh_dim_name="dp")  # the cycle of pytorch#179597
torch.manual_seed(0)
w1, w2, x = (distribute_tensor(torch.randn(*shape), flat, [Replicate()])
             for shape in ((64, 128), (128, 16), (8, 64)))


def model(x, w1, w2):
    return (torch.relu(x @ w1) @ w2).softmax(-1)


out = torch.compile(model)(x, w1, w2)
expected = model(x.to_local(), w1.to_local(), w2.to_local())
assert torch.allclose(out.to_local(), expected, atol=1e-5)
dist.destroy_process_group()
aot, inductor = counters["aot_autograd"], counters["inductor"]
print(json.dumps({"aot_hit": aot["autograd_cache_hit"], "aot_miss": aot["autograd_cache_miss"],
                  "aot_bypass": aot["autograd_cache_bypass"],
                  "fx_hit": inductor["fxgraph_cache_hit"], "fx_miss": inductor["fxgraph_cache_miss"],
                  "fx_bypass": inductor["fxgraph_cache_bypass"]}))
