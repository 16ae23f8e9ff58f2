"""FxGraphCachePickler.dumps, patched vs original, on a real cache key.

usage: python dumps_bench.py CALLS  (run in an env with torch-backports)

It compiles a small model once and keeps the pickler and the graph's hash
details that inductor passed to dumps. Then it times blocks of calls to the
original function and to our wrapper on that same key, alternating blocks,
and prints run.summarize() of the block times as one JSON line. On a
release that needs no patch, the wrapper is applied here all the same, so
its cost can be measured.
"""

import json
import sys
import time

import torch
import torch._inductor.codecache as codecache

from run import summarize  # benchmarks/ is this script's directory, so it is on sys.path
from torch_backports.backports import fx_graph_cache_pickling as fx

CALLS = int(sys.argv[1])
BLOCK = 50
pickler_class = codecache.FxGraphCachePickler
current = pickler_class.__dict__["dumps"]
if not hasattr(current, "__wrapped__"):
    fx.apply(codecache, (2, 10, 0))
    current = pickler_class.__dict__["dumps"]
original = current.__wrapped__
captured = []


def recording(self, obj):
    if type(obj).__name__ == "FxGraphHashDetails" and not captured:
        captured.append((self, obj))
    return original(self, obj)


pickler_class.dumps = recording
exec_model = torch.compile(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()))
exec_model(torch.randn(2, 16))
pickler_class.dumps = current
(pickler, details), = captured
assert current.__get__(pickler)(details) == original(pickler, details)


def block(call):
    start = time.perf_counter()
    for _ in range(BLOCK):
        call(details)
    return (time.perf_counter() - start) / BLOCK


patched_call = current.__get__(pickler)


def original_call(obj):
    return original(pickler, obj)


for _ in range(5):
    block(patched_call), block(original_call)
patched, plain = [], []
for i in range(max(2, CALLS // BLOCK)):
    if i % 2:
        plain.append(block(original_call)); patched.append(block(patched_call))
    else:
        patched.append(block(patched_call)); plain.append(block(original_call))
result = summarize(patched, plain)
result["key_bytes"] = len(original(pickler, details))
print(json.dumps(result))
