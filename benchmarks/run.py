"""What torch-backports costs, as ratios measured side by side in one run.

usage: python benchmarks/run.py [--quick] [--torch VERSION] [--workdir DIR] [--json FILE]

Each benchmark compares environment A (torch-backports pip-installed from a
freshly built wheel) with environment B (identical, without it). B is built
first; A is a hard-linked copy of B with the wheel pip-installed on top, so
the two share every torch file and differ only in torch-backports. pip
byte-compiles what it installs, so both run from .pyc files. Runs of A and
B alternate after a warm-up, and each figure is the median of the A/B
ratios of many pairs, with a 95 % confidence interval for it and the min -
max (the JSON keeps every run). Each process benchmark reports wall time
and CPU time, and start-up and `import torch` (and, in full mode, both
compiles: ~4 min each under valgrind) also report instructions counted by
callgrind, one run each of A and B side by side, which do not depend on the
load of a shared machine (`import torch` also with the cyclic GC off, see
main()). Nothing here asserts a threshold; the targets are
printed beside the figures for a person to read.
"""

import argparse
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
COMPILE = Path(__file__).with_name("compile_small.py")
COMPILE_PATCHED = Path(__file__).with_name("compile_patched.py")
DUMPS = Path(__file__).with_name("dumps_bench.py")
FAKE_CHECK = Path(__file__).with_name("fake_check_bench.py")
DTENSOR_MODEL = Path(__file__).with_name("dtensor_model.py")
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1")

# (name, what, target text)
TARGETS = {
    "startup": ("interpreter start, `python -c pass`, no torch", "<= 1.03 (aim 1.01)"),
    "rss": ("peak RSS of that process, A - B", "<= +0.5 MiB"),
    "probe": ("availability probe, `importlib.util.find_spec('torch')`, torch installed",
              "as `python -c pass`"),
    "import_torch": ("`import torch`", "<= 1.005"),
    "import_codecache": ("`import torch._inductor.codecache`", "<= 1.01"),
    "cold_compile": ("first torch.compile, cold inductor cache", "<= 1.01"),
    "warm_compile": ("same compile from a second process, cache hit", "<= 1.01"),
    "patched_compile": ("compiles through every patched function (compile_patched.py), "
                        "cold cache", "<= 1.01"),
    "dumps": ("FxGraphCachePickler.dumps on a real cache key, patched vs original", "<= 1.02"),
    "fake_check": ("torch.mm under FakeTensorMode, backport's _check_for_subclass_arg vs "
                   "torch's", "nothing measurable"),
    "warm_dtensor": ("warm start of a DTensor model on a flattened mesh (dtensor_model.py, "
                     "torchrun, 1 rank), aot-autograd-cache-dtensor-key on vs off",
                     "a cache hit where stock bypasses; never slower"),
}


def sh(*cmd, env=None, cwd=None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd)
    if done.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(map(str, cmd)), done.stderr[-3000:]))
    return done


def clean_env(extra: Dict[str, str] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TORCH_BACKPORTS_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra or {})
    return env


def build_wheel(workdir: Path) -> Path:
    out = workdir / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, ROOT)
    return next(out.glob("torch_backports-*.whl"))


def make_pair(workdir: Path, name: str, requirements: List[str], wheel: Path) -> Tuple[Path, Path]:
    """Venvs B (requirements only) and A (B plus torch-backports); returns
    their pythons as (A, B). B is reused across runs if it exists."""
    base = workdir / (name + "-without")
    if not (base / ".complete").exists():
        shutil.rmtree(base, ignore_errors=True)
        sh(sys.executable, "-m", "venv", base)
        # wrapt is torch-backports' one dependency; giving it to B too
        # keeps A - B down to torch-backports itself.
        sh(base / "bin" / "python", "-m", "pip", "install", "-q", "wrapt",
           *requirements, env=clean_env())
        (base / ".complete").write_text("")
    with_ = workdir / (name + "-with")
    shutil.rmtree(with_, ignore_errors=True)
    sh("cp", "-al", base, with_)
    sh(with_ / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", wheel, env=clean_env())
    for venv, has in ((with_, True), (base, False)):
        found = sh(venv / "bin" / "python", "-c",
                   "import sys; print('torch_backports' in sys.modules)", env=clean_env())
        assert found.stdout.strip() == str(has), (venv, found.stdout)
    return with_ / "bin" / "python", base / "bin" / "python"


def timed_run(cmd: List[str], env: Dict[str, str]) -> Tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system, the child's and the children
    it waited for, such as inductor's gcc) and peak RSS (KiB) of one child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("benchmark run failed: %s" % " ".join(map(str, cmd)))
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def instructions(runs: Dict[str, Tuple[List[str], Dict[str, str]]]
                 ) -> Optional[Tuple[Dict[str, int], bool]]:
    """Instructions each (command, environment) executes under callgrind,
    all run side by side.

    Wall and CPU time on a shared two-core machine scatter by +-20 % between
    paired runs, which hides a 1 % effect. callgrind counts instructions
    instead: with PYTHONHASHSEED fixed, the same binary and inputs give the
    same count whatever else the machine does (two runs of `import torch`
    differed by 12 in 4.9 G here). A/B is less exact than that: A allocates
    more, which moves the cyclic GC's collections, and the working directory
    and environment move them too (see main()). Only the
    Python process is counted, not its children (inductor's gcc and compile
    workers), which makes a compile's ratio an upper bound. None if valgrind
    is absent.

    valgrind's CPU has no AVX-512, and inductor builds its kernels with
    -march=native (torch 2.10 has no setting for it), so on an AVX-512
    machine valgrind stops the compile program with SIGILL at the first
    instruction of the compiled kernel (seen here). Every step of the compile
    and of the cache lookup has run by then, and A and B stop at the same
    point, so such a run still counts. Returns the counts by key, and
    whether any run ended so.
    """
    if shutil.which("valgrind") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="tb-callgrind-") as tmp:
        procs = {}
        for key, (cmd, env) in runs.items():
            out = os.path.join(tmp, key + ".out")
            procs[key] = (out, subprocess.Popen(
                ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, *map(str, cmd)],
                env=dict(env, PYTHONHASHSEED="0"), stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL))
        counts = {}
        sigill = False
        for key, (out, proc) in procs.items():
            code = proc.wait()
            if code == -signal.SIGILL:
                sigill = True
            elif code != 0:
                raise SystemExit("callgrind run failed: %s" % " ".join(map(str, runs[key][0])))
            for line in Path(out).read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    counts[key] = int(line.split()[1])
                    break
            else:
                raise SystemExit("callgrind wrote no count for: %s" % " ".join(map(str, runs[key][0])))
    return counts, sigill


def with_instructions(result: dict, run_a: Tuple[List[str], Dict[str, str]],
                      run_b: Tuple[List[str], Dict[str, str]], key: str = "instructions") -> dict:
    """result plus the callgrind counts of run_a and run_b and their ratio,
    under `key`."""
    counted = instructions({"a": run_a, "b": run_b})
    if counted is not None:
        counts, sigill = counted
        result[key] = {"a": counts["a"], "b": counts["b"],
                       "ratio": counts["a"] / counts["b"], "sigill": sigill}
    return result


def interleave(runs: int, warmup: int, a: Callable[[], Tuple[float, float, int]],
               b: Callable[[], Tuple[float, float, int]]) -> Dict[str, List]:
    """Alternate A and B (ABBA order, so neither always goes first)."""
    for _ in range(warmup):
        a(), b()
    out = {"a": [], "b": []}
    for i in range(runs):
        order = (("a", a), ("b", b)) if i % 2 == 0 else (("b", b), ("a", a))
        for key, fn in order:
            out[key].append(fn())
    return out


def median_interval(sorted_values: List[float], level: float = 0.95
                    ) -> Optional[Tuple[float, float]]:
    """A distribution-free confidence interval for the median of the
    population `sorted_values` was drawn from: the k-th smallest and k-th
    largest values, with k the largest rank for which the number of values
    below the median, Binomial(n, 1/2), falls short of k with probability at
    most (1 - level) / 2. None if even min .. max falls short of `level`
    (five values or fewer at 95 %)."""
    n = len(sorted_values)
    tail, k = 0.0, 0
    while k < n // 2:
        tail += math.comb(n, k) / 2 ** n  # P(Binomial(n, 1/2) == k)
        if tail > (1 - level) / 2:
            break
        k += 1
    if k == 0:
        return None
    return sorted_values[k - 1], sorted_values[n - k]


def summarize(values_a: List[float], values_b: List[float]) -> dict:
    """The median, min and max of the A/B ratios of the pairs run back to
    back, with a 95 % confidence interval for that median, beside the
    medians of A and B and their ratio.

    The headline is the pair ratio because this machine's speed drifts:
    the same warm compile took 18.4 s in one hour and 11.5 s in the next.
    A pair shares its few seconds of that drift, while the medians of A and
    B are taken over the whole hour. The interval says what the figure can
    resolve: the A/B ratio of a pair of `import torch` runs scatters by
    8.5 % (standard deviation, 2026-12-03) here, whether A and B run one
    after the other or at once on the two cores, so 100 pairs leave an
    interval 3.5 % wide. The callgrind counts resolve what timings cannot."""
    ratios = sorted(x / y for x, y in zip(values_a, values_b))
    return {"ratio": statistics.median(ratios), "ci95": median_interval(ratios),
            "pair_ratio_min": ratios[0], "pair_ratio_max": ratios[-1],
            "median_a": statistics.median(values_a), "median_b": statistics.median(values_b),
            "ratio_of_medians": statistics.median(values_a) / statistics.median(values_b),
            "runs": len(values_a), "a": list(values_a), "b": list(values_b)}


def summarize_times(data: Dict[str, List]) -> dict:
    """summarize() of the wall times in interleave()'s (wall, CPU, RSS)
    triples, with the same summary of the CPU times under "cpu"."""
    result = summarize([t for t, _, _ in data["a"]], [t for t, _, _ in data["b"]])
    result["cpu"] = summarize([c for _, c, _ in data["a"]], [c for _, c, _ in data["b"]])
    return result


def bench_startup(py_a, py_b, runs, warmup) -> Tuple[dict, dict]:
    env = clean_env()
    data = interleave(runs, warmup, lambda: timed_run([py_a, "-c", "pass"], env),
                      lambda: timed_run([py_b, "-c", "pass"], env))
    times = with_instructions(summarize_times(data), ([py_a, "-c", "pass"], env),
                              ([py_b, "-c", "pass"], env))
    rss_a = [r for _, _, r in data["a"]]
    rss_b = [r for _, _, r in data["b"]]
    diffs = sorted((x - y) / 1024 for x, y in zip(rss_a, rss_b))
    rss = {"median_a": statistics.median(rss_a) / 1024, "median_b": statistics.median(rss_b) / 1024,
           "diff_mib": (statistics.median(rss_a) - statistics.median(rss_b)) / 1024,
           "pair_diff_min": diffs[0], "pair_diff_max": diffs[-1], "runs": runs}
    return times, rss


def bench_command(py_a, py_b, args, runs, warmup, env_for=None, count=False) -> dict:
    """Interleaved timings of `py args` in A and B; env_for() gives each run
    extra variables (a fresh TORCHINDUCTOR_CACHE_DIR, removed afterwards).
    With count, one callgrind run of each is added."""
    def fresh():
        return clean_env(env_for() if env_for else None)

    def drop(*envs):
        for env in envs:
            if env_for:
                shutil.rmtree(env["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

    def one(py):
        env = fresh()
        try:
            return timed_run([py, *args], env)
        finally:
            drop(env)

    result = summarize_times(interleave(runs, warmup, lambda: one(py_a), lambda: one(py_b)))
    if count:
        env_a, env_b = fresh(), fresh()
        try:
            with_instructions(result, ([py_a, *args], env_a), ([py_b, *args], env_b))
        finally:
            drop(env_a, env_b)
    return result


def bench_warm(py_a, py_b, runs, warmup, workdir, count=False) -> dict:
    """The compile again in A and B, each from a cache its first run filled."""
    envs = {}
    for key, py in (("a", py_a), ("b", py_b)):
        cache = str(workdir / ("warm-cache-" + key))
        shutil.rmtree(cache, ignore_errors=True)
        envs[key] = clean_env({"TORCHINDUCTOR_CACHE_DIR": cache})
        sh(py, COMPILE, env=envs[key])
    result = summarize_times(interleave(runs, warmup, lambda: timed_run([py_a, COMPILE], envs["a"]),
                                        lambda: timed_run([py_b, COMPILE], envs["b"])))
    if count:
        with_instructions(result, ([py_a, COMPILE], envs["a"]), ([py_b, COMPILE], envs["b"]))
    return result


def bench_in_process(py_a, script: Path, runs, workdir, extra_env=None) -> dict:
    """Run one of the in-process A/B scripts in env A; its JSON summary."""
    cache = str(workdir / (script.stem + "-cache"))
    shutil.rmtree(cache, ignore_errors=True)
    done = sh(py_a, script, str(runs),
              env=clean_env(dict(extra_env or {}, TORCHINDUCTOR_CACHE_DIR=cache)))
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_warm_dtensor(py_a, pairs) -> dict:
    """warm_start.compare() of the DTensor model in env A, the backport on
    against off (TORCH_BACKPORTS_DISABLE names it), under torchrun."""
    import warm_start  # imports this module for summarize(); loaded late to keep that one-way

    return warm_start.compare(str(py_a), str(DTENSOR_MODEL), "aot-autograd-cache-dtensor-key",
                              pairs, TORCHRUN)


def counters_text(result: dict) -> str:
    """'; warm A: aot_hit 1, ...' from a warm_start.compare() result."""
    parts = []
    for side in "AB":
        warm = result["warm"][side]
        counts = ", ".join("%s %d" % (k, v) for k, v in warm["counters"].items() if v)
        parts.append("warm %s: %s, %d warnings" % (side, counts or "no counter", warm["warnings"]))
    return "; " + "; ".join(parts)


def fmt_row(key: str, result: dict) -> str:
    what, target = TARGETS[key]
    cpu = instr = "-"
    if key == "rss":
        figure = "%+.3f MiB (pairs %+.3f .. %+.3f; A %.1f, B %.1f MiB)" % (
            result["diff_mib"], result["pair_diff_min"], result["pair_diff_max"],
            result["median_a"], result["median_b"])
    else:
        unit, scale = ("us", 1e6) if key in ("dumps", "fake_check") else ("ms", 1e3)
        interval = result["ci95"]
        figure = "%.4f (95%% CI %s; pairs %.3f .. %.3f; A %.1f %s, B %.1f %s)" % (
            result["ratio"], "%.3f .. %.3f" % tuple(interval) if interval else "needs 6 pairs",
            result["pair_ratio_min"], result["pair_ratio_max"],
            result["median_a"] * scale, unit, result["median_b"] * scale, unit)
        if "warm" in result:
            figure += counters_text(result)
        if "cpu" in result:
            cpu = "%.4f" % result["cpu"]["ratio"]
        if "instructions" in result:
            counts = result["instructions"]
            instr = "%.4f (A %.2f M, B %.2f M%s)" % (
                counts["ratio"], counts["a"] / 1e6, counts["b"] / 1e6,
                "; to the first kernel" if counts.get("sigill") else "")
        if "instructions_gc_off" in result:
            counts = result["instructions_gc_off"]
            instr += "; GC off: %.4f (A %.2f M, B %.2f M)" % (
                counts["ratio"], counts["a"] / 1e6, counts["b"] / 1e6)
    return "| %s | %s | %s | %s | %s | %d |" % (what, figure, cpu, instr, target, result["runs"])


class Progress(dict):
    """The results so far, written to `path` (and named on stdout) as each
    benchmark finishes, so that one failing an hour into a full run keeps
    the ones before it."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def __setitem__(self, key: str, value: dict) -> None:
        super().__setitem__(key, value)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self, indent=2))
        print("%s done (%s)" % (key, self.path), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repetitions: checks it works")
    parser.add_argument("--torch", default="2.10.0", help="torch release for the torch benchmarks")
    parser.add_argument("--workdir", default=str(ROOT / "benchmarks" / ".work"))
    parser.add_argument("--clean", action="store_true",
                        help="delete the work folder (its venvs: ~1 GB with torch 2.13.0, "
                        "~8 GB with a CUDA build) when done, instead of keeping it for the next run")
    parser.add_argument("--json", default=None, help="write results here too "
                        "(default: benchmarks/results/latest[-quick].json)")
    args = parser.parse_args()
    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    commit = source_commit()  # now, when A's wheel is built from the checkout
    n = {"startup": 20 if quick else 2000, "torch": 2 if quick else 100,
         "compile": 1 if quick else 20, "dumps": 200 if quick else 40000}
    warm = 0 if quick else 1

    wheel = build_wheel(workdir)
    plain_a, plain_b = make_pair(workdir, "plain", [], wheel)
    torch_a, torch_b = make_pair(workdir, "torch-" + args.torch, ["torch==" + args.torch], wheel)

    out = Path(args.json) if args.json else (
        ROOT / "benchmarks" / "results" / ("latest-quick.json" if quick else "latest.json"))
    results = Progress(out.with_name(out.stem + "-partial.json"))
    results["startup"], results["rss"] = bench_startup(plain_a, plain_b, n["startup"], 5)
    # transformers and others probe for torch like this at import; it must
    # not arm torch-backports, so it costs what `python -c pass` does.
    results["probe"] = bench_command(
        torch_a, torch_b, ["-c", "import importlib.util; importlib.util.find_spec('torch')"],
        n["startup"] // 4, 5, count=True)
    # Counted a second time with the cyclic GC off. A and B allocate
    # differently, so its collections fall at different points of `import
    # torch` (they cost ~200 M instructions there): that moved A/B by up to
    # 0.0006 between a run from one directory and from another (2.13.0,
    # 2026-12-05). With the GC off, A - B is the work our code adds.
    results["import_torch"] = with_instructions(
        bench_command(torch_a, torch_b, ["-c", "import torch"], n["torch"], warm, count=True),
        *[([py, "-c", "import gc; gc.disable(); import torch"], clean_env())
          for py in (torch_a, torch_b)], key="instructions_gc_off")
    results["import_codecache"] = bench_command(
        torch_a, torch_b, ["-c", "import torch._inductor.codecache"], n["torch"], warm,
        count=not quick)
    results["cold_compile"] = bench_command(
        torch_a, torch_b, [COMPILE], n["compile"], warm,
        env_for=lambda: {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="tb-cold-")},
        count=not quick)
    results["patched_compile"] = bench_command(
        torch_a, torch_b, [COMPILE_PATCHED], n["compile"], warm,
        env_for=lambda: {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="tb-patched-")},
        count=not quick)
    results["warm_compile"] = bench_warm(torch_a, torch_b, n["compile"], warm, workdir,
                                         count=not quick)
    results["dumps"] = bench_in_process(torch_a, DUMPS, n["dumps"], workdir)
    # The script times torch's own function against the backport's code, so
    # on a release the backport patches (2.6 - 2.12) torch must stay stock.
    results["fake_check"] = bench_in_process(
        torch_a, FAKE_CHECK, n["dumps"], workdir,
        {"TORCH_BACKPORTS_DISABLE": "fake-tensor-parameter-subclass"})
    results["warm_dtensor"] = bench_warm_dtensor(torch_a, n["compile"])

    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "quick": quick,
            "torch": args.torch, "python": platform.python_version(),
            "machine": "%s, %d cores, %s" % (platform.machine(), os.cpu_count() or 0,
                                             platform.platform()),
            "command": "python benchmarks/run.py" + (" --quick" if quick else "")
            + ("" if args.torch == "2.10.0" else " --torch " + args.torch),
            "commit": commit}
    lines = ["| what (A = with torch-backports, B = without) | wall A/B, median of paired "
             "runs (95% CI of that median; min .. max) | CPU A/B median "
             "| instructions A/B (callgrind, one run each) | target | runs |",
             "|---|---|---|---|---|---|"]
    lines += [fmt_row(key, results[key]) for key in TARGETS]
    print("%s, commit %s, torch %s, Python %s, %s%s" % (
        meta["date"], meta["commit"], meta["torch"], meta["python"], meta["machine"],
        " (quick)" if quick else ""))
    print("\n".join(lines))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    results.path.unlink()
    print("wrote", out)
    # The venvs are kept for the next run (a CUDA torch is a 4 GB download),
    # which is disk a user did not ask for: say so, or remove them.
    size = sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file() and not f.is_symlink())
    if args.clean:
        shutil.rmtree(workdir, ignore_errors=True)
        print("removed %s (%.0f MB)" % (workdir, size / 2**20))
    else:
        print("%s keeps %.0f MB (the venvs, reused by the next run); --clean or "
              "`rm -rf %s` frees it" % (workdir, size / 2**20, workdir))
    return 0


def source_commit() -> Optional[str]:
    """The commit of the checkout A's wheel was built from, with "+changes"
    where the work tree differs from it; None outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, timeout=30)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    sys.exit(main())
