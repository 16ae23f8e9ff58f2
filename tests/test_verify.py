"""`torch-backports verify`'s reading of a reproducer's output and its verdicts."""

import json
import os
import subprocess

import pytest

from torch_backports import _verify
from torch_backports._backport import Backport

TRACEBACK = """W1203 some log line
Traceback (most recent call last):
  File "<string>", line 3, in <module>
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
CppCompileError: C++ compile error
"""


@pytest.mark.parametrize("stderr, expected", [
    (TRACEBACK, "BackendCompilerFailed"),
    ("Traceback (most recent call last):\n  File \"x\", line 1\nAssertionError\n", "AssertionError"),
    ("just a message\n", "just a message"),
    ("", "no output"),
])
def test_exception_line(stderr, expected):
    assert _verify.exception_line(stderr) == expected


def test_rank_prefixed_traceback():
    prefixed = "\n".join("[rank0]: " + line for line in TRACEBACK.splitlines())
    assert _verify.exception_line(prefixed) == "BackendCompilerFailed"


def test_last_said_is_the_whole_exception_line_or_the_last_line():
    assert _verify.last_said(TRACEBACK) == (
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:")
    assert _verify.last_said("[rank1]: Traceback (most recent call last):\n"
                             "[rank1]:   File \"x\", line 1\n"
                             "[rank1]: RuntimeError: shape '[1, 2]' is invalid\n") == (
        "RuntimeError: shape '[1, 2]' is invalid")
    assert _verify.last_said("one\ntwo\n\n") == "two"
    assert _verify.last_said("") == ""
    assert len(_verify.last_said("x" * 1000)) == _verify.PRINTED


def run(outcome, symptom=False, detail=""):
    return _verify.Run(outcome, detail, 1.0, symptom)


@pytest.mark.parametrize("stock, fixed, verdict, ok", [
    (run("crashed", True), run("ok"), "fixed", True),
    (run("crashed", False), run("ok"), "passes; stock torch failed without", True),
    (run("ok"), run("ok"), "not reproduced", True),
    (run("crashed", True), run("crashed", True), "FAILED", False),
    (run("crashed", True), run("timed out"), "FAILED", False),
    (run("skipped", detail="needs a C++ compiler"), run("skipped", detail="needs a C++ compiler"),
     "skipped: needs a C++ compiler", True),
])
def test_verdicts(stock, fixed, verdict, ok):
    result = _verify.judge("x", stock, fixed)
    assert result.verdict.startswith(verdict) and result.ok is ok


def test_a_skip_reads_as_the_reproducer_said_it():
    verdict = _verify.judge("x", run("skipped", detail="needs einops"), run("skipped", detail="needs einops"))
    assert verdict.verdict == "skipped: needs einops"


def verdict(outcome):
    if outcome == "skipped":
        return _verify.judge("x", run("skipped", detail="needs a C++ compiler"),
                             run("skipped", detail="needs a C++ compiler"))
    if outcome == "failed":
        return _verify.judge("x", run("crashed", True), run("crashed", True))
    return _verify.judge("x", run("crashed", True), run("ok"))


@pytest.mark.parametrize("outcomes, status, checked, message", [
    (["fixed", "fixed"], _verify.PASSED, 2, "passed (2 checked)"),
    (["fixed", "skipped"], _verify.PASSED, 1, "passed (1 checked, 1 skipped)"),
    (["skipped", "skipped"], _verify.NOTHING_CHECKED, 0, "checked nothing: every reproducer"),
    ([], _verify.NOTHING_CHECKED, 0, "checked nothing: this torch needs no backport"),
    (["fixed", "failed", "skipped"], _verify.FAILED, 2, "FAILED"),
])
def test_a_run_that_checked_nothing_is_not_a_pass(outcomes, status, checked, message):
    outcome = _verify.summarise([verdict(o) for o in outcomes])
    assert (outcome.status, outcome.checked) == (status, checked)
    assert outcome.message.startswith(message)
    assert len({_verify.PASSED, _verify.FAILED, _verify.NOTHING_CHECKED}) == 3


def test_named_backports_that_are_not_needed_are_not_said_to_be_all():
    outcome = _verify.summarise([], named=True)
    assert outcome.status == _verify.NOTHING_CHECKED
    assert outcome.message == ("checked nothing: this torch needs none of the backports "
                               "named (see why above)")


def test_table_cuts_long_cells():
    long = "needs a C++ compiler for inductor's CPU backend (" + "x" * 400 + ")"
    text = _verify.table([_verify.judge("x", run("skipped", detail=long), run("skipped", detail=long))],
                         [])
    assert max(len(line) for line in text.splitlines()) < 3 * _verify.CELL + 20



def test_each_run_has_its_own_temporary_folder_and_caches_removed_afterwards(tmp_path,
                                                                             monkeypatch):
    """A reproducer writes where it likes (torch's aot_builtins_*, inductor's
    cache); nothing of it is left, and the user's own cache is not used."""
    program = (
        "import json, os, tempfile\n"
        "folder = tempfile.mkdtemp(prefix='aot_builtins_')\n"
        "os.makedirs(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n"
        "print(json.dumps([tempfile.gettempdir(), os.getcwd(), folder,\n"
        "                  os.environ['TORCHINDUCTOR_CACHE_DIR'], os.environ['TRITON_CACHE_DIR']]))\n"
        "raise SystemExit(3)\n")
    backport = Backport(name="made-up", summary="", upstream=(), first_affected=(2, 0, 0),
                        first_fixed=(2, 1, 0), apply=None, reproducer=program, symptom="x")
    seen = []
    real_run = subprocess.run

    def spy(*args, **kwargs):
        done = real_run(*args, **kwargs)
        seen.append(json.loads(done.stdout))
        return done

    monkeypatch.setattr(_verify.subprocess, "run", spy)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users-own-cache"))
    run = _verify.run_reproducer(backport, stock=False)
    assert run.outcome == _verify.CRASHED
    temp, cwd, made, inductor, triton = seen[0]
    assert cwd == temp and made.startswith(temp) and inductor.startswith(temp)
    assert triton.startswith(temp) and "users-own-cache" not in inductor
    assert not os.path.exists(temp)


def test_runs_go_in_parallel_and_verdicts_keep_their_order(monkeypatch):
    """Two jobs: the four runs of two backports overlap in time, and each
    verdict pairs its own stock and fixed run."""
    import threading
    import time as clock

    running, most = [0], [0]
    lock = threading.Lock()

    def fake_run(backport, stock, timeout=0, cpu_check=False):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        clock.sleep(0.2)
        with lock:
            running[0] -= 1
        crashed = stock and backport.name == "b"
        return _verify.Run("crashed" if crashed else "ok", "", 0.2, crashed)

    monkeypatch.setattr(_verify, "run_reproducer", fake_run)
    monkeypatch.setattr(_verify._registry, "load", lambda name: Backport(
        name=name, summary="", upstream=(), first_affected=(2, 0, 0), first_fixed=(3, 0, 0),
        apply=lambda m, r: (lambda: None), reproducer="", symptom=""))
    lines = []
    verdicts = _verify.verify(["a", "b"], "2.13.0", lines.append, jobs=2, chosen=["a", "b"])
    assert most[0] == 2
    assert [(v.name, v.verdict) for v in verdicts] == [
        ("a", "not reproduced: stock torch passes too (this build may carry the fix)"),
        ("b", "fixed")]
    assert len(lines) == 4 and lines[-1].startswith("[4/4] ")


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_long_run_gets_a_line_at_least_every_heartbeat(monkeypatch, jobs):
    import time as clock

    def slow_run(backport, stock, timeout=0, cpu_check=False):
        clock.sleep(0.5)
        return _verify.Run("ok", "", 0.5, False)

    monkeypatch.setattr(_verify, "HEARTBEAT", 0.1)
    monkeypatch.setattr(_verify, "run_reproducer", slow_run)
    monkeypatch.setattr(_verify._registry, "load", lambda name: Backport(
        name=name, summary="", upstream=(), first_affected=(2, 0, 0), first_fixed=(3, 0, 0),
        apply=lambda m, r: (lambda: None), reproducer="", symptom=""))
    lines = []
    _verify.verify(["a"], "2.13.0", lines.append, jobs=jobs, chosen=["a"])
    beats = [line for line in lines if line.startswith("  still running: a, ")]
    assert len(beats) >= 2, lines
    assert lines[-1].startswith("[2/2] a, ")


def test_a_crash_a_program_explains_keeps_its_whole_line():
    """A program that says what ended its child ("... exit status -11")
    keeps that line whole in its result, which verify's progress prints."""
    said = ("register_hook on a view whose base changed in place ended the process with exit "
            "status -11\n")
    run = _verify.outcome_of(1, "", said, 1.0, "exit status -11")
    assert run.describe().endswith("exit status -11") and run.symptom


def test_default_jobs_is_the_usable_cores():
    assert _verify.default_jobs() >= 1


def test_a_gpu_reproducer_that_skips_is_proven_by_its_cpu_check(monkeypatch):
    def fake_run(backport, stock, timeout=0, cpu_check=False):
        if not cpu_check:
            return _verify.Run("skipped", "needs a CUDA GPU", 0.1, False)
        return _verify.Run("crashed" if stock else "ok", "", 0.1, stock)

    monkeypatch.setattr(_verify, "run_reproducer", fake_run)
    monkeypatch.setattr(_verify._registry, "load", lambda name: Backport(
        name=name, summary="", upstream=(), first_affected=(2, 0, 0), first_fixed=(3, 0, 0),
        apply=lambda m, r: (lambda: None), reproducer="", symptom="",
        cpu_check="print()" if name == "gpu" else ""))
    verdicts = _verify.verify([], "2.13.0", lambda line: None, jobs=2, chosen=["gpu", "other"])
    assert [(v.name, v.verdict) for v in verdicts] == [
        ("gpu", "CPU check: fixed"), ("other", "skipped: needs a CUDA GPU")]


def test_a_pre_release_of_the_fix_release_runs_its_reproducer():
    """verify's default selection on 2.11.0a0+git...: the fixes first
    released in 2.11.0 may be missing from it, so their reproducers run;
    on the release 2.11.0 they do not."""
    fixed_in_2_11 = [n for n in _verify._registry.names()
                     if _verify._registry.releases(n)[1] == (2, 11, 0)]
    assert fixed_in_2_11
    pre = _verify.selected([], "2.11.0a0+git8145d63")
    release = _verify.selected([], "2.11.0")
    assert set(fixed_in_2_11) <= set(pre) and not set(fixed_in_2_11) & set(release)
    assert not _verify.not_needed(fixed_in_2_11, "2.11.0rc1")
    assert len(_verify.not_needed(fixed_in_2_11, "2.11.0")) == len(fixed_in_2_11)
