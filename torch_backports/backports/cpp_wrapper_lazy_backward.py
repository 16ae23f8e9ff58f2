"""The first `.backward()` of `torch.compile(fn, options={"cpp_wrapper":
True})` on CUDA compiles, instead of failing with "AssertionError:
CudaKernelParamCache not populated for triton_...".

Upstream:
  https://github.com/pytorch/pytorch/pull/178847   the fix (first in 2.13.0)
  https://github.com/pytorch/pytorch/issues/178845 the bug

  >>> def func(x, output_grad):
  ...     output = torch.nn.LayerNorm(4).cuda()(x)
  ...     output.backward(output_grad)
  ...     return output
  >>> torch.compile(func, options={"cpp_wrapper": True})(x, output_grad)
  AssertionError: CudaKernelParamCache not populated for
  triton_poi_fused_native_layer_norm_native_layer_norm_backward_1   # stock 2.9 - 2.12

The backward graph is compiled lazily, at the first `.backward()`, after
compile_fx has returned and left the two config patches it compiled the
forward under: the caller's options ({"cpp_wrapper": True}) and the config
cpp_wrapper needs, get_cpp_wrapper_config() ("triton.store_cubin": True,
autotune at compile time, and cudagraphs off, on 2.12 only with graph
partition). The options reach the backward
all the same (compile_fx wraps inner_compile in them, and passes it
cpp_wrapper=True), but compile_fx_backward enters get_cpp_wrapper_config()
only where config.cpp_wrapper is set globally, which, outside compile_fx, it
no longer is. So the backward is compiled with a C++ wrapper but with
triton.store_cubin False: its Triton kernels' cubins are never stored in
CudaKernelParamCache, and the C++ wrapper's codegen, which reads them there,
fails. Setting torch._inductor.config.cpp_wrapper = True globally, instead of
through options, never failed.

PR #178847 makes two edits in torch/_inductor/compile_fx.py:
  1. compile_fx_inner, the compile of each graph, forward or backward,
     eager or lazy: when its cpp_wrapper argument is True it enters
     config.patch(get_cpp_wrapper_config(log_cudagraph_skip=False)) first;
  2. get_cpp_wrapper_config gains a parameter `log_cudagraph_skip` (default
     True) that gates its cudagraph skip warning and counter ("skipping
     cudagraphs due to cpp wrapper enabled" on 2.9 - 2.11, "... cpp-wrapper
     does not support graph partition yet" on 2.12): compile_fx has logged
     that skip already, and edit 1 must not log it once more per graph.
The backport makes exactly these edits in the installed functions
(torch_backports._patching.rewritten). 2.12's get_cpp_wrapper_config is
2.13's without the parameter. 2.9 - 2.11's differs from it in more than
that: it turns cudagraphs off and logs the skip whenever they are on, where
2.12 keeps cudagraphs without graph partition (#179249, a later change of
cpp_wrapper's, not of this fix, and not carried); the edit there gates that
release's own condition, so each release keeps its body, with the parameter
and its gate. The copy of get_cpp_wrapper_config gets the new parameter's
default, True, which rewritten() would otherwise replace by the original's
defaults (none).

compile_fx_inner is the default value of `inner_compile` of compile_fx_aot,
compile_fx_forward, compile_fx_backward and compile_fx, bound when their
`def` ran: torch.compile calls compile_fx without inner_compile, so setting
the module's attribute alone never reaches it. The backport sets the copy in
those four defaults too (torch_backports._patching.rebind_defaults), and
undoes them with the rest. No module imports compile_fx_inner by name at
module level (after_aot, debug and invoke_subgraph import it inside
functions, when they run, from the module's attribute).

Read from each release's torch/_inductor/compile_fx.py:

  release          compile_fx_inner   get_cpp_wrapper_config
  2.9.1            c19e4e30f924f5a9   d9548a7b8279bd36
  2.10.0           c19e4e30f924f5a9   d9548a7b8279bd36
  2.11.0           c19e4e30f924f5a9   d9548a7b8279bd36
  2.12.1           db3b8199c7b5e210   c8c553074b58b36c
  2.13.0           b7d89bad19799580   2700455049019395   (the fix)
  2.14.1           7650bbc7147fc961   2700455049019395
  2.15.0           3201c5fab14f7bbc   2c982f8ebc069d1d

2.9.0 and 2.12.0, read from their wheels (2026-12-06), have 2.9.1's and
2.12.1's compile_fx.py byte for byte. 2.14.1 and 2.15.0 keep both
edits as 2.13.0 has them (2.15 adds a host-side TMA warning to
compile_fx_inner and a CPU Triton backend to the autotune default of
get_cpp_wrapper_config, neither part of this fix).

CPU_CHECK failed on stock 2.9.1, 2.10.0, 2.11.0 and 2.12.1 with the
symptom, and passed with the backport on each; it passed on stock 2.13.0
(2026-12-06). With edit 1 calling get_cpp_wrapper_config(log_cudagraph_skip=
True), edit 2 left out in effect, it failed on 2.11.0 and 2.12.1 with
"compiling the backward logged the cudagraph skip 1 more time(s)".

This is a fix of GPU code whose cause runs on the CPU: the config a graph
compiles under. CPU_CHECK compiles a layer norm on the CPU with
options={"cpp_wrapper": True, "triton.cudagraphs": True}, records in a
post-grad custom pass the config each graph compiles under, and runs the
backward, which compiles lazily: it asserts that the backward compiles with
triton.store_cubin True, as the forward does (stock: False), which only
edit 1 sets, and that compiling the backward bumps the cudagraph skip
counter no further than the forward did: with triton.cudagraphs set in the
options, which compile_fx passes on to the lazy backward, edit 1 without
edit 2 logs the skip a second time, in the backward's compile.
So both edits are executed and checked on every claimed release, and the
backport is on by default. What store_cubin does on a GPU (the cubins in
CudaKernelParamCache) is REPRODUCER's part: the issue's program on CUDA.

changes_codegen is False. The backport changes the config under which a
lazily compiled cpp_wrapper backward compiles (triton.store_cubin,
autotune_at_compile_time, autotune_cublasLt, cudagraphs) to the config stock
torch already compiles it under when the backward is compiled inside
compile_fx, or when cpp_wrapper is set globally: no code is generated that
stock would not generate for that graph under that config. Inductor's FX
graph cache key holds the config (triton.store_cubin and the others are not
among config._cache_config_ignore_prefix), so the backward compiled under
the corrected config keys differently from the same graph compiled under
stock's: no FX graph stock cached under the wrong config is served by its
key to a patched process, nor the converse, without a key naming the
backport. On CUDA, stock never stores the backward this fixes: it fails in
codegen before the cache is written. What stock does store for such a lazy
backward compiled without error (one with no Triton kernel, or a CPU graph,
where these four settings do not change the C++ code) is valid code for it,
which an AOTAutograd cache entry may still hand to a patched process, as it
would to stock. A key naming the backport would only keep every cpp_wrapper
graph stock cached from a patched process.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "cpp-wrapper-lazy-backward"

COMPILE_FX_INNER = (
    {"c19e4e30f924f5a9": "2.9.1, 2.10.0, 2.11.0", "db3b8199c7b5e210": "2.12.1"},
    {"b7d89bad19799580": "2.13.0", "7650bbc7147fc961": "2.14.1", "3201c5fab14f7bbc": "2.15.0"},
)
GET_CPP_WRAPPER_CONFIG = (
    {"d9548a7b8279bd36": "2.9.1, 2.10.0, 2.11.0", "c8c553074b58b36c": "2.12.1"},
    {"2700455049019395": "2.13.0, 2.14.1", "2c982f8ebc069d1d": "2.15.0"},
)

# pytorch/pytorch#178847, in the dedented source of each function.
COMPILE_FX_INNER_EDITS = [(
    "    with contextlib.ExitStack() as stack:\n",
    "    with contextlib.ExitStack() as stack:\n"
    "        # When cpp_wrapper is enabled, ensure the required triton config\n"
    "        # (store_cubin, autotune_at_compile_time, etc.) is applied. This is\n"
    "        # needed because lazy backward compilation may run after the\n"
    "        # config.patch context from compile_fx has already exited.\n"
    "        # Suppress cudagraph skip logging here; compile_fx already logged it.\n"
    "        if kwargs[\"cpp_wrapper\"]:\n"
    "            stack.enter_context(\n"
    "                config.patch(get_cpp_wrapper_config(log_cudagraph_skip=False))\n"
    "            )\n",
)]
GET_CPP_WRAPPER_CONFIG_EDITS = [
    ("def get_cpp_wrapper_config() -> dict[str, object]:",
     "def get_cpp_wrapper_config(log_cudagraph_skip: bool = True) -> dict[str, object]:"),
    # 2.9 - 2.11: `if config.triton.cudagraphs:`; 2.12: `... and config.graph_partition:`
    ("    if config.triton.cudagraphs", "    if log_cudagraph_skip and config.triton.cudagraphs"),
]

# The functions whose `inner_compile` defaults to compile_fx_inner.
DEFAULT_HOLDERS = ("compile_fx_aot", "compile_fx_forward", "compile_fx_backward", "compile_fx")


def apply(compile_fx: ModuleType, release: Release) -> Revert:
    """Replace compile_fx_inner and get_cpp_wrapper_config by the installed
    ones with #178847's edits, in the module and in the four inner_compile
    defaults that hold compile_fx_inner; return the undo."""
    inner, where = _patching.own_attribute(compile_fx, "compile_fx_inner")
    cpp_config, _ = _patching.own_attribute(compile_fx, "get_cpp_wrapper_config")
    holders = []
    for name in DEFAULT_HOLDERS:
        holder, _ = _patching.own_attribute(compile_fx, name)
        defaults = list(getattr(holder, "__defaults__", None) or ()) + list(
            (getattr(holder, "__kwdefaults__", None) or {}).values())
        if not any(value is inner for value in defaults):
            raise _patching.Unrecognised("%s.%s has no default %s"
                                         % (compile_fx.__name__, name, where))
        holders.append(holder)
    # Everything checked and compiled before anything is set.
    new_inner = _patching.rewritten(inner, COMPILE_FX_INNER_EDITS, *COMPILE_FX_INNER)
    new_config = _patching.rewritten(cpp_config, GET_CPP_WRAPPER_CONFIG_EDITS,
                                     *GET_CPP_WRAPPER_CONFIG)
    new_config.__defaults__ = (True,)  # log_cudagraph_skip; the original has no defaults
    with _patching.all_or_nothing() as reverts:  # defaults are outside the snapshot
        reverts.append(_patching.replace_attribute(compile_fx, "get_cpp_wrapper_config",
                                                   new_config, *GET_CPP_WRAPPER_CONFIG))
        reverts.append(_patching.replace_attribute(compile_fx, "compile_fx_inner", new_inner,
                                                   *COMPILE_FX_INNER))
        reverts.append(_patching.rebind_defaults(holders, inner, new_inner))
    return _patching.undo_all(reverts)


# The program.
REPRODUCER = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
import torch

if not torch.cuda.is_available():
    print("skipped: needs a CUDA GPU")
    sys.exit(77)


def func(x, output_grad):
    layer_norm = torch.nn.LayerNorm(normalized_shape=4).cuda()
    output = layer_norm(x)
    output.backward(output_grad)
    return output


torch.manual_seed(0)
x = torch.randn(2, 3, 4, device="cuda")
output_grad = torch.randn(2, 3, 4, device="cuda")
want = func(x, output_grad)
got = torch.compile(options={"cpp_wrapper": True})(func)(x, output_grad)
torch.testing.assert_close(got, want)
"""

# On the CPU: the config each graph compiles under (see the docstring).
# Internal APIs, as a test.
CPU_CHECK = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch
from torch._dynamo.utils import counters
from torch._inductor import config, cpp_builder

try:
    cpp_builder.get_cpp_compiler()
except Exception as exc:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % exc)
    sys.exit(77)


class Stop(Exception):
    "Raised by the pass once it has recorded the backward's config."


seen = {}


def record(graph):
    backward = any(node.op == "placeholder" and node.name.startswith("tangents")
                   for node in graph.nodes)
    seen["backward" if backward else "forward"] = (config.cpp_wrapper, config.triton.store_cubin)
    if backward:
        raise Stop("recorded the backward's config")


config.post_grad_custom_post_pass = record


def fn(x, weight):
    return torch.nn.functional.layer_norm(x, (4,), weight).sin()


x = torch.randn(2, 3, 4)
weight = torch.randn(4, requires_grad=True)
compiled = torch.compile(fn, options={"cpp_wrapper": True, "triton.cudagraphs": True})
out = compiled(x, weight)
if "backward" in seen:
    print("skipped: the backward compiled with the forward, not lazily")
    sys.exit(77)
skips = counters["inductor"]["cudagraph_skips"]
try:
    out.sum().backward()
except Exception as exc:
    if "recorded the backward's config" not in str(exc):
        raise
else:
    sys.exit("the pass did not see the backward: this check shows nothing")
print("(cpp_wrapper, triton.store_cubin): forward %s, lazily compiled backward %s"
      % (seen["forward"], seen["backward"]))
if seen["forward"] != (True, True):
    sys.exit("the forward did not compile with cpp_wrapper's config: this check shows nothing")
if seen["backward"] != (True, True):
    sys.exit("the lazily compiled backward has cpp_wrapper %s but triton.store_cubin %s"
             % seen["backward"])
more = counters["inductor"]["cudagraph_skips"] - skips
if more:
    sys.exit("compiling the backward logged the cudagraph skip %d more time(s)" % more)
"""

BACKPORT = Backport(
    name=NAME,
    summary="the lazily compiled backward of torch.compile(options={'cpp_wrapper': True}) "
    "compiles under cpp_wrapper's config (was, on CUDA: CudaKernelParamCache not populated)",
    headline="`CudaKernelParamCache not populated` at the first backward with `cpp_wrapper` (CUDA)",
    upstream=("https://github.com/pytorch/pytorch/pull/178847",
              "https://github.com/pytorch/pytorch/issues/178845"),
    first_affected=(2, 9, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="CudaKernelParamCache not populated",
    cpu_check=CPU_CHECK,
    cpu_check_symptom="but triton.store_cubin False",
    readme_symptom=(
        "**crash**: the first `.backward()` of `torch.compile(fn, options={\"cpp_wrapper\": "
        "True})` on CUDA fails: `AssertionError: CudaKernelParamCache not populated for "
        "triton_...` (the backward compiles lazily, after `compile_fx` left cpp_wrapper's "
        "config, with `triton.store_cubin` False)"
    ),
    readme_fix=(
        "2.13's fix ([#178847](https://github.com/pytorch/pytorch/pull/178847)): "
        "`compile_fx_inner` enters `get_cpp_wrapper_config(log_cudagraph_skip=False)` when "
        "its `cpp_wrapper` is set, and `get_cpp_wrapper_config` gains that parameter so the "
        "cudagraph skip is logged once, as before. Set in the module and in the four "
        "`inner_compile=compile_fx_inner` defaults. Checked on the CPU (the config the lazy "
        "backward compiles under, and the skip counter); the config is in the FX graph "
        "cache key, so no cache key needs to change."
    ),
)
