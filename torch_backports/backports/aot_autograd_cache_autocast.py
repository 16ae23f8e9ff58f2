"""A compiled function with a torch.autocast (or torch.inference_mode) region
inside it is cached by AOTAutogradCache again, keyed by the ambient autocast
state, so a second process hits the cache.

Upstream:
  https://github.com/pytorch/pytorch/issues/191106  the report
  https://github.com/pytorch/pytorch/pull/192555    allow _enter_autocast/_exit_autocast (2.14.0)
  https://github.com/pytorch/pytorch/pull/191363    the same + _enter/_exit_inference_mode (2.15.0)
  https://github.com/pytorch/pytorch/pull/191110    key the ambient autocast (enabled, dtype)
                                                    of every device (2.15.0)
  https://github.com/pytorch/pytorch/pull/181564    key the dtype of enabled autocast (2.13.0)

Dynamo traces a `with torch.autocast(...)` inside a compiled region into
call_function nodes torch.amp.autocast_mode._enter_autocast/_exit_autocast.
check_node_safe accepts a private torch function only if it is in its
SAFE_TORCH_FUNCTIONS or in dynamo's trace_rules.torch_non_c_binding_in_graph_functions.
Up to 2.11 the two autocast functions were in that trace-rules list, and 2.12
dropped them from it. Since 2.12 every graph with an in-graph autocast
therefore bypasses AOTAutogradCache, in every process, however warm the cache:
  counters["aot_autograd"]["autograd_cache_bypass"], and at INFO
  Bypassing autograd cache due to: Unsupported call_function target
  <function _enter_autocast at 0x...>. Function module: torch.amp.autocast_mode,
(with functorch config strict_autograd_cache it raises that message). A bypass
is never cached, unlike a miss, so the joint trace and partitioning run again
in every process. 2.13 also moved _enter/_exit_inference_mode out of that list
(into manual_torch_name_rule_map), and graphs with an in-graph
torch.inference_mode bypass the same way on 2.13 and 2.14.

Read from each release's torch/_functorch/_aot_autograd/autograd_cache.py and
torch/_dynamo/trace_rules.py:

  release    check_node_safe   in-graph autocast     in-graph inference_mode
  2.11.0     59dcd598a9d20938  cached (trace rules)  cached (trace rules)
  2.12.0/.1  5b3abbbb4b299652  bypass                cached (trace rules)
  2.13.0     fc35c512dc0c5577  bypass                bypass
  2.14.1     68758feb29381c53  cached (#192555)      bypass
  2.15.0     20ee409245841a57  cached (#191363)      cached (#191363)

  release    AOTAutogradCacheDetails method      autocast in the key
  2.11.0     __init__ 886990cc74bef9c2           disable_amp: whether any is enabled
  2.12.0/.1  __init__ 886990cc74bef9c2           disable_amp: whether any is enabled
  2.13.0     _record_runtime_state 778511fb6a5c61e0  dtype of the enabled devices (#181564)
  2.14.1     _record_runtime_state 778511fb6a5c61e0  dtype of the enabled devices
  2.15.0     _record_runtime_state 67127b47be3c1ac8  (enabled, dtype) of every device (#191110)

The key matters once these graphs are cached: an in-graph autocast with
dtype=None (`with torch.autocast("cpu"):`) traces as
_enter_autocast("cpu", None, True, None) and takes the ambient autocast dtype
(torch.set_autocast_dtype), and the ops around the region take the autocast
state the compiled function is called under. On 2.12 the key holds only
disable_amp, whether any autocast is enabled. Then a function compiled under
an outer float16 autocast and the same function under bfloat16 share a key, and
the bfloat16 process would load float16 code. 2.13/2.14 key the dtype of
enabled devices only, which misses the dtype=None case (#191110).

The patch, after checking both functions' fingerprints (nothing changes
unless both are verified code):
  - check_node_safe: recompiled from the installed function's own source
    (_patching.rewritten) with 2.15's four entries added to
    SAFE_TORCH_FUNCTIONS: _enter_autocast, _exit_autocast (#192555/#191363),
    _enter_inference_mode, _exit_inference_mode (#191363). On 2.12 the
    inference-mode pair is already accepted through trace rules, so adding it
    changes nothing there.
  - the key: 2.15's autocast_state, {device: (is_autocast_enabled,
    get_autocast_dtype) for every autocast-supported device} (#191110), set on
    AOTAutogradCacheDetails, whose __dict__ is pickled into the key. On 2.13 it
    replaces the enabled-only autocast_state in _record_runtime_state. On 2.12
    it replaces disable_amp in __init__, as 2.13 (#181564) and 2.15 do: the
    new state holds every device's enabled flag. The key of every graph changes
    once, so entries written by stock torch are missed once (as on an upgrade).
A torch whose check_node_safe already has the fix (2.14.1, 2.15.0, or a
vendor cherry-pick of #192555) is left as it is, like upstream 2.14, which
kept the 2.13 key. If only the key function is already 2.15's, check_node_safe
alone is patched.

Not carried:
  - #191409 (torch._refs.tensor in SAFE_TORCH_FUNCTIONS, 2.15): a different
    allowlist gap (torch.tensor of a data-dependent scalar), not caused by
    2.12's trace-rules change.
  - what #191110's review reports one layer up: within one process, dynamo
    does not recompile when torch.set_autocast_dtype changes (its global-state
    guard, in C++). That is no part of the AOTAutograd key or of 2.15's
    autograd_cache.py, and is not touched here.
  - on 2.14 nothing is patched, so the inference_mode bypass and the
    dtype=None key hole remain there, as upstream shipped it (both fixed in 2.15).
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "aot-autograd-cache-autocast"

VERIFIED = {
    "5b3abbbb4b299652": "2.12.0 - 2.12.1",
    "fc35c512dc0c5577": "2.13.0",
}
FIXED = {
    "68758feb29381c53": "2.14.1",
    "20ee409245841a57": "2.15.0",
}
# AOTAutogradCacheDetails.__init__ of 2.12, _record_runtime_state of 2.13.
KEY_VERIFIED = {
    "886990cc74bef9c2": "2.12.0 - 2.12.1",
    "778511fb6a5c61e0": "2.13.0",
}
KEY_FIXED = {"67127b47be3c1ac8": "2.15.0"}

# pytorch/pytorch#192555 + #191363, in the source of check_node_safe (a
# module-level function, so not dedented).
CHECK_EDITS = [
    (
        '        "torch.distributed.tensor._api.from_local",\n'
        "    )\n",
        '        "torch.distributed.tensor._api.from_local",\n'
        "        # Autocast/inference_mode regions inside a compiled function trace these\n"
        "        # _enter_*/_exit_* nodes into the graph. Their args are hashed into the\n"
        "        # cache key; autocast's dtype=None resolves to the ambient autocast\n"
        "        # dtype, which the key also holds. torch-backports carries this from\n"
        "        # pytorch#191363 (#191106).\n"
        '        "torch.amp.autocast_mode._enter_autocast",\n'
        '        "torch.amp.autocast_mode._exit_autocast",\n'
        '        "torch.autograd.grad_mode._enter_inference_mode",\n'
        '        "torch.autograd.grad_mode._exit_inference_mode",\n'
        "    )\n",
    ),
]

# pytorch/pytorch#191110 as in 2.15.0's _record_runtime_state, indented for
# a dedented method body.
_AUTOCAST_STATE = (
    "    # Per-device autocast state (enabled, dtype) in the cache key, so that a\n"
    "    # graph compiled under one autocast dtype is never loaded under another;\n"
    "    # the dtype even where autocast is disabled, because an in-graph\n"
    "    # torch.autocast(device) with no dtype takes the ambient one.\n"
    "    # torch-backports carries this from pytorch#191110.\n"
    "    self.autocast_state: dict[str, tuple[bool, torch.dtype]] = {\n"
    "        device_type: (\n"
    "            torch.is_autocast_enabled(device_type),\n"
    "            torch.get_autocast_dtype(device_type),\n"
    "        )\n"
    "        for device_type in torch._C._autocast_supported_devices()\n"
    "    }\n"
)

# 2.12: AOTAutogradCacheDetails.__init__ keys only whether any autocast is on.
INIT_EDITS = [
    ("    self.disable_amp = torch._C._is_any_autocast_enabled()\n", _AUTOCAST_STATE),
]

# 2.13: _record_runtime_state keys the dtype of the enabled devices only.
RECORD_EDITS = [
    (
        "    # Include per-device autocast dtype in cache key to avoid reusing\n"
        "    # a graph compiled for one autocast dtype (e.g. bfloat16) when\n"
        "    # running under a different autocast dtype (e.g. float16).\n"
        "    self.autocast_state: dict[str, torch.dtype] = {}\n"
        "    for device_type in torch._C._autocast_supported_devices():\n"
        "        if torch.is_autocast_enabled(device_type):\n"
        "            self.autocast_state[device_type] = torch.get_autocast_dtype(device_type)\n",
        _AUTOCAST_STATE,
    ),
]


def apply(autograd_cache: ModuleType, release: Release) -> Revert:
    """Accept the autocast and inference-mode enter/exit nodes in
    check_node_safe and key the ambient autocast state; return the undo."""
    from .. import _fingerprint

    check = vars(autograd_cache).get("check_node_safe")
    details = vars(autograd_cache).get("AOTAutogradCacheDetails")
    if check is None or not isinstance(details, type):
        raise _patching.Unrecognised("autograd_cache has no check_node_safe or "
                                     "AOTAutogradCacheDetails")
    # Both are built (and so checked) before either is installed.
    new_check = _patching.rewritten(check, CHECK_EDITS, VERIFIED, FIXED)
    if "_record_runtime_state" in vars(details):
        key_name, key_edits = "_record_runtime_state", RECORD_EDITS
    else:
        key_name, key_edits = "__init__", INIT_EDITS
    key_function = vars(details)[key_name]
    try:
        key_done = _fingerprint.of_function(key_function) in KEY_FIXED
    except (OSError, TypeError) as exc:
        raise _patching.Unrecognised("AOTAutogradCacheDetails.%s: its source cannot be read (%s)"
                                     % (key_name, exc)) from None
    new_key = None
    if not key_done:
        new_key = _patching.rewritten(key_function, key_edits, KEY_VERIFIED, KEY_FIXED)

    reverts = []
    if new_key is not None:
        reverts.append(_patching.replace_attribute(details, key_name, new_key, KEY_VERIFIED,
                                                   KEY_FIXED))
    reverts.append(_patching.replace_attribute(autograd_cache, "check_node_safe", new_check,
                                               VERIFIED, FIXED))

    return _patching.undo_all(reverts)


# Two fresh processes share one cache dir. The first compiles the function
# with an in-graph bfloat16 autocast, then variants that must not be served
# that entry (or each other's): an in-graph float16 region, the same function
# under an outer float16 and then bfloat16 autocast, and an in-graph autocast
# without dtype under ambient dtypes float16 and then bfloat16. Each must miss
# and match eager in dtype and value. The second process must hit the bfloat16
# entry (stock 2.12/2.13: autograd_cache_bypass) and an inference_mode one.
# 2.14 ships #192555 but not #191110 or #191363 (2.15), so there the
# dtype=None and inference_mode parts are left out.
REPRODUCER = r'''
import os, subprocess, sys, tempfile
CHILD = r"""
import contextlib, logging, sys, torch
from torch._dynamo.utils import counters
reasons = []
class Keep(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if message.startswith("Bypassing autograd cache"):
            reasons.append(" ".join(message.split()))
        elif record.levelno >= logging.WARNING:
            sys.stderr.write(message + "\n")
log = logging.getLogger("torch._functorch._aot_autograd.autograd_cache")
log.setLevel(logging.INFO)
log.propagate = False
log.addHandler(Keep())
FULL = sys.argv[2] == "1"
torch.manual_seed(0)
X, W, W2 = torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8)

def make(dtype):  # one code; the region's dtype is a constant of the graph
    def f(x, w, w2):
        with torch.autocast("cpu", dtype=dtype):
            y = torch.mm(x, w)
        return y, torch.mm(y.float(), w2)
    return f

def infer(x, w, w2):
    with torch.inference_mode():
        y = torch.mm(x, w)
    return (y.relu(),)

def run(what, fn, ambient=None):
    torch._dynamo.reset()
    counters.clear()
    del reasons[:]
    with torch.autocast("cpu", dtype=ambient) if ambient else contextlib.nullcontext():
        expected = fn(X, W, W2)
        got = torch.compile(fn, backend="inductor")(X, W, W2)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype, "%s: compiled output is %s, eager %s" % (what, g.dtype, e.dtype)
        torch.testing.assert_close(g, e, atol=2e-2, rtol=2e-2)
    aot = counters["aot_autograd"]
    return aot["autograd_cache_hit"], "autograd_cache_bypass=%d %s" % (
        aot["autograd_cache_bypass"], reasons[0] if reasons else "")

if sys.argv[1] == "first":
    run("bfloat16 region", make(torch.bfloat16))
    variants = [
        ("float16 region", make(torch.float16), None),
        ("bfloat16 region under outer float16 autocast", make(torch.bfloat16), torch.float16),
        ("bfloat16 region under outer bfloat16 autocast", make(torch.bfloat16), torch.bfloat16)]
    for what, fn, ambient in variants:
        hit, _ = run(what, fn, ambient)
        assert not hit, "%s was served another autocast state's AOTAutograd cache entry" % what
    if FULL:
        torch.set_autocast_dtype("cpu", torch.float16)
        run("autocast region without dtype, ambient float16", make(None))
        torch.set_autocast_dtype("cpu", torch.bfloat16)
        hit, _ = run("autocast region without dtype, ambient bfloat16", make(None))
        assert not hit, "autocast without dtype under bfloat16 was served the float16 entry"
        run("inference_mode region", infer)
else:
    hit, why = run("bfloat16 region again", make(torch.bfloat16))
    assert hit, "AOTAutograd cache not hit by a graph with torch.autocast: " + why
    if FULL:
        hit, why = run("inference_mode region again", infer)
        assert hit, "AOTAutograd cache not hit by a graph with torch.inference_mode: " + why
"""
import torch
from torch._inductor import cpp_builder

try:  # inductor's own lookup, which honours CXX, as the compile will
    cpp_builder.get_cpp_compiler()
except Exception as exc:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % exc)
    sys.exit(77)
full = "0" if torch.__version__.startswith("2.14.") else "1"
with tempfile.TemporaryDirectory() as cache:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="1",
               TORCHINDUCTOR_AUTOGRAD_CACHE="1")
    env.pop("TORCHINDUCTOR_FORCE_DISABLE_CACHES", None)
    for which in ("first", "second"):
        run = subprocess.run([sys.executable, "-c", CHILD, which, full], env=env,
                             capture_output=True, text=True, timeout=600)
        sys.stdout.write(run.stdout)
        sys.stderr.write(run.stderr)
        if run.returncode:
            sys.exit(run.returncode)
'''

BACKPORT = Backport(
    name=NAME,
    summary="a compiled function with torch.autocast (or torch.inference_mode) inside is "
    "cached by AOTAutogradCache again instead of bypassing it in every process, keyed by the "
    "ambient autocast state (enabled, dtype) of every device",
    headline="graphs with an in-graph `torch.autocast` bypass the AOTAutograd cache",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/192555",
        "https://github.com/pytorch/pytorch/issues/191106",
        "https://github.com/pytorch/pytorch/pull/191363",
        "https://github.com/pytorch/pytorch/pull/191110",
    ),
    first_affected=(2, 12, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="autograd_cache_bypass",
    readme_symptom=(
        "every graph with an in-graph `torch.autocast` (or `inference_mode`) bypasses the "
        "AOTAutograd cache in every process (a 2.12 regression)"
    ),
    readme_fix=(
        "`check_node_safe` accepts the autocast and inference-mode enter/exit functions, "
        "as 2.15 does, and the cache key holds every device's ambient autocast state "
        "(enabled, dtype), as 2.15's [pytorch#191110] does, so a float16 region never "
        "loads a bfloat16 entry. The key changes once, so entries stock torch wrote miss "
        "once. Not carried: [pytorch#191409] (another allowlist gap)."
    ),
)
