"""Shared helpers: the fake torch, and running code in a fresh interpreter.

Tests that start interpreters rely on torch-backports being pip-installed in
the interpreter running pytest (tox does that from the built wheel), so that
site processes torch_backports.pth exactly as it would for a user.
"""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Dict, Optional, Sequence

import pytest

TESTS = Path(__file__).resolve().parent
FAKE_TORCH = TESTS / "fake_torch"
SITE_PACKAGES = sysconfig.get_paths()["purelib"]


def child_env(extra: Optional[Dict[str, str]] = None, fake_torch: bool = False) -> Dict[str, str]:
    """The current environment, minus our opt-out and any PYTHONPATH, plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_BACKPORTS_", "FAKE_TORCH_")) and k != "PYTHONPATH"}
    if fake_torch:
        env["PYTHONPATH"] = str(FAKE_TORCH)
    env.update(extra or {})
    return env


def run_interpreter(args: Sequence[object], *, env: Optional[Dict[str, str]] = None,
                    fake_torch: bool = False, timeout: float = 900, cwd: Optional[str] = None):
    """Run this environment's Python with `args` in a new process, with
    child_env(), output captured and no stdin; never raises on failure."""
    return subprocess.run(
        [sys.executable, *map(str, args)],
        env=child_env(env, fake_torch=fake_torch),
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd,
    )


def run_python(code: str, *, flags: Sequence[str] = (), env: Optional[Dict[str, str]] = None,
               fake_torch: bool = False, timeout: float = 600, cwd: Optional[str] = None):
    """Run `code` in a new interpreter of this environment; never raises on failure."""
    return run_interpreter([*flags, "-c", code], env=env, fake_torch=fake_torch,
                           timeout=timeout, cwd=cwd)


def last_json(stdout: str):
    """The last line of `stdout` that parses as JSON."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise AssertionError("no JSON line in output:\n" + stdout)


def fx_record(records):
    """The fx-graph-cache-pickling record among `records` (status rows): the
    one backport whose target the fake torch imitates."""
    (record,) = [r for r in records if r["name"] == "fx-graph-cache-pickling"]
    return record


def pth_installed() -> bool:
    return (Path(SITE_PACKAGES) / "torch_backports.pth").is_file()


@pytest.fixture(scope="session")
def installed():
    """Skip-proof guard: tests that start interpreters need the .pth installed."""
    assert pth_installed(), (
        "torch-backports is not pip-installed in %s; run the tests through tox" % SITE_PACKAGES)


def pytest_collection_modifyitems(items):
    """The longest test first: pytest-xdist hands tests out in collection
    order, and the shared-interpreter fixed runs (minutes) started last
    would leave a core idle at the end of the run."""
    items.sort(key=lambda item: item.originalname != "test_fixed_runs_together")


def pytest_terminal_summary(terminalreporter):
    """Where a torch env's minutes went, one line a run: `time: TEST
    SECONDS` for each reproducer test (its stock run, or its runs alone),
    and `time: together NAME SECONDS` for each fixed run made together.
    tools/ci_table.py reads them from a CI log."""
    lines = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call" or "test_reproducers.py" not in report.nodeid:
                continue
            lines.append("time: %s %.1f" % (report.nodeid.split("::", 1)[1], report.duration))
            for key, value in report.user_properties:
                if key == "together":
                    lines += ["time: together %s %.1f" % item for item in sorted(value.items())]
    if lines:
        terminalreporter.section("reproducer times")
        for line in sorted(lines):
            terminalreporter.write_line(line)
