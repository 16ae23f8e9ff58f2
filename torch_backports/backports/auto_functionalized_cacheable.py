"""Graphs with a mutating custom op are saved in the FX graph cache again.

Upstream:
  https://github.com/pytorch/pytorch/pull/151194   the fix (in 2.8.0)
  https://github.com/pytorch/pytorch/pull/153304   its cherry-pick (in 2.7.1)
  https://github.com/pytorch/pytorch/issues/151188 the report ("the reason that
                                                   sglang had torch.compile caching issues")
  https://github.com/pytorch/pytorch/pull/135877   2.6.0: HOPs bypass unless cacheable()

A custom op that mutates its inputs (torch.library.custom_op(...,
mutates_args=...)) reaches inductor wrapped in the higher-order operator
auto_functionalized_v2 (auto_functionalized when
inductor.config.enable_auto_functionalized_v2 is off). Inductor's FX graph
cache refuses every HigherOrderOperator whose cacheable() is False:
BypassFxGraphCache("Can't cache HigherOrderOperator: auto_functionalized_v2"),
counted in counters["inductor"]["fxgraph_cache_bypass"] and logged at INFO as
"Bypassing FX Graph Cache because '...'". So on 2.6.x and 2.7.0 every graph
holding such an op is compiled afresh in every process (the AOTAutograd cache,
which needs the FX graph cache entry, misses with it). No error, only time.

  release          AutoFunctionalized(V2).__init__       HigherOrderOperator.cacheable
  2.6.0, 2.7.0     8f6a776815680823 / 97c9f3705b8d9e3e    cf2538b4ee01ba7c  return self._cacheable
  2.7.1            7cf3dc3d9b2a65ed / c277073908d4e80c    cf2538b4ee01ba7c
  2.8.0 - 2.15.0   7cf3dc3d9b2a65ed / c277073908d4e80c    78128a53eb166901  self._cacheable or the
                     (cacheable=True)                       name in unsafe_marked_cacheable_functions

The fix is one keyword in each constructor: super().__init__(name,
cacheable=True). Both constructors run once, at import, for the module-level
instances auto_functionalized and auto_functionalized_v2, so this patch sets
their _cacheable to True, the attribute HigherOrderOperator.__init__ stores
the keyword in and cacheable() returns on every covered release (SGLang's
monkey_patch_torch_compile() does the same for torch < 2.8). codecache needs
nothing: 2.6.0 (_check_can_cache) and 2.7.0 (_check_for_hop) already ask
node.target.cacheable(). 2.15 still passes cacheable=True and asks cacheable()
(FxGraphHashDetails.validate_graph).

The key stays op-specific: the graph is pickled into the key as its code,
which names the custom op (torch.ops.ns.op.default is the HOP's first
argument), and the cached kernel calls the op through the dispatcher at run
time, as for a custom op that does not mutate.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "auto-functionalized-cacheable"

# Per class: the constructor that passes no cacheable= (verified) and the one
# that passes cacheable=True (fixed).
VERIFIED = {
    "AutoFunctionalized": {"8f6a776815680823": "2.6.0 - 2.7.0"},
    "AutoFunctionalizedV2": {"97c9f3705b8d9e3e": "2.6.0 - 2.7.0"},
}
FIXED = {
    "AutoFunctionalized": {"7cf3dc3d9b2a65ed": "2.7.1 - 2.15.0"},
    "AutoFunctionalizedV2": {"c277073908d4e80c": "2.7.1 - 2.15.0"},
}
# HigherOrderOperator.cacheable, which must read _cacheable.
CACHEABLE = {"cf2538b4ee01ba7c": "2.6.0 - 2.7.1"}

INSTANCES = (("AutoFunctionalized", "auto_functionalized"),
             ("AutoFunctionalizedV2", "auto_functionalized_v2"))


def apply(module: ModuleType, release: Release) -> Revert:
    """Mark the two auto_functionalized HOP instances cacheable; return the undo."""
    import torch._ops

    instances = []
    for class_name, instance_name in INSTANCES:
        cls = getattr(module, class_name)
        _patching.check(vars(cls).get("__init__"), "%s.__init__" % class_name,
                        VERIFIED[class_name], FIXED[class_name])
        hop = getattr(module, instance_name)
        if type(hop) is not cls:
            raise _patching.Unrecognised("%s is a %s, not a %s"
                                         % (instance_name, type(hop).__name__, class_name))
        flag = vars(hop).get("_cacheable")
        if flag is True:  # set by someone else already (SGLang does, for torch < 2.8)
            raise _patching.CarriesFix("%s._cacheable is True already" % instance_name)
        if flag is not False:
            raise _patching.Unrecognised("%s._cacheable is %r, not False" % (instance_name, flag))
        instances.append(hop)
    # Checked after the constructors, so that a build carrying the fix is
    # reported as such (CarriesFix), whatever its cacheable() looks like.
    _patching.check(vars(torch._ops.HigherOrderOperator).get("cacheable"),
                    "torch._ops.HigherOrderOperator.cacheable", CACHEABLE, {})
    for hop in instances:
        hop._cacheable = True

    def revert() -> None:
        for hop in instances:
            hop._cacheable = False

    return revert


# Two processes compile the same graph with one inductor cache dir; the
# second must load it from the FX graph cache.
REPRODUCER = r"""
import json, os, shutil, subprocess, sys, tempfile

if not any(map(shutil.which, ("g++", "c++", "clang++"))):
    print("skipped: needs a C++ compiler for inductor's CPU backend")
    sys.exit(77)

CHILD = r'''
import json, logging
import torch
from torch._dynamo.utils import counters

reasons = []
class Bypasses(logging.Handler):
    def emit(self, record):
        if "Bypassing FX Graph Cache" in record.getMessage():
            reasons.append(record.getMessage())
log = logging.getLogger("torch._inductor.codecache")
log.addHandler(Bypasses(logging.INFO))
log.setLevel(logging.INFO)
log.propagate = False

@torch.library.custom_op("repro::add_one_", mutates_args=("x",))
def add_one_(x: torch.Tensor) -> None:
    x.add_(1)

def f(x):
    y = x.sin()
    add_one_(y)
    return y * 2

got = torch.compile(f, backend="inductor", fullgraph=True)(torch.arange(8.0))
print(json.dumps({"hit": counters["inductor"]["fxgraph_cache_hit"],
                  "bypass": counters["inductor"]["fxgraph_cache_bypass"],
                  "reasons": reasons, "result": got.tolist()}))
'''

with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="1",
               TORCHINDUCTOR_COMPILE_THREADS="1")
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                             stdout=subprocess.PIPE, universal_newlines=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
first, second = runs
assert first["result"] == second["result"], runs
assert second["hit"] >= 1, "second process missed the FX graph cache: %s" % (
    "; ".join(second["reasons"]) or second)
"""

BACKPORT = Backport(
    name=NAME,
    summary="graphs holding a custom op that mutates its inputs (auto_functionalized) "
    "are saved in and loaded from the FX graph cache instead of bypassing it",
    headline="graphs with a mutating custom op bypass the FX graph cache in every process",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/151194",
        "https://github.com/pytorch/pytorch/pull/153304",
        "https://github.com/pytorch/pytorch/issues/151188",
    ),
    first_affected=(2, 6, 0),
    first_fixed=(2, 7, 1),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Can't cache HigherOrderOperator: auto_functionalized",
    readme_symptom=(
        "every graph with a custom op that mutates its inputs bypasses the FX graph cache "
        '("Can\'t cache HigherOrderOperator: auto_functionalized"), so it recompiles in '
        "every process"
    ),
    readme_fix=(
        "marks the `auto_functionalized` and `auto_functionalized_v2` higher-order ops "
        "cacheable, as 2.7.1's constructors do; the cache key already holds the custom "
        "op's name."
    ),
)
