"""Write docs/ci.md's table of the latest CI run from that run's log.

    bash .ci/run 2>&1 | tee ci.log
    python tools/ci_table.py ci.log            # rewrite the table in docs/ci.md
    python tools/ci_table.py ci.log --print    # print it instead

The log holds what the table needs: `.ci/run`'s own lines (when it ran, on
how many cores, the load average at its start and end, the least free disk),
tox's closing summary (each env's setup and test seconds), and each torch
env's `reproducer times` section (tests/conftest.py): how long each test of
test_reproducers.py took, and each fixed run made together. From those it
also works out what one more backport and one more CI release cost.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "ci.md"
BEGIN, END = "<!-- begin generated: ci-run -->", "<!-- end generated: ci-run -->"


class Env(NamedTuple):
    name: str
    status: str
    total: float
    setup: float


class Run(NamedTuple):
    started: str
    ended: str
    cores: str
    load_start: str
    load_end: str
    disk_least_free_mb: Optional[int]
    envs: List[Env]
    # env -> test id -> seconds; test ids "together NAME" for fixed runs made together
    times: Dict[str, Dict[str, float]]


_SUMMARY = re.compile(r"^\s+(\S+): (OK|FAIL|SKIP)\S*.*?\((\d+(?:\.\d+)?)"
                      r"(?:=setup\[(\d+(?:\.\d+)?)\])?")
_ENV_LINE = re.compile(r"^(\S+): (?:commands\[\d+\]|install_deps|install_package)>")


def parse(log: str) -> Run:
    started = ended = cores = load_start = load_end = ""
    disk = None
    envs: List[Env] = []
    times: Dict[str, Dict[str, float]] = {}
    env = ""
    for line in log.splitlines():
        match = re.match(r"ci: started (\S+), (\d+) cores, load (\S+)", line)
        if match:
            started, cores, load_start = match.groups()
            continue
        match = re.match(r"ci: ended (\S+), load (\S+)", line)
        if match:
            ended, load_end = match.groups()
            continue
        match = re.match(r"disk: least free during the run (\d+) MB", line)
        if match:
            disk = int(match.group(1))
            continue
        match = _ENV_LINE.match(line)
        if match:
            env = match.group(1)
            continue
        match = re.match(r"time: (.+) (\d+(?:\.\d+)?)$", line)
        if match and env:
            times.setdefault(env, {})[match.group(1)] = float(match.group(2))
            continue
        match = _SUMMARY.match(line)
        if match:
            name, status, total, setup = match.groups()
            envs.append(Env(name, status, float(total), float(setup or 0.0)))
    return Run(started, ended, cores, load_start, load_end, disk, envs, times)


def _minutes(seconds: float) -> str:
    return "%.1f" % (seconds / 60)


def table(run: Run) -> str:
    total = sum(env.total for env in run.envs)
    lines = [
        "Latest measured run: %s to %s, %s cores, load average %s at the start and %s at "
        "the end; **%s minutes** (%.0f s) of env time in all%s." % (
            run.started or "?", run.ended or "?", run.cores or "?", run.load_start or "?",
            run.load_end or "?", _minutes(total), total,
            ", least free disk %.1f GB" % (run.disk_least_free_mb / 1024)
            if run.disk_least_free_mb is not None else ""),
        "",
        "| env | result | setup s | tests s | min | fixed runs together: runs, s in-process |"
        " runs alone: tests, s |",
        "|---|---|---|---|---|---|---|",
    ]
    for env in sorted(run.envs, key=lambda e: -e.total):
        spent = run.times.get(env.name, {})
        together = [s for test, s in spent.items() if test.startswith("together ")]
        alone = [s for test, s in spent.items()  # a skipped test took no time
                 if not test.startswith("together ") and test != "test_fixed_runs_together"
                 and s >= 0.1]
        lines.append("| `%s` | %s | %.0f | %.0f | %s | %s | %s |" % (
            env.name, env.status, env.setup, env.total - env.setup, _minutes(env.total),
            "%d, %.0f" % (len(together), sum(together)) if together else "",
            "%d, %.0f" % (len(alone), sum(alone)) if alone else ""))
    return "\n".join(lines)


def costs(run: Run) -> str:
    """What one more backport and one more CI release cost, from this run."""
    together = [s for spent in run.times.values() for test, s in spent.items()
                if test.startswith("together ")]
    stock = [s for spent in run.times.values() for test, s in spent.items()
             if test.startswith("test_reproducer[") and s >= 1.0]
    torch_envs = [env for env in run.envs if env.name in run.times]
    if not (together and stock and torch_envs):
        return "(the log has no reproducer times)"
    setup = statistics.mean(env.setup for env in torch_envs)
    return ("A fixed run made together took %.1f s in-process (median of %d); a test of "
            "test_reproducer that made its runs alone took %.1f s (median of %d, mostly stock "
            "runs). A torch env's setup took %.0f s (mean of %d)." % (
                statistics.median(together), len(together), statistics.median(stock),
                len(stock), setup, len(torch_envs)))


def main(argv: List[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    run = parse(Path(argv[0]).read_text(errors="replace"))
    if not run.envs:
        print("ci_table: %s has no tox summary (did the run end?)" % argv[0], file=sys.stderr)
        return 1
    text = table(run) + "\n\n" + costs(run)
    if "--print" in argv[1:]:
        print(text)
        return 0
    page = PAGE.read_text(encoding="utf-8")
    if BEGIN not in page or END not in page:
        print("ci_table: %s has no %s ... %s markers" % (PAGE, BEGIN, END), file=sys.stderr)
        return 1
    head, rest = page.split(BEGIN, 1)
    PAGE.write_text(head + BEGIN + "\n" + text + "\n" + END + rest.split(END, 1)[1],
                    encoding="utf-8")
    print("ci_table: wrote the run of %s to %s" % (run.started or "?", PAGE))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
