"""Every backport's reproducer on the real wheel of this tox env.

On each release a backport claims, the reproducer passes with
torch-backports. On one claimed release per backport (tests/ci_plan.py:
2.13.0 where claimed), and on every release under `tox -e matrix` or
TORCH_BACKPORTS_STOCK_RUNS=all, it also fails with the upstream symptom
under TORCH_BACKPORTS_DISABLE=<name>. On a release that ships the fix (the
first fixed one, the newest) it passes with torch-backports installed, which
leaves that torch as shipped. These are the programs `torch-backports
verify` runs; none imports torch_backports.
"""

import json
import os
from pathlib import Path

import pytest

import ci_plan
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
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


def check(name, cpu_check):
    needs_torch()
    backport = _registry.load(name)
    release = release_of(EXPECTED)
    if release < backport.first_affected:
        record(name, "state", "not covered")
        pytest.skip("torch %s predates %s (%s)" % (EXPECTED, name, backport.affects()))
    if backport.needed_by(release) and ci_plan.stock_run_here(backport, release, cpu_check):
        stock = reproduce(name, stock=True, cpu_check=cpu_check)
        wanted = backport.cpu_check_symptom if cpu_check else backport.symptom
        assert stock.outcome == _verify.CRASHED and stock.symptom, (
            "stock torch %s should fail with %r: %s" % (EXPECTED, wanted, stock))
    elif not ci_plan.fixed_run_here(backport, release):
        record(name, "state", "not needed")
        pytest.skip("torch %s ships %s's fix; checked on %s and %s" % (
            EXPECTED, name, format_release(backport.first_fixed),
            format_release(ci_plan.NEWEST)))
    fixed = reproduce(name, stock=False, cpu_check=cpu_check)
    assert fixed.outcome == _verify.OK, (
        "torch %s (fixed in %s) fails with torch-backports: %s"
        % (EXPECTED, format_release(backport.first_fixed), fixed))
