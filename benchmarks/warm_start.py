"""Warm start with and without one backport: a second process compiling the
same program from a shared inductor cache.

usage: python benchmarks/warm_start.py PYTHON PROGRAM BACKPORT [PAIRS] [-- LAUNCHER...]

PYTHON is an interpreter of an environment where torch-backports is
installed. B runs PROGRAM with TORCH_BACKPORTS_DISABLE=BACKPORT (stock
torch), A without; each has its own cache directory, filled by one cold
run first. Then PAIRS warm runs of A and B alternate. PROGRAM prints its
cache counters as its last JSON line. Prints a JSON summary: the median of
the per-pair A/B ratios of wall and CPU time (run.summarize) and each
side's counters from its last warm run. run.py's warm_dtensor row calls
compare(). A LAUNCHER (e.g. `-m
torch.distributed.run --standalone --nproc_per_node=1`) goes between
PYTHON and PROGRAM.
"""

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from run import clean_env, summarize  # benchmarks/ is on sys.path: this script's directory or run.py's


def one(python, launcher, program, cache, disable):
    env = clean_env({"TORCHINDUCTOR_CACHE_DIR": cache})
    if disable:
        env["TORCH_BACKPORTS_DISABLE"] = disable
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([python, *launcher, program], env=env, capture_output=True,
                          text=True, timeout=1800)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit("%s failed:\n%s" % (program, done.stderr[-3000:]))
    counters = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    warnings = done.stderr.count("Failed to pickle cache key")
    return wall, cpu, counters[-1], warnings


def compare(python, program, backport, pairs, launcher=()) -> dict:
    """Warm runs of PROGRAM with (A) and without (B) one backport, from
    caches each side's cold run filled; run.summarize of the wall times,
    with the CPU times' summary under "cpu", and the cold and last warm
    run's counters and warnings per side."""
    caches = {side: tempfile.mkdtemp(prefix="tb-warm-%s-" % side) for side in "AB"}
    disable = {"A": None, "B": backport}
    # The first process after a while reads torch from disk: 3.6 s more for
    # the cold run of the side that went first (2.7.0, 2026-12-03; in
    # BABA order the cold runs agreed within 0.5 s). One unmeasured import
    # first keeps that out of the cold figures.
    subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=600)
    cold = {side: one(python, launcher, program, caches[side], disable[side]) for side in "AB"}
    walls, cpus, last = {"A": [], "B": []}, {"A": [], "B": []}, {}
    for i in range(pairs):
        for side in ("AB" if i % 2 == 0 else "BA"):
            wall, cpu, counters, warnings = one(python, launcher, program, caches[side],
                                                disable[side])
            walls[side].append(wall)
            cpus[side].append(cpu)
            last[side] = {"counters": counters, "warnings": warnings}
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)
    result = summarize(walls["A"], walls["B"])
    result["cpu"] = summarize(cpus["A"], cpus["B"])
    result["cold"] = {side: {"wall": cold[side][0], "counters": cold[side][2],
                             "warnings": cold[side][3]} for side in "AB"}
    result["warm"] = last
    return result


def main(argv):
    launcher = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    python, program, backport = argv[:3]
    pairs = int(argv[3]) if len(argv) > 3 else 5
    print(json.dumps(compare(python, program, backport, pairs, launcher)))


if __name__ == "__main__":
    main(sys.argv[1:])
