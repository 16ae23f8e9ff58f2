"""tools/gpu_run.py, the script for a lent GPU machine, without one: its
comparison of the train steps and its handling of a step that runs out of
time (a lent machine runs one command for at most 600 s)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import gpu_run  # noqa: E402

RUN = {"losses": [7.07, 7.04], "warnings": [], "log_warnings": [],
       "counters": {"inductor": {"fxgraph_cache_hit": 2}}}


def test_the_same_train_steps_show_no_difference():
    assert gpu_run.compare({"cold": RUN, "warm": RUN}, {"cold": RUN, "warm": RUN}) == []


def test_a_lost_cache_hit_a_warning_or_another_loss_is_a_difference():
    missed = dict(RUN, counters={"inductor": {"fxgraph_cache_miss": 2}})
    noisy = dict(RUN, warnings=["UserWarning: x"])
    other = dict(RUN, losses=[7.07, 7.5])
    found = gpu_run.compare({"cold": RUN, "warm": RUN}, {"cold": noisy, "warm": missed})
    assert any("warnings differ" in f for f in found) and any("counters differ" in f for f in found)
    assert any("losses differ" in f for f in gpu_run.compare({"cold": RUN}, {"cold": other}))


def test_a_failed_or_missing_run_is_a_difference():
    found = gpu_run.compare({"cold": {"failed": 1}, "warm": RUN}, {"cold": RUN})
    assert found == ["cold: a run failed (stock 1, fixed ok)",
                     "warm: a run failed (stock ok, fixed ok)"]


def test_a_step_that_runs_out_of_time_is_recorded_not_raised():
    done = gpu_run.sh([sys.executable, "-c", "import time; print('started', flush=True); "
                       "time.sleep(30)"], timeout=2)
    assert done.returncode == 124 and "timed out" in done.stderr


def test_each_step_gets_what_is_left_of_the_budget():
    clock = gpu_run.Clock(100)
    assert 99 < clock.left(300) <= 100 and clock.left(10) == 10
    assert gpu_run.Clock(-5).left(300) == 1.0
