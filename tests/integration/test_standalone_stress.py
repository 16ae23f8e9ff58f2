"""standalone-compile-atomic-save under load: one process saves an artifact
over and over while two others load it, as tensor-parallel ranks sharing an
artifact do. With torch-backports (or a release that ships the fix) no load
ever fails. (The reproducer shows the stock bug deterministically; a race
is not a reliable way to show it.)"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import child_env
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports._versions import release_of

SCRIPT = Path(__file__).with_name("standalone_stress.py")


def test_concurrent_saves_and_loads_never_fail(tmp_path):
    needs_torch()
    if release_of(EXPECTED) < (2, 8, 0):
        pytest.skip("standalone_compile is new in torch 2.8.0")
    path = str(tmp_path / "artifact.bin")
    env = child_env({"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")})
    procs = [subprocess.Popen([sys.executable, SCRIPT, *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for args in (("save", path), ("load", path, "300"), ("load", path, "300"))]
    saver, *loaders = procs
    results = [finish(proc) for proc in loaders]
    Path(path + ".stop").touch()
    saved = finish(saver)
    assert saved["done"] >= 10, saved
    for loaded in results:
        assert loaded["done"] == 300 and loaded["failed"] == 0, loaded


def finish(proc):
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])
