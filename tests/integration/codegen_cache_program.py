"""Compile x * 0 + 1 with the inductor cache dir of argv[1]; print the
result and the cache counters as JSON (for test_codegen_cache.py)."""

import json
import os
import sys

os.environ["TORCHINDUCTOR_CACHE_DIR"] = sys.argv[1]
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

x = torch.tensor([float("nan"), float("inf"), 2.0])
got = torch.compile(lambda t: t * 0 + 1, backend="inductor", fullgraph=True)(x)
print(json.dumps({
    "result": [repr(v) for v in got.tolist()],
    "fx": {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")},
    "aot": {k: v for k, v in counters["aot_autograd"].items() if k.startswith("autograd_cache")},
}))
