"""What the backports of eager functions that `import torch` loads add: to
`import torch`, to the function's first call, and to every call after it.

usage: python benchmarks/eager_calls.py PYTHON [--calls N] [--case NAME ...]

PYTHON is an interpreter of an environment with torch and torch-backports.
Each case is one program, run twice under callgrind in that environment:
with its backport on (A) and with it named in TORCH_BACKPORTS_DISABLE (B,
stock for that function; every other backport is on in both). Instruction
counts, not time: they repeat exactly, where the wall time of a few
microseconds does not. The program makes its first call and then N more
inside `sys.call_tracing`, and callgrind dumps its counts before and after
each (--dump-before/--dump-after), so one run gives the three parts:
`import torch` with the case's setup, the first call, and N calls. The
cyclic GC is off, so that its collections fall nowhere in particular.
Prints a table; nothing here asserts a threshold.

The cases:
  register-hook   Tensor.register_hook (tensor-register-hook-stale-view):
                  a stand-in until the first call, which checks and
                  compiles the fixed copy; one attribute read more per call
  fx-wrap         torch.fx.wrap (fx-wrap-frame-cycle), from module level:
                  the copy is made at `import torch`; a try/finally per call
  custom-op       torch.library.custom_op with a list[Tensor] argument and
                  register_autograd (custom-op-autograd-tensorlist-defaults):
                  the first call is the registration, which checks and
                  compiles make_autograd_impl's copy; each later call is a
                  forward and backward of the op
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

_PRELUDE = """
import gc, sys
gc.disable()
import torch
"""

CASES: Dict[str, Tuple[str, str]] = {
    "register-hook": ("tensor-register-hook-stale-view", """
a = torch.ones(4, requires_grad=True)

def hook(grad):
    return grad

def first():
    (a * 1).register_hook(hook)

def calls(n):
    for _ in range(n):
        (a * 1).register_hook(hook)
"""),
    "fx-wrap": ("fx-wrap-frame-cycle", """
# wrap() must be called from a module's top level: exec gives it one.
code = compile("torch.fx.wrap('len')", "<module-level>", "exec")
scope = {"torch": torch}

def first():
    exec(code, scope)

def calls(n):
    for _ in range(n):
        exec(code, scope)
"""),
    "custom-op": ("custom-op-autograd-tensorlist-defaults", """
from typing import List

xs = [torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)]

def first():
    global op

    @torch.library.custom_op("eager_calls::total", mutates_args=())
    def op(xs: List[torch.Tensor], scale: float = 1.0) -> torch.Tensor:
        return sum(x * scale for x in xs)

    def setup_context(ctx, inputs, output):
        ctx.n, ctx.scale = len(inputs[0]), inputs[1]

    def backward(ctx, grad):
        return [grad * ctx.scale] * ctx.n, None

    op.register_autograd(backward, setup_context=setup_context)

def calls(n):
    for _ in range(n):
        op(xs, 2.0).sum().backward()
"""),
}

_CALLS = """
sys.call_tracing(first, ())
sys.call_tracing(calls, (%d,))
"""


def counts(python: str, program: str, env: Dict[str, str]) -> List[int]:
    """Instructions of each part between sys.call_tracing's entries and exits."""
    with tempfile.TemporaryDirectory(prefix="tb-eager-") as tmp:
        out = os.path.join(tmp, "cg.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
             "--dump-before=sys_call_tracing", "--dump-after=sys_call_tracing",
             python, "-c", program],
            env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        parts = []
        for path in sorted(glob.glob(out + "*"), key=_part_number):
            with open(path) as f:
                text = f.read()
            found = re.search(r"^(?:summary|totals):\s*(\d+)", text, re.M)
            parts.append(int(found.group(1)) if found else 0)
    return parts


def _part_number(path: str) -> int:
    # callgrind names the dumps cg.out.1, cg.out.2, ... and the last cg.out.
    tail = path.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("python")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BACKPORTS")}
    base["PYTHONHASHSEED"] = "0"
    version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                             env=dict(base, TORCH_BACKPORTS_DISABLE="1"), check=True,
                             capture_output=True, text=True).stdout.strip()
    print("torch %s, %d calls, callgrind instructions, GC off; A: the backport on, "
          "B: named in TORCH_BACKPORTS_DISABLE" % (version, args.calls))
    print("| case | import torch + setup, A / B | first call, A / B | per call, A / B | A/B per call |")
    print("|---|---|---|---|---|")
    for case in args.case or sorted(CASES):
        backport, body = CASES[case]
        program = _PRELUDE + body + _CALLS % args.calls
        a = counts(args.python, program, base)
        b = counts(args.python, program, dict(base, TORCH_BACKPORTS_DISABLE=backport))
        # The dumps: before the first call, the first call, between, the N
        # calls, the rest.
        if len(a) < 4 or len(b) < 4:
            print("| %s | callgrind gave %d and %d parts, not 5 |" % (case, len(a), len(b)))
            continue
        per_a, per_b = a[3] / args.calls, b[3] / args.calls
        print("| %s | %.2f M / %.2f M (%+.3f M) | %.0f k / %.0f k (%+.0f k) | "
              "%.0f / %.0f (%+.0f) | %.4f |" % (
                  case, a[0] / 1e6, b[0] / 1e6, (a[0] - b[0]) / 1e6,
                  a[1] / 1e3, b[1] / 1e3, (a[1] - b[1]) / 1e3,
                  per_a, per_b, per_a - per_b, per_a / per_b))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
