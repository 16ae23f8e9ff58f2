"""tools/ci_table.py reads a CI log: .ci/run's own lines, tox's summary and
the torch envs' reproducer times."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import ci_table  # noqa: E402

LOG = """\
ci: started 2026-12-07T20:00:00Z, 2 cores, load 0.10
py311: commands[0]> pytest -q tests
py311: OK \u2714 in 29.83 seconds
torch213: install_deps> uv pip install torch==2.13.0
torch213: commands[0]> pytest -q -n 2 tests/integration
=============================== reproducer times ===============================
time: test_fixed_runs_together 80.6
time: test_reproducer[inductor-mul-zero-nan] 31.5
time: test_reproducer[library-define-qualified-name] 3.4
time: together inductor-mul-zero-nan 6.2
time: together library-define-qualified-name 0.3
torch213: OK \u2714 in 6 minutes 2.5 seconds
disk: least free during the run 51200 MB
ci: ended 2026-12-07T20:40:00Z, load 1.90
  py311: OK (29.83=setup[2.03]+cmd[27.80] seconds)
  torch213: OK (362.50=setup[52.50]+cmd[310.00] seconds)
  congratulations :) (392.33 seconds)
"""


def test_parse_reads_each_part():
    run = ci_table.parse(LOG)
    assert (run.started, run.cores, run.load_start) == ("2026-12-07T20:00:00Z", "2", "0.10")
    assert (run.ended, run.load_end, run.disk_least_free_mb) == ("2026-12-07T20:40:00Z", "1.90",
                                                                 51200)
    assert [(e.name, e.status, e.total, e.setup) for e in run.envs] == [
        ("py311", "OK", 29.83, 2.03), ("torch213", "OK", 362.5, 52.5)]
    assert run.times["torch213"]["together inductor-mul-zero-nan"] == 6.2
    assert "py311" not in run.times


def test_table_and_costs():
    run = ci_table.parse(LOG)
    text = ci_table.table(run)
    assert "| `torch213` | OK | 52 | 310 | 6.0 | 2, 6 | 2, 35 |" in text
    assert "least free disk 50.0 GB" in text and "6.5 minutes" in text
    costs = ci_table.costs(run)
    assert "3.2 s in-process (median of 2)" in costs
    assert "17.4 s (median of 2" in costs
