"""Start-up, versions, opt-out and faults in fresh interpreters, on the fake torch.

Each test starts an interpreter of this (tox) environment, where site runs
the installed torch_backports.pth, with tests/fake_torch on PYTHONPATH.
"""

import json

import pytest

from conftest import FAKE_TORCH, SITE_PACKAGES, fx_record, last_json, run_python

pytestmark = pytest.mark.usefixtures("installed")

# Imports the fake inductor as torch.compile would, then reports. The program
# itself never calls into torch_backports before reading the status.
REPORT = """
import json, sys
import torch._inductor.codecache as codecache
pickler = getattr(codecache, "FxGraphCachePickler", None)
dumps = pickler.__dict__.get("dumps") if pickler else None
import torch_backports
print(json.dumps({
    "records": torch_backports.status(),
    "patched": "FunctionWrapper" in type(dumps).__name__,
    "startup": torch_backports._startup_state,
}))
"""


def report(env=None, code=REPORT, flags=()):
    done = run_python(code, env=env, fake_torch=True, flags=flags)
    assert done.returncode == 0, done.stderr
    return last_json(done.stdout), done


def state_of(result):
    record = fx_record(result["records"])
    return record["state"], record["reason"]


@pytest.mark.parametrize("version, state, patched", [
    ("2.9.1", "applied", True),
    ("2.10.0", "applied", True),
    ("2.11.0", "not needed", False),
    ("2.13.0+cpu", "not needed", False),
    ("2.5.1", "not covered", False),
    # A pre-release, dev or source build of the first fixed release (2.11.0)
    # may predate the fix: its code decides, and the fake's code, which the
    # wrapper recognises, is patched.
    ("2.11.0a0+git8145d63", "applied", True),
    ("2.11.0rc1", "applied", True),
    ("2.11.0.dev20260101", "applied", True),
    # Past the first fixed release, the release decides, however built.
    ("2.12.0a0+git8145d63", "not needed", False),
    ("2.11.0+cu128", "not needed", False),
])
def test_release_decides(version, state, patched):
    result, done = report({"FAKE_TORCH_VERSION": version})
    assert state_of(result)[0] == state
    assert result["patched"] is patched
    assert result["startup"] == "armed"
    assert done.stderr == ""


@pytest.mark.parametrize("version", [
    "2.10.0+cu128", "2.10.0+cpu", "2.10.0a0+git449b176", "2.10.0.dev20260101", "2.10.0rc1",
])
def test_every_build_of_2_10_is_patched(version):
    result, _ = report({"FAKE_TORCH_VERSION": version})
    assert state_of(result)[0] == "applied" and result["patched"]


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "all", "fx-graph-cache-pickling"])
def test_opt_out_gives_stock_torch(value):
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0", "TORCH_BACKPORTS_DISABLE": value})
    assert state_of(result)[0] == "disabled"
    assert not result["patched"]


@pytest.mark.parametrize("value", ["", "0", "false", "no", "off"])
def test_enabled_values(value):
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0", "TORCH_BACKPORTS_DISABLE": value})
    assert state_of(result)[0] == "applied"


@pytest.mark.parametrize("value", ["nope", "\x1b[31mred", "$(id)", ";;", "a,b,,c", "é" * 300])
def test_garbage_opt_out_warns_and_never_tracebacks(value):
    result, done = report({"FAKE_TORCH_VERSION": "2.10.0", "TORCH_BACKPORTS_DISABLE": value})
    assert state_of(result)[0] == "applied"
    assert "Traceback" not in done.stderr


def test_unknown_name_is_a_warning_on_our_logger():
    code = "import logging; logging.basicConfig(format='%(name)s:%(levelname)s:%(message)s')\n"
    done = run_python(code + REPORT, env={"FAKE_TORCH_VERSION": "2.10.0",
                                          "TORCH_BACKPORTS_DISABLE": "not-a-backport"},
                      fake_torch=True)
    assert "torch_backports:WARNING:TORCH_BACKPORTS_DISABLE names no backport 'not-a-backport'" \
        in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("variable", ["TORCH_BACKPORTS_DISABLE", "TORCH_BACKPORTS_ENABLE"])
def test_a_misspelt_name_in_the_variables_gets_the_nearest_one(variable):
    code = "import logging; logging.basicConfig(format='%(name)s:%(levelname)s:%(message)s')\n"
    done = run_python(code + REPORT, env={"FAKE_TORCH_VERSION": "2.10.0",
                                          variable: "fx-graph-cache-pickles"},
                      fake_torch=True)
    assert ("%s names no backport 'fx-graph-cache-pickles'; did you mean "
            "'fx-graph-cache-pickling'?" % variable) in done.stderr
    assert "einops-allow-in-graph" not in done.stderr


def test_opt_out_is_read_when_inductor_loads():
    code = "import os; os.environ['TORCH_BACKPORTS_DISABLE'] = '1'\n" + REPORT
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=code)
    assert state_of(result)[0] == "disabled" and not result["patched"]


def test_armed_by_torch_but_pending_until_the_target_is_imported():
    """The hooks arm when torch starts to import; a backport's own module
    loads only when its target does, and wrapt only for a backport that
    wraps a function."""
    code = ("import json, sys, torch_backports\n"
            "before = torch_backports._startup_state\n"
            "import torch\n"
            "loaded = sorted(m for m in sys.modules if m.startswith('torch_backports.backports.'))\n"
            "print(json.dumps([before, torch_backports._startup_state, 'wrapt' in sys.modules,"
            " loaded, torch_backports.status()]))")
    (before, after, wrapt, loaded, records), _ = report({"FAKE_TORCH_VERSION": "2.10.0"},
                                                        code=code)
    assert (before, after, wrapt) == ("watching", "armed", False)
    assert loaded == []
    assert records[0]["state"] == "pending"


@pytest.mark.parametrize("version, state, loaded", [("2.11.0", "not needed", False),
                                                     ("2.5.1", "not covered", False),
                                                     ("2.10.0", "applied", True)])
def test_a_release_outside_the_range_is_judged_without_the_backports_module(version, state,
                                                                            loaded):
    code = ("import json, sys, torch._inductor.codecache, torch_backports\n"
            "print(json.dumps(['torch_backports.backports.fx_graph_cache_pickling' in sys.modules,"
            " torch_backports.status()]))")
    (was_loaded, records), _ = report({"FAKE_TORCH_VERSION": version}, code=code)
    record = next(r for r in records if r["name"] == "fx-graph-cache-pickling")
    assert (record["state"], was_loaded) == (state, loaded), record


def test_late_install_after_inductor_is_imported():
    code = ("import sys; sys.path[:0] = [%r, %r]\n"
            "import torch._inductor.codecache\n"
            "import torch_backports; torch_backports.install(); torch_backports.install()\n"
            % (str(FAKE_TORCH), SITE_PACKAGES)) + REPORT
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=code, flags=["-S"])
    assert state_of(result)[0] == "applied" and result["patched"]


def test_no_site_means_inactive():
    code = ("import sys; sys.path[:0] = [%r, %r]\n" % (str(FAKE_TORCH), SITE_PACKAGES)) + REPORT
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=code, flags=["-S"])
    assert state_of(result)[0] == "pending" and not result["patched"]
    assert result["startup"] == "idle"


def test_pth_processed_twice_patches_once():
    code = "import site; site.addsitedir(%r); site.addsitedir(%r)\n" % (
        SITE_PACKAGES, SITE_PACKAGES) + REPORT + (
        "import torch_backports._activate as a, sys\n"
        "w = [f for f in sys.meta_path if getattr(f, 'torch_backports_watcher', False)]\n"
        "print(json.dumps({'dumps_is_single_wrapper': not hasattr(dumps.__wrapped__, '__wrapped__'),"
        " 'watchers': len(w)}))\n")
    done = run_python(code, env={"FAKE_TORCH_VERSION": "2.10.0"}, fake_torch=True)
    assert done.returncode == 0, done.stderr
    assert last_json(done.stdout) == {"dumps_is_single_wrapper": True, "watchers": 0}


def test_sixteen_threads_import_at_once():
    code = """
import json, threading, sys
barrier = threading.Barrier(16)
seen = []
def work():
    barrier.wait()
    import torch._inductor.codecache as c
    seen.append(hasattr(c.FxGraphCachePickler.__dict__["dumps"], "__wrapped__"))
threads = [threading.Thread(target=work) for _ in range(16)]
[t.start() for t in threads]; [t.join() for t in threads]
import torch._inductor.codecache as c, torch_backports
d = c.FxGraphCachePickler.__dict__["dumps"]
print(json.dumps({"seen": seen, "once": not hasattr(d.__wrapped__, "__wrapped__"),
                  "state": torch_backports.status()[0]["state"]}))
"""
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=code)
    assert result == {"seen": [True] * 16, "once": True, "state": "applied"}


def test_import_torch_raising_is_the_hosts_own_error():
    code = ("import json\ntry:\n    import torch._inductor.codecache\nexcept RuntimeError as e:\n"
            "    print(json.dumps(str(e)))\n")
    result, done = report({"FAKE_TORCH_FAULT": "import-raises"}, code=code)
    assert result == "fake torch: import torch fails on purpose"
    assert "torch_backports" not in done.stderr


def test_status_cli_json_probes_a_new_process():
    code = "from torch_backports._cli import main; main(['status', '--json'])"
    done = run_python(code, env={"FAKE_TORCH_VERSION": "2.9.1"}, fake_torch=True)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["new_process"]["startup_state"] == "armed"
    assert data["backports"][0]["state"] == "applied"


# What a process has loaded of ours and of wrapt, and how far it armed.
LOADED = """
import json, sys, torch_backports
print(json.dumps([torch_backports._startup_state, sorted(
    m for m in sys.modules if m.split(".")[0] in ("torch_backports", "wrapt", "torch"))]))
"""


@pytest.mark.parametrize("probe", [
    "import importlib.util; assert importlib.util.find_spec('torch') is not None",
    "import importlib.util; importlib.util.find_spec('torch'); importlib.util.find_spec('torch')",
    "import pkgutil; assert any(m.name == 'torch' for m in pkgutil.iter_modules())",
    # deprecated from 3.12 on (a DeprecationWarning), still called by older code
    "import warnings, pkgutil; warnings.simplefilter('ignore', DeprecationWarning); "
    "pkgutil.get_loader('torch')",
    "import importlib.metadata as m; [d.metadata for d in m.distributions()]",
])
def test_an_availability_probe_loads_nothing(probe):
    """transformers and others ask whether torch is installed at import; that
    must not arm torch-backports, since torch itself is not imported."""
    result, done = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=probe + "\n" + LOADED)
    assert result == ["watching", ["torch_backports"]], result
    assert done.stderr == ""


def test_everything_off_loads_nothing_when_torch_imports():
    code = "import torch._inductor.codecache\n" + LOADED + REPORT
    done = run_python(code, env={"FAKE_TORCH_VERSION": "2.10.0", "TORCH_BACKPORTS_DISABLE": "1"},
                      fake_torch=True)
    assert done.returncode == 0, done.stderr
    state, loaded = json.loads(done.stdout.splitlines()[0])
    assert state == "disabled"
    assert loaded == ["torch", "torch._inductor", "torch._inductor.codecache", "torch._utils",
                      "torch_backports"]
    result = last_json(done.stdout)
    assert state_of(result)[0] == "disabled" and not result["patched"]
    assert "when torch was imported" in state_of(result)[1]


def test_turning_everything_off_after_torch_imported_is_read_per_target():
    """Once armed, the variable is read as each target is imported."""
    code = ("import os, torch; os.environ['TORCH_BACKPORTS_DISABLE'] = '1'\n") + REPORT
    result, _ = report({"FAKE_TORCH_VERSION": "2.10.0"}, code=code)
    assert result["startup"] == "armed"
    assert state_of(result)[0] == "disabled" and not result["patched"]


@pytest.mark.parametrize("disable", ["1", "fx-graph-cache-pickling"])
@pytest.mark.parametrize("version, state", [
    ("2.10.0", "disabled"),        # needs the fix: the opt-out is what keeps it off
    ("2.11.0", "not needed"),      # ships the fix: opting out changes nothing
    ("2.5.1", "not covered"),      # predates the bug
])
def test_an_opt_out_reads_disabled_only_where_the_fix_is_needed(disable, version, state):
    result, _ = report({"FAKE_TORCH_VERSION": version, "TORCH_BACKPORTS_DISABLE": disable})
    assert state_of(result)[0] == state, state_of(result)
    assert not result["patched"]
