"""The program the "every patched function" benchmark times: one process
that goes through each function torch-backports patches on torch 2.10.0,
without hitting any of the bugs (so stock torch runs it too). It never
imports torch_backports.

  fake-tensor-parameter-subclass  every fake-tensor op of the compiles
  fx-graph-cache-pickling         every FX graph and AOTAutograd cache key
  cpp-vec-indirect-assert-mask    a vectorised gather with a bounds check
  dynamo-nnmodule-wrap-values     a module dynamo does not inline, using
                                  named_parameters() (not the buggy path)
  aot-compile-builtins            aot_compile of a plain function, where
                                  the API exists (2.10 and newer)
"""

import warnings

import torch
import torch._dynamo

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    if hasattr(torch._dynamo.config, "inline_inbuilt_nn_modules"):
        torch._dynamo.config.inline_inbuilt_nn_modules = False
if hasattr(torch._dynamo.config, "enable_aot_compile"):
    torch._dynamo.config.enable_aot_compile = True


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x, index):
        dtype = dict(self.named_parameters())["a.weight"].dtype
        gathered = x.to(dtype)[index]
        return self.b(torch.relu(self.a(gathered))).softmax(-1)


torch.manual_seed(0)
model = Small()
x, index = torch.randn(16, 32), torch.randint(0, 16, (37,))
torch.compile(model)(x, index).sum().item()


def plain(x):
    return torch.mm(x, x) + 1


if hasattr(torch.compile(plain, fullgraph=True), "aot_compile"):
    square = torch.ones(4, 4)
    torch.compile(plain, fullgraph=True).aot_compile(((square,), {}))(square).sum().item()
