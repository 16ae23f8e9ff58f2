"""torch_backports.require(), in fresh interpreters on the fake torch.

The fake torch imitates one target fully (torch._inductor.codecache, for
fx-graph-cache-pickling) and one as a vendor build would have it
(torch._subclasses.fake_tensor, whose fingerprint no release has); it has
no torch.library, so library-define-qualified-name's target fails to import.
"""

import json
import pickle

import pytest

from conftest import FAKE_TORCH, SITE_PACKAGES, last_json, run_python

pytestmark = pytest.mark.usefixtures("installed")

FX = "fx-graph-cache-pickling"

# Calls require(*argv names) and prints what happened, as JSON.
REQUIRE = """
import json, sys
import torch_backports
names = %r
before = sorted(m for m in sys.modules if m.split(".")[0] == "torch")
try:
    torch_backports.require(*names)
    result = {"ok": True}
except torch_backports.BackportNotInEffect as exc:
    result = {"ok": False, "message": str(exc), "missing": exc.missing,
              "runtime_error": isinstance(exc, RuntimeError)}
result["before"] = before
result["after"] = sorted(m for m in sys.modules if m.split(".")[0] == "torch")
result["startup"] = torch_backports._startup_state
print(json.dumps(result))
"""


def require(*names, env=None, prefix="", flags=()):
    code = prefix + REQUIRE % (names,)
    done = run_python(code, env=dict({"FAKE_TORCH_VERSION": "2.10.0"}, **(env or {})),
                      fake_torch=not flags, flags=flags)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return last_json(done.stdout)


def test_an_applied_fix_passes_and_require_imports_its_target():
    result = require(FX)
    assert result["ok"], result
    assert "torch._inductor.codecache" not in result["before"]
    assert "torch._inductor.codecache" in result["after"]


def test_a_fix_torch_ships_passes_even_with_torch_backports_off():
    shipped = require(FX, env={"FAKE_TORCH_VERSION": "2.11.0"})
    assert shipped["ok"], shipped
    # Nothing to hook: its target (inductor's codecache) is not imported for it.
    assert "torch._inductor.codecache" not in shipped["after"]
    # The fix is torch's own there: turning torch-backports off changes nothing.
    assert require(FX, env={"FAKE_TORCH_VERSION": "2.11.0", "TORCH_BACKPORTS_DISABLE": "1"})["ok"]


@pytest.mark.parametrize("version, ok", [("2.11.0a0+git8145d63", True), ("2.11.0rc1", True),
                                         ("2.11.0", True)])
def test_require_agrees_with_status_on_a_build_judged_by_its_code(version, ok):
    """On a pre-release of the fix's release the patch decides, and require
    says what status says; under TORCH_BACKPORTS_DISABLE=1 the fix is then
    not in effect (the release number alone does not say it ships)."""
    result = require(FX, env={"FAKE_TORCH_VERSION": version})
    assert result["ok"] is ok, result
    off = require(FX, env={"FAKE_TORCH_VERSION": version, "TORCH_BACKPORTS_DISABLE": "1"})
    assert off["ok"] is (version == "2.11.0"), off


def test_names_are_matched_as_the_opt_out_matches_them():
    assert require("FX_Graph_Cache_Pickling", " fx-graph-cache-pickling ")["ok"]


def test_disabled_by_name_raises_naming_the_variable():
    result = require(FX, env={"TORCH_BACKPORTS_DISABLE": FX})
    assert not result["ok"] and result["runtime_error"]
    assert result["missing"] == {FX: ["disabled", "TORCH_BACKPORTS_DISABLE lists " + FX]}
    assert result["message"] == (
        "1 required torch fix is not in effect in this process (torch 2.10.0, torch-backports "
        "2.0.0.dev0):\n  fx-graph-cache-pickling: disabled: TORCH_BACKPORTS_DISABLE lists "
        "fx-graph-cache-pickling")


def test_everything_disabled_raises_and_imports_no_target():
    result = require(FX, env={"TORCH_BACKPORTS_DISABLE": "1"}, prefix="import torch\n")
    assert result["missing"][FX][0] == "disabled"
    assert "TORCH_BACKPORTS_DISABLE turned every backport off" in result["missing"][FX][1]
    assert "torch._inductor.codecache" not in result["after"]


def test_an_unknown_name_raises_the_same_type_with_near_names():
    result = require("fx-graph-cache-picklin", FX)
    assert not result["ok"]
    assert list(result["missing"]) == ["fx-graph-cache-picklin"]  # the known one is in effect
    state, reason = result["missing"]["fx-graph-cache-picklin"]
    assert state == "unknown"
    assert "has no backport of that name" in reason
    assert "did you mean 'fx-graph-cache-pickling'?" in reason
    far = require("no-such-fix")["missing"]["no-such-fix"]
    assert far[0] == "unknown" and "did you mean" not in far[1]


def test_an_unknown_name_alone_imports_nothing():
    result = require("no-such-fix")
    assert result["before"] == result["after"] == []


def test_an_unrecognised_fingerprint_raises_with_it():
    result = require("fake-tensor-parameter-subclass")
    state, reason = result["missing"]["fake-tensor-parameter-subclass"]
    assert state == "unrecognised"
    assert "matches no verified release" in reason and "torch left untouched" in reason


def test_a_build_that_carries_the_fix_passes():
    """A vendor build whose function has the fixed release's fingerprint:
    the fake fake_tensor's fingerprint is made the fixed one."""
    # The file is loaded under another name, so that its import runs no hook.
    prefix = ("import importlib.util\n"
              "from torch_backports import _fingerprint\n"
              "from torch_backports.backports import fake_tensor_parameter_subclass as b\n"
              "spec = importlib.util.spec_from_file_location('copy', %r)\n"
              "copy = importlib.util.module_from_spec(spec); spec.loader.exec_module(copy)\n"
              "b.FIXED[_fingerprint.of_function(copy._check_for_subclass_arg)] = 'a vendor'\n"
              % str(FAKE_TORCH / "torch" / "_subclasses" / "fake_tensor.py"))
    suffix = ("print(json.dumps([(r['state'], r['reason']) for r in torch_backports.status()"
              " if r['name'] == 'fake-tensor-parameter-subclass']))\n")
    done = run_python(prefix + REQUIRE % (("fake-tensor-parameter-subclass",),) + suffix,
                      env={"FAKE_TORCH_VERSION": "2.10.0"}, fake_torch=True)
    assert done.returncode == 0, done.stderr
    result, [(state, reason)] = [json.loads(line) for line in done.stdout.splitlines()[-2:]]
    assert result["ok"], result
    assert state == "not needed" and "this build carries the fix" in reason, reason


def test_a_release_older_than_the_backport_raises_not_covered():
    state, reason = require(FX, env={"FAKE_TORCH_VERSION": "2.5.1"})["missing"][FX]
    assert state == "not covered" and "predates the affected releases" in reason


def test_a_patch_that_failed_raises_failed():
    state, reason = require(FX, env={"FAKE_TORCH_FAULT": "no-dumps"})["missing"][FX]
    assert state == "failed" and "defines no dumps" in reason


def test_a_target_that_fails_to_import_is_reported_not_raised():
    # The fake torch has no torch.library.
    state, reason = require("library-define-qualified-name")["missing"][
        "library-define-qualified-name"]
    assert state == "pending"
    assert "importing its target torch.library raised ModuleNotFoundError" in reason


def test_every_missing_fix_is_named_in_the_order_asked():
    result = require("fake-tensor-parameter-subclass", FX, "nope",
                     env={"TORCH_BACKPORTS_DISABLE": FX})
    assert list(result["missing"]) == ["fake-tensor-parameter-subclass", FX, "nope"]
    lines = result["message"].splitlines()
    assert lines[0].startswith("3 required torch fixes are not in effect")
    assert [line.split(":")[0].strip() for line in lines[1:]] == list(result["missing"])


def test_requiring_one_target_imports_no_other():
    """A fix outside inductor must not import inductor."""
    result = require("fake-tensor-parameter-subclass")
    assert "torch._subclasses.fake_tensor" in result["after"]
    assert not any(m.startswith("torch._inductor") for m in result["after"])


NO_SITE = "import sys; sys.path[:0] = [%r, %r]\n" % (str(FAKE_TORCH), SITE_PACKAGES)


def test_without_the_startup_hook_torch_imported_first_reads_not_installed():
    result = require(FX, prefix=NO_SITE + "import torch\n", flags=["-S"])
    state, reason = result["missing"][FX]
    assert state == "not installed" and result["startup"] == "idle"
    assert "call torch_backports.install() before importing torch" in reason
    assert "torch._inductor.codecache" not in result["after"]  # nothing would patch it


def test_without_the_startup_hook_require_before_torch_arms_it():
    result = require(FX, prefix=NO_SITE, flags=["-S"])
    assert result["ok"] and result["startup"] == "armed"


def test_without_the_startup_hook_a_fix_torch_ships_still_passes():
    result = require(FX, prefix=NO_SITE + "import torch\n", flags=["-S"],
                     env={"FAKE_TORCH_VERSION": "2.11.0"})
    assert result["ok"] and result["startup"] == "idle"


def test_the_exception_is_exported_and_pickles_with_its_data():
    import torch_backports
    from torch_backports import BackportNotInEffect

    assert "require" in torch_backports.__all__ and "BackportNotInEffect" in torch_backports.__all__
    assert issubclass(BackportNotInEffect, RuntimeError)
    assert BackportNotInEffect.__module__ == "torch_backports"
    exc = BackportNotInEffect({FX: ("disabled", "TORCH_BACKPORTS_DISABLE lists " + FX)})
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is BackportNotInEffect
    assert copy.missing == exc.missing and str(copy) == str(exc)
    with pytest.raises(AttributeError):
        torch_backports.NoSuchThing  # noqa: B018


def test_bad_calls_are_type_errors():
    import torch_backports

    with pytest.raises(TypeError, match="at least one"):
        torch_backports.require()
    with pytest.raises(TypeError, match="as str"):
        torch_backports.require(["fx-graph-cache-pickling"])


def test_start_up_loads_nothing_of_require():
    done = run_python("import sys, torch_backports; print(sorted(m for m in sys.modules"
                      " if m.startswith('torch_backports')))")
    assert done.stdout.split() == ["['torch_backports']"]
