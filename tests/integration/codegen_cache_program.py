"""Compile one case of a code-changing backport with the inductor cache dir
of argv[1]; print whether the compiled result matches eager, and the cache
counters, as JSON (for test_codegen_cache.py). argv[2] names the case."""

import json
import os
import sys

os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[1]
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402


def mul_zero(t):  # inductor-mul-zero-nan: stock folds x * 0 to 0, losing nan/inf
    return t * 0 + 1


def put_then_flip(t):  # inductor-fused-mutation-read-alias
    t.index_put_((torch.arange(t.size(0)),), t * 2.0)
    t.add_(t.flip(0))
    return t


def copy_then_add(dst, src):  # inductor-noop-copy-of-mutated-input
    dst[0:, :] = src[0:, :]
    src.add_(1)
    return dst


def shift_by_one(t):  # inductor-reinplace-scatter-self-overlap
    t[1:] = t[:-1].clone()
    return t


def base_and_view(t):  # aot-noop-view-output-alias: stock returns one object twice
    base = t + 1
    return base, base.view(-1)


def same_as_eager(got, want):
    if isinstance(want, tuple):  # a base and its view: two objects, as eager gives
        return got[0] is not got[1] and all(same_as_eager(g, w) for g, w in zip(got, want))
    return bool(torch.equal(got.isnan(), want.isnan())
                and torch.equal(got.nan_to_num(), want.nan_to_num()))


CASES = {
    "inductor-mul-zero-nan": (mul_zero, torch.tensor([float("nan"), float("inf"), 2.0])),
    "inductor-fused-mutation-read-alias": (put_then_flip, torch.arange(32.0).reshape(4, 8)),
    "inductor-noop-copy-of-mutated-input": (copy_then_add,
                                            (torch.zeros(3, 4), torch.arange(12.0).view(3, 4))),
    # (32, 16): 480 of 512 elements wrong on stock 2.13.0; the arange(8)
    # came out right on an AVX-512 CPU.
    "inductor-reinplace-scatter-self-overlap": (shift_by_one, torch.arange(512.0).reshape(32, 16)),
    "aot-noop-view-output-alias": (base_and_view, torch.zeros(1)),
}

f, x = CASES[sys.argv[2]]
args = x if isinstance(x, tuple) else (x,)
want = f(*[a.clone() for a in args])
got = torch.compile(f, backend="inductor", fullgraph=True)(*[a.clone() for a in args])
print(json.dumps({
    "matches_eager": same_as_eager(got, want),
    "fx": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")},
    "aot": {k: v for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache")},
}))
