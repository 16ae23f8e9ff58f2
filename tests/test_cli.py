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
    assert "no backport named no-such-backport" in done.stderr
    assert "Traceback" not in done.stderr
