"""Builds judged by their code, not their version string, on real wheels.

A pre-release, dev or source build of a backport's first fixed release
(NGC's 2.13.0a0+..., a nightly 2.15.0.devN, a 2.15.0rc1) may have been cut
before the fix landed. There the fingerprint of the code decides. These
tests take this env's real torch and change only its torch/version.py: the
package is copied as hard links (no space, seconds) into a folder put ahead
of site-packages on PYTHONPATH, and version.py alone is written anew. The
.pth in site-packages still arms torch-backports, as for a user.
"""

import json
import os
import re
import shutil
from importlib.util import find_spec

import pytest

import together
from conftest import last_json, run_interpreter, run_python
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports import _registry
from torch_backports._versions import release_of

# This env's release -> the version its code is made to report.
RELABELLED = {
    "2.10.0": "2.11.0a0+git8145d63",   # a source build cut before 2.11.0's fixes
    "2.14.1": "2.15.0.dev20260901",    # a nightly cut before 2.15.0's
    "2.15.0": "2.15.0rc1",             # a release candidate with every fix
}


@pytest.fixture(scope="module")
def relabelled(tmp_path_factory):
    """(PYTHONPATH, version): this env's torch reporting RELABELLED's version."""
    needs_torch()
    if EXPECTED not in RELABELLED:
        pytest.skip("torch %s is not one of the relabelled builds (%s)"
                    % (EXPECTED, ", ".join(RELABELLED)))
    version = RELABELLED[EXPECTED]
    site = tmp_path_factory.mktemp("relabelled")
    shutil.copytree(find_spec("torch").submodule_search_locations[0], site / "torch",
                    copy_function=os.link)
    path = site / "torch" / "version.py"
    text = path.read_text()
    path.unlink()  # a new file: the hard link's other names keep the original
    path.write_text(re.sub(r"(?m)^__version__\s*=.*$", "__version__ = %r" % version, text))
    return str(site), version


def states(pythonpath):
    done = run_interpreter(["-m", "torch_backports", "status", "--json"],
                           env={"PYTHONPATH": pythonpath}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    return report["torch"], {r["name"]: (r["state"], r["reason"]) for r in report["backports"]}


def test_the_code_decides_at_the_fix_release_and_require_agrees(relabelled):
    pythonpath, version = relabelled
    torch, found = states(pythonpath)
    assert torch == version
    release = release_of(version)
    at_the_fix = [n for n in _registry.names() if _registry.releases(n)[1] == release]
    assert at_the_fix
    # This env's code predates those fixes unless it is that release's own.
    wanted = "not needed" if release_of(EXPECTED) >= release else "applied"
    assert {n: found[n][0] for n in at_the_fix} == {n: wanted for n in at_the_fix}, found
    if wanted == "not needed":  # 2.15.0rc1: its code has every fix; nothing applies
        assert not [n for n, (state, _) in found.items()
                    if state in ("applied", "unrecognised", "failed")], found
    asked = run_python("import json, torch_backports\n"
                       "try:\n    torch_backports.require(*%r)\n    print(json.dumps('ok'))\n"
                       "except torch_backports.BackportNotInEffect as exc:\n"
                       "    print(json.dumps(exc.missing))\n" % (at_the_fix,),
                       env={"PYTHONPATH": pythonpath}, timeout=900)
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert last_json(asked.stdout) == "ok"


def test_the_fixes_applied_there_pass_their_reproducers(relabelled):
    """2.10.0's code reporting 2.11.0a0: the 2.11.0 fixes are applied, and
    their reproducers pass (made together, with every backport on)."""
    pythonpath, version = relabelled
    release = release_of(version)
    if EXPECTED != "2.10.0":
        # 2.14.1's patches are the ones its own env's reproducers prove;
        # 2.15.0's code has every fix.
        pytest.skip("the reproducers run relabelled on 2.10.0 only")
    backports = [_registry.load(n) for n in _registry.names()
                 if _registry.releases(n)[1] == release and not _registry.load(n).cpu_check]
    runs = together.run_together(backports, env={"PYTHONPATH": pythonpath})
    assert all(run.outcome == "ok" for run in runs.values()), runs

