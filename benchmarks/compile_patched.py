"""The program the "every patched function" benchmark times: one process
that goes through each function torch-backports patches on a compile's
path, without hitting any of the bugs (so stock torch runs it too), on
torch 2.10.0 (the runner's default) and on 2.13 and 2.14 (--torch). It never
imports torch_backports.

  fake-tensor-parameter-subclass  every fake-tensor op of the compiles
  fx-graph-cache-pickling         every FX graph and AOTAutograd cache key
  aot-autograd-cache-autocast,    (the same keys: check_node_safe for each
  aot-autograd-cache-nonce-collision  node, autograd_cache_key)
  cpp-vec-indirect-assert-mask    a vectorised gather with a bounds check
  dynamo-nnmodule-wrap-values     a module dynamo does not inline, using
                                  named_parameters() (not the buggy path)
  aot-compile-builtins            aot_compile of a plain function, where
                                  the API exists (2.10 and newer)
  inductor-mul-zero-nan           every joint graph's constant folding
  inductor-noop-copy-of-mutated-input  every compile's remove_noop_ops
  inductor-reinplace-scatter-self-overlap  a slice assigned into a clone
  inductor-fused-mutation-read-alias  index_put_ on an input, then an
                                  in-place update of it (same positions)
  tensorify-float-stale-cache,    a float argument that changes, so the
  dynamo-checkpoint-symfloat-proxy  second compile makes it a SymFloat
  aot-noop-view-output-alias      every compile's metadata collection; a
                                  mutated input and its view (synthetic
                                  base); freezing (replace_params_with_constants)
  aot-bare-subclass-dispatch      the first call of every compiled graph

Not on it: aot-noop-view-output-alias's remove_dupe_metadata (dynamo passes
an input given twice once, so only aot_function's callers reach it),
flex_attention's lowering (flex-attention-scalar-grad: a CPU
flex compile alone outlasts this program), and the patches of functions
that run at registration or in eager mode (benchmarks/eager_calls.py has
register_hook, torch.fx.wrap and custom-op autograd).
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


# The patched passes of inductor and AOTAutograd that the compiles above
# reach only in part.
def scatter_and_put(x, y, index, values):
    z = x.clone()
    z[:, :2] = y
    x.index_put_((index,), values)
    x.mul_(2)
    return z + 1


grid = torch.zeros(8, 4)
torch.compile(scatter_and_put)(grid, torch.ones(8, 2), torch.tensor([0, 3]), torch.ones(2, 4))


def scaled(x, s):
    return x * s + s


for s in (0.5, 0.75):
    torch.compile(scaled)(torch.ones(8), s).sum().item()


def mutate_through_view(a, b):
    a.add_(1)
    return b * 2


base = torch.zeros(4, 4)
torch.compile(mutate_through_view)(base, base[0]).sum().item()

with torch.no_grad(), torch._inductor.config.patch(freezing=True):
    torch.compile(torch.nn.Linear(8, 8).eval())(torch.randn(2, 8)).sum().item()
