"""The command line, in new interpreters of this environment (no torch here:
the unit envs have none, which is what a user without torch meets)."""

import json
import subprocess
import sys

import pytest

import torch_backports
from conftest import FAKE_TORCH, child_env, run_interpreter

pytestmark = pytest.mark.usefixtures("installed")


def cli(*args, env=None):
    return run_interpreter(["-m", "torch_backports", *args], env=env)


def test_version():
    done = cli("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == "torch-backports %s" % torch_backports.__version__


@pytest.mark.parametrize("command", ["status", "check", "verify"])
def test_a_wrong_option_prints_the_commands_own_usage(command):
    done = cli(command, "--bogus")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: torch-backports %s" % command), done.stderr
    assert "unrecognized arguments: --bogus" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["status", "-v"]])
def test_a_closed_pipe_is_quiet(args):
    """`torch-backports status | head -1`: the reader goes away early."""
    proc = subprocess.Popen([sys.executable, "-m", "torch_backports", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    proc.stdout.close()  # before the child writes anything
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, stderr
    assert stderr == ""


def test_status_puts_the_table_first():
    done = cli("status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("torch not installed, torch-backports ")
    assert lines[2].split() == ["backport", "affects", "state", "reason"]
    assert "torch is not installed here" in done.stdout
    assert "https://" not in done.stdout  # links only with -v
    verbose = cli("status", "-v")
    assert "https://github.com/pytorch/pytorch/" in verbose.stdout


def test_verify_without_torch_checked_nothing():
    done = cli("verify")
    assert done.returncode == 3
    assert "torch is not installed" in done.stdout
    as_json = cli("verify", "--json")
    assert as_json.returncode == 3
    data = json.loads(as_json.stdout)
    assert data["torch"] is None and data["checked"] == 0 and data["ok"] is False



def test_verify_refuses_an_unknown_name_as_bad_usage(tmp_path):
    """With a (fake) torch present, an unknown NAME is bad usage: exit 2."""
    done = cli("verify", "no-such-backport", env={"PYTHONPATH": str(FAKE_TORCH)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "no backport named 'no-such-backport'" in done.stderr
    assert "did you mean" not in done.stderr  # nothing is near it
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["verify", "diff"])
def test_a_misspelt_name_gets_the_nearest_one_not_the_catalogue(command):
    done = cli(command, "fx_graph_cache_pickles", env={"PYTHONPATH": str(FAKE_TORCH)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert ("no backport named 'fx_graph_cache_pickles' (did you mean "
            "'fx-graph-cache-pickling'?)") in done.stderr
    assert "einops-allow-in-graph" not in done.stderr  # not all the names
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("typed, meant", [("veryfy", "verify"), ("stauts", "status"),
                                          ("chek", "check"), ("dif", "diff")])
def test_a_misspelt_command_is_an_unknown_command(typed, meant):
    done = cli(typed)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "unknown command %r; did you mean %r?" % (typed, meant) in done.stderr
    assert "unrecognized arguments" not in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_command_far_from_any():
    done = cli("frobnicate")
    assert done.returncode == 2
    assert "unknown command 'frobnicate'" in done.stderr and "did you mean" not in done.stderr
    assert "status, check, verify, diff" in done.stderr


@pytest.mark.parametrize("args", [["--json"], ["-v"], ["--no-probe"], ["-v", "--no-probe"]])
def test_status_is_the_default_with_its_options(args):
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    if "--json" in args:
        assert json.loads(done.stdout)["torch"] is None
    else:
        assert done.stdout.startswith("torch not installed, torch-backports ")


def torch_of_release(folder, version):
    """The fake torch, with metadata that says it is `version` (verify reads
    the release from the metadata, without importing torch)."""
    info = folder / ("torch-%s.dist-info" % version)
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: %s\n" % version)
    return {"PYTHONPATH": "%s:%s" % (FAKE_TORCH, folder), "FAKE_TORCH_VERSION": version}


def test_verify_says_at_once_that_this_torch_ships_the_fix(tmp_path):
    """Torch 2.15.0 ships every fix: nothing is run, each row says since
    which release, and --anyway is named."""
    done = cli("verify", "inductor-mul-zero-nan", "fx-graph-cache-pickling",
               env=torch_of_release(tmp_path, "2.15.0"))
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "torch 2.15.0 ships this fix (since 2.14.0); --anyway runs it" in done.stdout
    assert "torch 2.15.0 ships this fix (since 2.11.0)" in done.stdout
    assert "stock torch (" not in done.stderr  # no run was started


def test_verify_says_at_once_that_this_torch_predates_the_bug(tmp_path):
    done = cli("verify", "inductor-mul-zero-nan", env=torch_of_release(tmp_path, "2.7.0"))
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "torch 2.7.0 predates the bug (inductor-mul-zero-nan affects >=2.8.0,<2.14.0)" \
        in done.stdout


@pytest.mark.parametrize("jobs", ["0", "x", "-1"])
def test_verify_jobs_must_be_a_positive_number(jobs):
    done = cli("verify", "-j", jobs)
    assert done.returncode == 2
    assert "expected a whole number of at least 1" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_module_holding_the_replaced_code_is_a_defect_status_and_check_report():
    """A module imported before the patch that bound the shipped function
    under its own name (torch_backports._stale): status says so, check fails."""
    env = {"PYTHONPATH": str(FAKE_TORCH), "FAKE_TORCH_FAULT": "stale-holder"}
    status = cli("status", "--json", env=env)
    assert status.returncode == 0, status.stderr
    (row,) = [r for r in json.loads(status.stdout)["backports"]
              if r["name"] == "fx-graph-cache-pickling"]
    assert row["state"] == "applied"
    assert row["stale"] == ["torch._inductor._stale_holder.dumps"]
    assert "torch._inductor._stale_holder.dumps still holds the code it replaced" in row["reason"]
    check = cli("check", env=env)
    assert check.returncode == 1
    assert "still holds the code it replaced" in check.stdout
    clean = cli("status", "--json", env={"PYTHONPATH": str(FAKE_TORCH)})
    assert all(r["stale"] == [] for r in json.loads(clean.stdout)["backports"])
