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


def reproduce(name, stock):
    run = _verify.run_reproducer(_registry.load(name), stock=stock)
    record(name, "stock" if stock else "with_torch_backports", run.describe())
    if run.outcome == _verify.SKIPPED:
        pytest.skip("%s's reproducer needs %s" % (name, run.detail))
    return run


def record(name, which, outcome):
    """Keep what a run printed for tests/matrix.py, which sets the folder."""
    folder = os.environ.get("TORCH_BACKPORTS_RESULTS_DIR")
    if folder:
        path = Path(folder) / (name + ".json")
        cell = json.loads(path.read_text()) if path.exists() else {}
        cell[which] = outcome
        path.write_text(json.dumps(cell))


@pytest.mark.parametrize("name", _registry.names())
def test_reproducer(name):
    needs_torch()
    backport = _registry.load(name)
    release = release_of(EXPECTED)
    if release < backport.first_affected:
        record(name, "state", "not covered")
        pytest.skip("torch %s predates %s (%s)" % (EXPECTED, name, backport.affects()))
    if backport.needed_by(release) and ci_plan.stock_run_here(backport, release):
        stock = reproduce(name, stock=True)
        assert stock.outcome == _verify.CRASHED and stock.symptom, (
            "stock torch %s should fail with %r: %s" % (EXPECTED, backport.symptom, stock))
    elif not ci_plan.fixed_run_here(backport, release):
        record(name, "state", "not needed")
        pytest.skip("torch %s ships %s's fix; checked on %s and %s" % (
            EXPECTED, name, format_release(backport.first_fixed),
            format_release(ci_plan.NEWEST)))
    fixed = reproduce(name, stock=False)
    assert fixed.outcome == _verify.OK, (
        "torch %s (fixed in %s) fails with torch-backports: %s"
        % (EXPECTED, format_release(backport.first_fixed), fixed))
