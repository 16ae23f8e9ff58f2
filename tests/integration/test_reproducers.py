"""Every backport's reproducer on the real wheel of this tox env.

On each release a backport claims, the reproducer passes with
torch-backports. On one claimed release per backport (tests/ci_plan.py:
2.13.0 where claimed), and on every release under `tox -e matrix` or
TORCH_BACKPORTS_STOCK_RUNS=all, it also fails with the upstream symptom
under TORCH_BACKPORTS_DISABLE=<name>. On a release that ships the fix (the
first fixed one, the newest) it passes with torch-backports installed, which
leaves that torch as shipped. These are the programs `torch-backports
verify` runs; none imports torch_backports.

The fixed runs of the reproducers are made together (tests/integration/
together.py): in two shared interpreters with every backport on, as a
user's process has them, by test_fixed_runs_together. A program that needs
an interpreter of its own (together.runs_alone), every stock run and every
CPU check run alone, in test_reproducer and test_cpu_check.
TORCH_BACKPORTS_TOGETHER=0 makes each fixed run alone too, in
test_reproducer (`-k NAME` then runs one backport's whole proof).
"""

import json
import os
from pathlib import Path

import pytest

import ci_plan
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
import together
from torch_backports import _registry, _verify
from torch_backports._backport import format_release
from torch_backports._versions import release_of


def reproduce(name, stock, cpu_check=False):
    run = _verify.run_reproducer(_registry.load(name), stock=stock, cpu_check=cpu_check)
    which = "stock" if stock else "with_torch_backports"
    record(name, "cpu_check_" + which if cpu_check else which, run.describe(), run.printed)
    if run.outcome == _verify.SKIPPED:
        pytest.skip("%s's %s needs %s" % (name, "CPU check" if cpu_check else "reproducer",
                                          run.detail))
    return run


def record(name, which, outcome, printed=""):
    """Keep what a run made of its cell (`outcome`, as verify describes it)
    and the line it printed last: in one JSON a backport in the folder
    tests/matrix.py sets (TORCH_BACKPORTS_RESULTS_DIR; `which` and
    `which`_printed), and in one file a run, those two lines, under
    <folder>/<release>/ where TORCH_BACKPORTS_CELLS_DIR names one (what a CI
    run made of each cell; it runs no more than CI does; tools/cells.py
    records the folder)."""
    folder = os.environ.get("TORCH_BACKPORTS_RESULTS_DIR")
    if folder:
        path = Path(folder) / (name + ".json")
        cell = json.loads(path.read_text()) if path.exists() else {}
        cell[which] = outcome
        if printed:
            cell[which + "_printed"] = printed
        path.write_text(json.dumps(cell))
    cells = os.environ.get("TORCH_BACKPORTS_CELLS_DIR")
    if cells:
        path = Path(cells) / EXPECTED / ("%s.%s.txt" % (name, which))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outcome + ("\n" + printed if printed else ""))


@pytest.mark.parametrize("name", _registry.names())
def test_reproducer(name):
    check(name, cpu_check=False)


@pytest.mark.parametrize("name", [n for n in _registry.names() if _registry.load(n).cpu_check])
def test_cpu_check(name):
    """A fix of GPU code, driven on the CPU (Backport.cpu_check): the same
    stock and fixed runs as its reproducer's, which needs a GPU."""
    check(name, cpu_check=True)


def together_here():
    """The backports whose fixed run this env makes in the shared
    interpreters (none under TORCH_BACKPORTS_TOGETHER=0)."""
    if not ci_plan.together():
        return []
    release = release_of(EXPECTED)
    return [b for b in map(_registry.load, _registry.names())
            if release >= b.first_affected and ci_plan.fixed_run_here(b, release)
            and together.runs_alone(b) is None]


def test_fixed_runs_together(record_property):
    """Every reproducer that can share an interpreter passes with
    torch-backports, all of them in two interpreters with every backport on.
    A run that fails there is made again alone, and the message says
    whether it failed alone too (a bug of that backport on this release)
    or only beside the others (backports that interfere)."""
    needs_torch()
    backports = together_here()
    if not backports:
        pytest.skip("no fixed run is made together here")
    before = {}
    runs = together.run_together(backports, before=before)
    record_property("together", {name: run.seconds for name, run in runs.items()})
    failed = []
    for backport in backports:
        run = runs[backport.name]
        record(backport.name, "with_torch_backports", run.describe(), run.printed)
        if run.outcome == _verify.SKIPPED:
            continue
        if run.outcome != _verify.OK:
            alone = _verify.run_reproducer(backport, stock=False)
            failed.append("%s: %s%s" % (backport.name, run, (
                "; alone it passes, so it fails only beside the other backports (its "
                "interpreter ran before it: %s)" % (", ".join(before[backport.name]) or "none")
                if alone.outcome == _verify.OK else "; alone too: %s" % (alone,))))
    skipped = sorted(n for n, r in runs.items() if r.outcome == _verify.SKIPPED)
    assert not failed, "torch %s fails with torch-backports, run together:\n%s" % (
        EXPECTED, "\n".join(failed))
    if skipped:
        # Shown in the summary line: what could not run here, and why.
        print("skipped together: " + "; ".join("%s (%s)" % (n, runs[n].detail) for n in skipped))


def check(name, cpu_check):
    needs_torch()
    backport = _registry.load(name)
    release = release_of(EXPECTED)
    if release < backport.first_affected:
        record(name, "state", "not covered")
        pytest.skip("torch %s predates %s (%s)" % (EXPECTED, name, backport.affects()))
    stock_here = backport.needed_by(release) and ci_plan.stock_run_here(backport, release,
                                                                         cpu_check)
    if stock_here:
        stock = reproduce(name, stock=True, cpu_check=cpu_check)
        wanted = backport.cpu_check_symptom if cpu_check else backport.symptom
        assert stock.outcome == _verify.CRASHED and stock.symptom, (
            "stock torch %s should fail with %r: %s" % (EXPECTED, wanted, stock))
    elif not ci_plan.fixed_run_here(backport, release):
        record(name, "state", "not needed")
        pytest.skip("torch %s ships %s's fix; checked on %s and %s" % (
            EXPECTED, name, format_release(backport.first_fixed),
            format_release(ci_plan.NEWEST)))
    if not cpu_check and name in {b.name for b in together_here()}:
        if stock_here:
            return
        pytest.skip("the fixed run is made in test_fixed_runs_together")
    fixed = reproduce(name, stock=False, cpu_check=cpu_check)
    assert fixed.outcome == _verify.OK, (
        "torch %s (fixed in %s) fails with torch-backports: %s"
        % (EXPECTED, format_release(backport.first_fixed), fixed))
