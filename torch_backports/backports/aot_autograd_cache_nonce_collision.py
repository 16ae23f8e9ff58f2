"""AOTAutogradCache's fallback key for a graph it cannot key is a real nonce
(a UUID), so two such graphs no longer share a key and the second no longer
runs the first one's compiled code.

Upstream:
  https://github.com/pytorch/pytorch/issues/191323   the bug (seeded ranks)
  https://github.com/pytorch/pytorch/pull/191427     the fix: uuid.uuid4().hex
  https://github.com/pytorch/pytorch/pull/194451     the same fallback, seen
                                                     from Dynamo's RNG save/restore

A stale cache hit, a silent wrong result, on the CPU and on CUDA:

  >>> @torch._dynamo.allow_in_graph          # a target AOTAutogradCache cannot key
  ... def double(x): return x * 2
  >>> @torch._dynamo.allow_in_graph
  ... def triple(x): return x * 3
  >>> random.seed(0); cf = torch.compile(lambda x: double(x) + 1, fullgraph=True).aot_compile(((x,), {}))
  >>> random.seed(0); cg = torch.compile(lambda x: triple(x) + 1, fullgraph=True).aot_compile(((x,), {}))
  >>> cg(torch.arange(4.0))                  # stock 2.10 - 2.14: double's graph
  tensor([1., 3., 5., 7.])                   # triple's is [1, 4, 7, 10]

The AOT precompile paths (torch.compile(...).aot_compile, and the
serializable path of aot_autograd) set
torch._functorch.config.bypass_autograd_cache_key (2.10: they require
torch._dynamo.config.enable_aot_compile, which the fallback checks), and
autograd_cache_key then answers a graph it cannot key (an allow_in_graph
function, some higher-order ops, ...) with a "nonce" instead of raising.
That nonce was str(random.random()), drawn from the application's Python
RNG: after the same random.seed -- every distributed rank seeds alike -- and
on Dynamo's frame path, which saves and restores the Python RNG state around
each frame it compiles, two graphs get the same key. The compiled graph is
saved to AOTAutogradCache under that key (force_autograd_cache), so the
second graph finds the first one's entry and runs its code; across ranks, a
rank loads another rank's device-pinned artifact.

2.15.0 returns uuid.uuid4().hex instead (with a comment), independent of the
application's RNG and unique across processes; that line is the whole of
#191427's change to torch (its other hunk is a test). The module in the
affected releases does not import uuid, so the backport makes the one edit
`return str(random.random()), []` -> `return __import__("uuid").uuid4().hex, []`
in the installed function (torch_backports._patching.rewritten), the same
value as 2.15.0's `uuid.uuid4().hex`, without adding a name to torch's
module. 2.15.0's comment and its dropping of the then unused `import random`
are not carried (nothing else changes).

Read from each release's torch/_functorch/_aot_autograd/autograd_cache.py:

  release          autograd_cache_key
  2.9.1            9601c60ac5aa0e1a   no fallback (raises; not affected)
  2.10.0           5aa089d8dd537ad3   fallback under dynamo's enable_aot_compile
  2.11.0           c7239252b60f86b3   fallback under bypass_autograd_cache_key
  2.12.0, 2.12.1   100497a36a503358   the same, in a nested try
  2.13.0           84310e109dca57b2   the same
  2.14.0, 2.14.1   54bbe056335f53be   the same
  2.15.0           b7987b92a4534885   uuid.uuid4().hex (the fix)

The reproducer failed on stock 2.10.0, 2.11.0, 2.12.0, 2.13.0 and 2.14.1
(the second function returned the first one's result) and passed with the
patch on each; it passes on stock 2.15.0 (torch-backports verify and a
direct run, 2026-12-06). With aot-autograd-cache-autocast (same module,
other functions) both apply on 2.13.0.

Releases before 2.10 have no fallback (an unkeyable graph bypasses the
cache) and are not affected. Releases whose wheels were not read (2.11.1,
...) are patched only where the function has a fingerprint above.

References: 2.10 and 2.11's torch._functorch.aot_autograd re-export the
function (`from ._aot_autograd.autograd_cache import autograd_cache_key`,
unused in torch itself); that module imports this one, so its name is bound
after the patch, to the fixed function, and the undo puts the original back
there too. Every call inside torch goes through the module's global.

Keys are not codegen: the fixed function compiles the same graphs; only the
nonce differs, and nonce entries are never found again by a later process.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "aot-autograd-cache-nonce-collision"

VERIFIED = {
    "5aa089d8dd537ad3": "2.10.0",
    "c7239252b60f86b3": "2.11.0",
    "100497a36a503358": "2.12.0, 2.12.1",
    "84310e109dca57b2": "2.13.0",
    "54bbe056335f53be": "2.14.0, 2.14.1",
}
FIXED = {"b7987b92a4534885": "2.15.0"}

# 2.15.0's change, in the dedented source of autograd_cache_key, where each
# claimed release has this line once. The module does not import uuid.
EDITS = [
    ("return str(random.random()), []", 'return __import__("uuid").uuid4().hex, []'),
]

_REEXPORT = "torch._functorch.aot_autograd"


def apply(autograd_cache: ModuleType, release: Release) -> Revert:
    """Replace autograd_cache.autograd_cache_key by the installed one with a
    UUID fallback nonce; return the undo."""
    original, _ = _patching.own_attribute(autograd_cache, "autograd_cache_key")
    fixed = _patching.rewritten(original, EDITS, VERIFIED, FIXED)
    undo = _patching.replace_attribute(autograd_cache, "autograd_cache_key", fixed,
                                       VERIFIED, FIXED)
    # Normally aot_autograd is still importing this module, and binds its
    # re-export afterwards; should it have bound the original already, fix it.
    return _patching.undo_all([undo, _patching.rebind((_REEXPORT,), "autograd_cache_key",
                                                      original, fixed)])


# Two functions whose graphs AOTAutogradCache cannot key (an allow_in_graph
# call), each precompiled with torch.compile(...).aot_compile after the same
# random.seed, as every rank does: on stock torch both get the same fallback
# key and the second runs the first one's compiled code.
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
import random

torch._dynamo.config.enable_aot_compile = True  # default from 2.12

@torch._dynamo.allow_in_graph
def double(x):
    return x * 2

@torch._dynamo.allow_in_graph
def triple(x):
    return x * 3

def f(x):
    return double(x) + 1

def g(x):
    return triple(x) + 1

x = torch.arange(4.0)
random.seed(0)
cf = torch.compile(f, backend="inductor", fullgraph=True).aot_compile(((x,), {}))
random.seed(0)
cg = torch.compile(g, backend="inductor", fullgraph=True).aot_compile(((x,), {}))
for name, fn, compiled in (("f", f, cf), ("g", g, cg)):
    got, want = compiled(x), fn(x)
    if not torch.equal(got, want):
        raise AssertionError("aot_compile'd %s returned %s, eager %s: a stale AOTAutogradCache "
                             "hit on the fallback key" % (name, got.tolist(), want.tolist()))
"""

BACKPORT = Backport(
    name=NAME,
    summary="AOTAutogradCache's fallback key for a graph it cannot key under AOT precompile "
    "is a UUID, not random.random(), so two graphs no longer share it (stale cache hit, "
    "wrong result)",
    headline="**stale cache hit** under AOT precompile: two graphs share one fallback key",
    upstream=("https://github.com/pytorch/pytorch/issues/191323",
              "https://github.com/pytorch/pytorch/pull/191427",
              "https://github.com/pytorch/pytorch/pull/194451"),
    first_affected=(2, 10, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="stale AOTAutogradCache hit on the fallback key",
    readme_symptom=(
        "**stale cache hit**: under AOT precompile (`torch.compile(f).aot_compile(…)`, "
        "and the precompile path), two graphs AOTAutogradCache cannot key get the same "
        "fallback key after the same `random.seed` (every rank seeds alike; dynamo "
        "restores the RNG around frames), so the second runs the first one's code"
    ),
    readme_fix=(
        "[pytorch#191427]'s one line: the fallback key of `autograd_cache_key` is "
        '`uuid.uuid4().hex`, not `str(random.random())` (written `__import__("uuid")`, '
        "since the module does not import uuid). Also set on the 2.10 – 2.11 re-export in "
        "`torch._functorch.aot_autograd`. Not carried: 2.15's comment."
    ),
)
