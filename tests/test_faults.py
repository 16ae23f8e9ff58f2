"""Fault injection: the host program completes, torch stays as shipped, and
`torch-backports status` (in a new process, as a user would run it) shows why.

The missing or broken dependency faults put a shadowing package first on
PYTHONPATH, so the host program and the status probe both see it.
"""

import json
import shutil
from pathlib import Path

import pytest

from conftest import FAKE_TORCH, SITE_PACKAGES, fx_record, last_json, run_python

pytestmark = pytest.mark.usefixtures("installed")

# A host program: it uses the (fake) inductor, then does real work.
HOST = """
import json, sys
import torch._inductor
try:
    import torch._inductor.codecache as codecache
    pickler = getattr(codecache, "FxGraphCachePickler", None)
    dumps = pickler.__dict__.get("dumps") if pickler else None
    patched = "FunctionWrapper" in type(dumps).__name__
except ImportError as exc:
    patched = None
print(json.dumps({"patched": patched, "work": sum(range(10))}))
"""

SHADOWS = {
    # wrapt is imported only by a backport that wraps a function, as
    # fx-graph-cache-pickling does: it fails, with the reason, when applied.
    "wrapt-missing": ("wrapt", "raise ImportError('No module named wrapt (shadowed for a test)')\n",
                      "ImportError: No module named wrapt"),
    "wrapt-raises": ("wrapt", "raise RuntimeError('wrapt is broken (shadowed for a test)')\n",
                     "RuntimeError: wrapt is broken"),
}


def shadow(tmp_path, package, body):
    folder = tmp_path / "shadow" / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(body)
    return str(tmp_path / "shadow")


def status_json(env):
    done = run_python("from torch_backports._cli import main; main(['status', '--json'])",
                      env=env, fake_torch=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def host(env):
    done = run_python(HOST, env=env, fake_torch=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return last_json(done.stdout)


@pytest.mark.parametrize("fault", sorted(SHADOWS))
def test_broken_dependencies(fault, tmp_path):
    package, body, reason = SHADOWS[fault]
    env = {"FAKE_TORCH_VERSION": "2.10.0",
           "PYTHONPATH": shadow(tmp_path, package, body) + ":" + str(FAKE_TORCH)}
    assert host(env) == {"patched": False, "work": 45}
    row = fx_record(status_json(env)["backports"])
    assert row["state"] == "failed" and reason in row["reason"], row


def test_a_broken_packaging_changes_nothing(tmp_path):
    """torch-backports reads torch's version without packaging, so a
    missing or broken one (a common state of old images) does not matter."""
    body = "raise ImportError('No module named packaging (shadowed for a test)')\n"
    env = {"FAKE_TORCH_VERSION": "2.10.0",
           "PYTHONPATH": shadow(tmp_path, "packaging", body) + ":" + str(FAKE_TORCH)}
    assert host(env) == {"patched": True, "work": 45}
    assert fx_record(status_json(env)["backports"])["state"] == "applied"


@pytest.mark.parametrize("fault, reason", [
    ("no-pickler", "FxGraphCachePickler"),
    ("no-bypass", "BypassFxGraphCache"),
    ("no-dumps", "defines no dumps"),
    ("dumps-not-function", "not a function"),
    ("dumps-signature", "is not (self, obj)"),
    ("garbage-version", "not a valid version"),
    ("version-not-str", "not a string"),
])
def test_torch_api_drift_shows_in_status(fault, reason):
    env = {"FAKE_TORCH_VERSION": "2.10.0", "FAKE_TORCH_FAULT": fault}
    assert host(env) == {"patched": False, "work": 45}
    row = fx_record(status_json(env)["backports"])
    assert row["state"] == "failed" and reason in row["reason"], row


def test_codecache_missing():
    env = {"FAKE_TORCH_VERSION": "2.10.0", "FAKE_TORCH_FAULT": "no-codecache"}
    assert host(env) == {"patched": None, "work": 45}
    report = status_json(env)
    assert "No module named 'torch._inductor.codecache'" in report["new_process"]["import_error"]
    assert fx_record(report["backports"])["state"] == "pending"


def test_import_torch_raising():
    env = {"FAKE_TORCH_FAULT": "import-raises"}
    done = run_python("try:\n    import torch\nexcept RuntimeError:\n    print('host handled it')\n",
                      env=env, fake_torch=True)
    assert done.stdout.strip() == "host handled it" and done.stderr == ""
    report = status_json(env)
    assert "fails on purpose" in report["new_process"]["import_error"]


def test_second_copy_on_sys_path(tmp_path):
    """A second copy, first on sys.path and with its own .pth in a site dir."""
    copy = tmp_path / "copy"
    import torch_backports

    shutil.copytree(Path(torch_backports.__file__).parent, copy / "torch_backports")
    shutil.copy(Path(SITE_PACKAGES) / "torch_backports.pth", copy)
    code = ("import site; site.addsitedir(%r)\n" % str(copy)) + HOST + (
        "import torch_backports, sys\n"
        "d = codecache.FxGraphCachePickler.__dict__['dumps']\n"
        "print(json.dumps({'once': not hasattr(d.__wrapped__, '__wrapped__'),"
        " 'from': torch_backports.__file__, 'state': torch_backports.status()[0]['state']}))\n")
    env = {"FAKE_TORCH_VERSION": "2.10.0", "PYTHONPATH": "%s:%s" % (copy, FAKE_TORCH)}
    done = run_python(code, env=env)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0] == {"patched": True, "work": 45}
    assert lines[1]["once"] and lines[1]["state"] == "applied"
    assert lines[1]["from"].startswith(str(copy))


def test_changed_target_function_is_unrecognised_and_untouched():
    """The fake fake_tensor's check has a fingerprint no release has: the
    backport refuses it at the function's first call (the check is put off
    until then), after which the host sees the function it shipped, and
    status names the fingerprint."""
    code = ("import json, torch, torch._subclasses.fake_tensor as ft\n"
            "ft._check_for_subclass_arg(1)\n"
            "print(json.dumps({'shipped': ft._check_for_subclass_arg.__code__.co_filename"
            " == ft.__file__ and not hasattr(ft._check_for_subclass_arg,"
            " '_torch_backports_replacement')}))\n")
    done = run_python(code, env={"FAKE_TORCH_VERSION": "2.10.0"}, fake_torch=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert last_json(done.stdout) == {"shipped": True}
    rows = {r["name"]: r for r in status_json({"FAKE_TORCH_VERSION": "2.10.0"})["backports"]}
    row = rows["fake-tensor-parameter-subclass"]
    assert row["state"] == "unrecognised", row
    assert "matches no verified release" in row["reason"] and "untouched" in row["reason"]
