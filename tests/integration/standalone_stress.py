"""One process of the standalone_compile stress test; never imports torch_backports.

usage: python standalone_stress.py save PATH
       python standalone_stress.py load PATH LOADS

`save` compiles a small function with torch._inductor.standalone_compile,
saves it to PATH (format "binary"), creates PATH.ready, and saves it again
and again until PATH.stop exists. `load` waits for PATH.ready, then loads
PATH and runs it LOADS times. Each prints one JSON line with its counts and
the first few errors.
"""

import json
import os
import sys
import time

import torch
from torch._inductor import CompiledArtifact, standalone_compile

MODE, PATH = sys.argv[1], sys.argv[2]


def f(x):
    return torch.mm(x, x) + 1  # a single extern kernel: no C++ compiler needed


x = torch.arange(16, dtype=torch.float32).reshape(4, 4)
done, errors = 0, []
if MODE == "save":
    artifact = standalone_compile(torch.fx.symbolic_trace(f), [x],
                                  dynamic_shapes="from_example_inputs")
    artifact.save(path=PATH, format="binary")
    open(PATH + ".ready", "w").close()
    deadline = time.monotonic() + 600  # the test stops it long before
    while not os.path.exists(PATH + ".stop") and time.monotonic() < deadline:
        artifact.save(path=PATH, format="binary")
        done += 1
else:
    while not os.path.exists(PATH + ".ready"):
        time.sleep(0.05)
    expected = f(x)
    for _ in range(int(sys.argv[3])):
        try:
            out = CompiledArtifact.load(path=PATH, format="binary")(x)
            out = out[0] if isinstance(out, (list, tuple)) else out
            assert torch.equal(out, expected), "wrong result"
            done += 1
        except Exception as exc:  # a partial file: the failure this test counts
            errors.append("%s: %s" % (type(exc).__name__, str(exc)[:200]))
print(json.dumps({"mode": MODE, "done": done, "failed": len(errors), "errors": errors[:3]}))
