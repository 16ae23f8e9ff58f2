"""torch_backports.require() on the real torch wheel of this tox env.

Each case runs in a new interpreter, where site processed the installed
torch_backports.pth, as in a library's process: the program imports torch,
calls require(), and prints the outcome and the message.
"""

import json
import os

import pytest

from conftest import last_json, run_interpreter
from torch_backports import _registry
from torch_backports._versions import release_of

EXPECTED = os.environ.get("TORCH_BACKPORTS_REAL_TORCH")
pytestmark = [
    pytest.mark.skipif(not EXPECTED or EXPECTED == "none",
                       reason="real-torch tests run in tox's torch envs"),
    pytest.mark.usefixtures("installed"),
]

# argv[1]: the names, as JSON. With FINGERPRINTS_UNKNOWN set, every
# fingerprint reads as unknown, as on a vendor build that changed each
# function (test_real_torch.py's REFUSING does the same).
PROGRAM = r"""
import json, os, sys
if os.environ.get("FINGERPRINTS_UNKNOWN"):
    from torch_backports import _fingerprint
    _fingerprint.of_source = lambda source: "0" * 16
import torch, torch_backports
names = json.loads(sys.argv[1])
inductor_before = "torch._inductor" in sys.modules
try:
    torch_backports.require(*names)
    result = {"ok": True}
except torch_backports.BackportNotInEffect as exc:
    result = {"ok": False, "message": str(exc), "missing": exc.missing}
result["inductor"] = [inductor_before, "torch._inductor" in sys.modules]
print(json.dumps(result))
"""

# Outside inductor, dynamo and distributed, so that requiring it must not
# import inductor.
LIGHT = ("library-define-qualified-name", "tensor-register-hook-stale-view",
         "fx-wrap-frame-cycle", "dataloader-worker-releases-dataset")


def release():
    return release_of(EXPECTED)


def first(wanted):
    """The first of the registry's light backports for which `wanted` holds
    on this release; skip if none."""
    for name in LIGHT:
        first_affected, first_fixed = _registry.releases(name)
        if wanted(first_affected, first_fixed):
            return name
    pytest.skip("torch %s has no such backport among %s" % (EXPECTED, ", ".join(LIGHT)))


def applied():
    return first(lambda affected, fixed: affected <= release() < fixed)


def shipped():
    for name in _registry.names():
        if release() >= _registry.releases(name)[1]:
            return name
    pytest.skip("torch %s ships none of the fixes" % EXPECTED)


def require(*names, env=None):
    done = run_interpreter(["-c", PROGRAM, json.dumps(names)], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    print(result.get("message", "require(%s) returned" % ", ".join(map(repr, names))))
    return result


def test_an_applied_fix_passes_without_importing_inductor():
    result = require(applied())
    assert result["ok"], result
    # `import torch` does not import inductor, nor does requiring a fix
    # whose target lies elsewhere.
    assert result["inductor"] == [False, False], result


def test_a_fix_torch_ships_passes():
    assert require(shipped())["ok"]


def test_a_fix_torch_ships_passes_with_torch_backports_off():
    assert require(shipped(), env={"TORCH_BACKPORTS_DISABLE": "1"})["ok"]


def test_a_disabled_fix_raises_naming_the_variable():
    name = applied()
    result = require(name, env={"TORCH_BACKPORTS_DISABLE": name})
    assert not result["ok"]
    assert result["missing"] == {name: ["disabled", "TORCH_BACKPORTS_DISABLE lists " + name]}
    assert result["message"].splitlines()[1] == (
        "  %s: disabled: TORCH_BACKPORTS_DISABLE lists %s" % (name, name))


def test_an_unknown_name_raises_with_near_names():
    name = applied()
    result = require(name[:-1])
    assert not result["ok"]
    state, reason = result["missing"][name[:-1]]
    assert state == "unknown" and "did you mean %r?" % name in reason


def test_an_unrecognised_fingerprint_raises():
    """library-define-qualified-name's check waits for Library.define's
    first call; require runs it, as status does, and reports the refusal."""
    name = "library-define-qualified-name"
    first_affected, first_fixed = _registry.releases(name)
    if not first_affected <= release() < first_fixed:
        pytest.skip("torch %s does not need %s" % (EXPECTED, name))
    result = require(name, env={"FINGERPRINTS_UNKNOWN": "1"})
    assert not result["ok"]
    state, reason = result["missing"][name]
    assert state == "unrecognised"
    assert "matches no verified release" in reason and "torch left untouched" in reason


def test_an_inductor_fix_imports_inductor():
    name = "inductor-noop-copy-of-mutated-input"
    first_affected = _registry.releases(name)[0]
    result = require(name)
    assert result["inductor"] == [False, True], result
    # Applied within its range, torch's own after it.
    assert result["ok"] is (release() >= first_affected), result
