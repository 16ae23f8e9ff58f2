"""A small model with a custom op that mutates its input, compiled with
inductor: the warm-start program for auto-functionalized-cacheable. It
never imports torch_backports. Prints the cache counters as one JSON line."""

import json

import torch
from torch._dynamo.utils import counters


@torch.library.custom_op("tb_bench::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, factor: float) -> None:
    x.mul_(factor)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 16)

    def forward(self, x):
        h = torch.relu(self.a(x))
        scale_(h, 0.5)
        return self.b(h).softmax(-1)


torch.manual_seed(0)
with torch.no_grad():  # inference, as in serving: the op mutates an activation
    out = torch.compile(Model())(torch.randn(8, 64))
print(json.dumps({"sum": round(float(out.sum()), 4),
                  "inductor": {k: v for k, v in counters["inductor"].items()
                               if k.startswith("fxgraph")},
                  "aot_autograd": {k: v for k, v in counters["aot_autograd"].items()
                                   if k.startswith("autograd_cache")}}))
