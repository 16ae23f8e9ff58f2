"""A fake-tensor op with the backport's _check_for_subclass_arg vs torch's own.

usage: TORCH_BACKPORTS_DISABLE=fake-tensor-parameter-subclass python fake_check_bench.py CALLS
       (in an env with torch-backports; run.py sets the variable)

FakeTensorMode calls _check_for_subclass_arg on every argument of every op
it dispatches, so the fake-tensor-parameter-subclass backport sits on the
hot path of tracing, export and compilation. This times blocks of
torch.mm on fake tensors under FakeTensorMode, alternating the function
torch shipped with the backport's (built here from the backport's own code,
so it can be measured on any release), and prints run.summarize() of the
block times as one JSON line.
"""

import json
import sys
import time
import types

import torch
import torch._subclasses.fake_tensor as fake_tensor

from run import summarize  # benchmarks/ is this script's directory, so it is on sys.path
from torch_backports.backports import fake_tensor_parameter_subclass as backport

CALLS = int(sys.argv[1])
BLOCK = 50
current = fake_tensor._check_for_subclass_arg
shipped = current if not hasattr(current, "_torch_backports_replacement") else None
if shipped is None:
    raise SystemExit("torch's function is patched here; run with "
                     "TORCH_BACKPORTS_DISABLE=fake-tensor-parameter-subclass")
ours = types.FunctionType(backport._check_for_subclass_arg.__code__, vars(fake_tensor),
                          "_check_for_subclass_arg")
mode = fake_tensor.FakeTensorMode()
with mode:
    x = torch.empty(8, 8)


def block(check):
    fake_tensor._check_for_subclass_arg = check
    start = time.perf_counter()
    with mode:
        for _ in range(BLOCK):
            torch.mm(x, x)
    return (time.perf_counter() - start) / BLOCK


for _ in range(5):
    block(ours), block(shipped)
patched, plain = [], []
for i in range(max(2, CALLS // BLOCK)):
    if i % 2:
        plain.append(block(shipped)); patched.append(block(ours))
    else:
        patched.append(block(ours)); plain.append(block(shipped))
fake_tensor._check_for_subclass_arg = current
print(json.dumps(summarize(patched, plain)))
