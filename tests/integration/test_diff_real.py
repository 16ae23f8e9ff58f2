"""`torch-backports diff` and status's hashes on a real torch wheel: the
paths and line numbers it prints are those of the installed files."""

import hashlib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from conftest import run_interpreter
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401

EDIT = "inductor-fused-mutation-read-alias"
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ (.*)$")


def torch_file(*parts):
    """A file of the installed torch, found without importing it."""
    return Path(importlib.util.find_spec("torch").origin).parent.joinpath(*parts)


def cli(*args):
    done = run_interpreter(["-m", "torch_backports", *args])
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def check_hunks(text, path):
    """Every hunk's context and removed lines are the file's lines at the
    numbers its @@ header gives; return the hunks' headers."""
    lines = path.read_text().splitlines()
    headers = []
    body = text.splitlines()
    for index, line in enumerate(body):
        match = HUNK.match(line)
        if not match:
            continue
        headers.append(line)
        start, count = int(match.group(1)), int(match.group(2) or 1)
        taken = []
        for b in body[index + 1:]:
            if b.startswith("@@") or not b[:1] in (" ", "-", "+"):
                break
            if b[:1] in (" ", "-"):
                taken.append(b[1:])
        assert len(taken) == count, (line, taken)
        assert taken == lines[start - 1:start - 1 + count], line
    assert headers, text
    return headers


def test_a_source_edit_is_shown_at_the_installed_files_lines():
    needs_torch()
    out = cli("diff", EDIT)
    if "== %s: applied" % EDIT not in out:
        pytest.skip("%s is not applied on torch %s: %s" % (EDIT, EXPECTED, out.strip()[-300:]))
    path = torch_file("_inductor", "scheduler.py")
    assert "\n--- %s\n" % path in out
    assert "\n+++ %s\t(as torch-backports runs it)\n" % path in out
    headers = check_hunks(out, path)
    assert all(h.endswith(" torch._inductor.scheduler.Scheduler.fusable_weak_dep")
               for h in headers)
    assert "\n-                if read.name == real_name\n" in out
    assert ("\n+                if self.mutation_real_name.get(read.name, read.name) == real_name\n"
            in out)


def test_status_json_hashes_the_installed_and_the_running_text():
    needs_torch()
    report = json.loads(cli("diff", "--json", EDIT))
    (row,) = report["backports"]
    if row["state"] != "applied":
        pytest.skip("%s is %s on torch %s" % (EDIT, row["state"], EXPECTED))
    (change,) = row["changes"]
    installed = change["installed"]
    lines = Path(installed["path"]).read_text().splitlines(True)
    count = installed["source"].count("\n")
    assert "".join(lines[installed["line"] - 1:installed["line"] - 1 + count]) \
        == installed["source"]
    status = json.loads(cli("status", "--json"))
    (patch,) = [r for r in status["backports"] if r["name"] == EDIT][0]["patches"]
    assert patch == {
        "target": "torch._inductor.scheduler.Scheduler.fusable_weak_dep", "kind": "source edit",
        "hash_of": "source",
        "installed_sha256": hashlib.sha256(installed["source"].encode()).hexdigest(),
        "running_sha256": hashlib.sha256(change["running"]["source"].encode()).hexdigest(),
    }
    assert patch["installed_sha256"] != patch["running_sha256"]


# A made-up backport that wraps torch.nn.functional.softsign, applied the
# way the startup hook applies one: no registered backport of 2.13 wraps.
WRAPPER_PROGRAM = r'''
import json
import torch.nn.functional as F
from torch_backports import _activate, _diff, _patching, _registry
from torch_backports._backport import Backport

def halving(wrapped, instance, args, kwargs):
    return wrapped(*args, **kwargs) / 2

backport = Backport(name="made-up", summary="", upstream=(), first_affected=(2, 0, 0),
                    first_fixed=(99, 0, 0), reproducer="pass", symptom="x",
                    apply=lambda m, r: _patching.wrap_attribute(m, "softsign", halving, None, {}))
_registry.BACKPORTS += (("made-up", "torch.nn.functional", (2, 0, 0), (99, 0, 0)),)
load = _registry.load
_registry.load = lambda name: backport if name == "made-up" else load(name)
assert _activate.apply("made-up", F) == "applied", _activate._records.get("made-up")
(entry,) = _diff.in_this_process()["made-up"]
print(json.dumps({"text": _diff.render(entry), "entry": entry}))
'''


def test_a_wrapper_names_the_installed_function_it_wraps(tmp_path):
    needs_torch()
    program = tmp_path / "wrap_softsign.py"
    program.write_text(WRAPPER_PROGRAM)
    done = run_interpreter([program])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    path = torch_file("nn", "functional.py")
    lines = path.read_text().splitlines()
    line = next(i + 1 for i, text in enumerate(lines) if text.startswith("def softsign("))
    own = WRAPPER_PROGRAM.splitlines().index("def halving(wrapped, instance, args, kwargs):") + 1
    text = result["text"]
    assert text.startswith("torch.nn.functional.softsign (wrapper)\n"), text
    assert "  wraps   torch.nn.functional.softsign at %s:%d " % (path, line) in text
    assert "  runs    __main__.halving at %s:%d, which calls the installed" % (program, own) \
        in text
    assert "  %5d |     return wrapped(*args, **kwargs) / 2\n" % (own + 1) in text
    assert result["entry"]["installed_sha256"] == result["entry"]["wraps"]["sha256"]


@pytest.mark.parametrize("name", ["fx-graph-cache-pickling", "aot-compile-builtins"])
def test_a_registered_wrapper_names_the_line_of_the_function_it_wraps(name):
    """The backports that wrap (on 2.6 - 2.10 and 2.10 - 2.11; 2.13 needs
    neither): the `wraps` line is the installed function's `def`."""
    needs_torch()
    out = cli("diff", name)
    if "== %s: applied" % name not in out:
        pytest.skip("%s is not applied on torch %s" % (name, EXPECTED))
    match = re.search(r"\(wrapper\)\n  wraps   (\S+) at (\S+):(\d+) \(installed, unchanged", out)
    assert match, out
    target, path, line = match.group(1), Path(match.group(2)), int(match.group(3))
    assert path.is_relative_to(torch_file())
    assert path.read_text().splitlines()[line - 1].strip().startswith(
        "def %s(" % target.rsplit(".", 1)[1])
    assert re.search(r"  runs    torch_backports\.backports\.\w+\.apply\.<locals>\.\w+ at "
                     r"\S+\.py:\d+, which calls the installed function:\n", out)
