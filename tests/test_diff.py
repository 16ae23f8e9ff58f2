"""`torch-backports diff` and the hashes of status --json: what the patch
helpers record while a backport is applied, and how it is shown, on a
made-up module and on the fake torch (no real torch)."""

import hashlib
import inspect
import json
import re
import sys
import types

import pytest

from conftest import run_interpreter
from torch_backports import _activate, _diff, _fingerprint, _patching, _registry
from torch_backports._backport import Backport

# Line numbers matter here: describe() starts at line 8 of the file.
SOURCE = '''"""A made-up target module."""


class Kernel:
    LIMIT = 3

    def describe(self, x):
        """Say what x is."""
        text = "value %s" % x
        if x > self.LIMIT:
            text += " (large)"
        return text + " (scalar)"


def helper(a, b=2):
    return a + b


TABLE = {"helper": helper}
KERNEL = Kernel()
KERNEL.flag = False
'''
DESCRIBE_LINE = 7


@pytest.fixture
def module(tmp_path, monkeypatch):
    """A real module from a real file, so inspect can read its source."""
    path = tmp_path / "made_up_diff_target.py"
    path.write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("made_up_diff_target", None)
    import made_up_diff_target

    yield made_up_diff_target
    sys.modules.pop("made_up_diff_target", None)


def _apply(monkeypatch, module, patch, audit=False):
    """Apply a made-up backport whose apply() is `patch` through _activate,
    as the startup hook does; return its recorded changes, described."""
    backport = Backport(name="made-up", summary="", upstream=(), first_affected=(2, 0, 0),
                        first_fixed=(9, 0, 0), apply=patch, reproducer="pass", symptom="x")
    monkeypatch.setattr(_registry, "BACKPORTS", (("made-up", module.__name__, (2, 0, 0),
                                                  (9, 0, 0)),))
    monkeypatch.setattr(_registry, "load", lambda name: backport)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.10.0"))
    monkeypatch.delenv("TORCH_BACKPORTS_DISABLE", raising=False)
    monkeypatch.setattr(_activate, "_audit", audit)
    _activate._reverts.pop("made-up", None)
    assert _activate.apply("made-up", module) == "applied"
    try:
        return _diff.in_this_process()["made-up"]
    finally:
        _activate.revert("made-up")


def _edit(module):
    def patch(target, release):
        method = vars(target.Kernel)["describe"]
        verified = {_fingerprint.of_function(method): "made-up 1.0"}
        fixed = _patching.rewritten(method, [('" (scalar)"', '" (vector)"')], verified, {})
        return _patching.replace_attribute(target.Kernel, "describe", fixed, verified, {})

    return patch


def test_a_source_edit_is_a_diff_at_the_files_path_and_line_numbers(module, monkeypatch):
    (entry,) = _apply(monkeypatch, module, _edit(module))
    assert entry["target"] == "made_up_diff_target.Kernel.describe"
    assert entry["kind"] == "source edit" and entry["how"] == "replaced"
    text = _diff.render(entry)
    path = module.__file__
    assert "\n--- %s\n" % path in text
    assert "\n+++ %s\t(as torch-backports runs it)\n" % path in text
    # The change is on line 12 of the file: three lines of context before it.
    changed = SOURCE.splitlines().index('        return text + " (scalar)"') + 1
    assert changed == DESCRIBE_LINE + 5
    assert "\n@@ -%d,4 +%d,4 @@ made_up_diff_target.Kernel.describe\n" % (
        changed - 3, changed - 3) in text
    assert '\n-        return text + " (scalar)"\n+        return text + " (vector)"\n' in text
    # Context lines are the file's own, at its indentation.
    assert '\n         if x > self.LIMIT:\n' in text


def test_hashes_are_of_the_installed_text_and_of_the_text_that_runs(module, monkeypatch):
    (entry,) = _apply(monkeypatch, module, _edit(module))
    installed = "".join(SOURCE.splitlines(True)[DESCRIBE_LINE - 1:DESCRIBE_LINE + 5])
    running = installed.replace('" (scalar)"', '" (vector)"')
    assert entry["hash_of"] == "source"
    assert entry["installed_sha256"] == hashlib.sha256(installed.encode()).hexdigest()
    assert entry["running_sha256"] == hashlib.sha256(running.encode()).hexdigest()
    assert _diff.hashes([entry]) == [{
        "target": "made_up_diff_target.Kernel.describe", "kind": "source edit",
        "hash_of": "source", "installed_sha256": entry["installed_sha256"],
        "running_sha256": entry["running_sha256"]}]


def test_a_copy_made_at_the_first_call_is_shown_before_that_call(module, monkeypatch):
    original = vars(module)["helper"]
    fingerprint = _fingerprint.of_function(original)

    def patch(target, release):
        return _patching.rewritten_on_first_call(
            target, "helper", [("    return a + b\n", "    return a * b\n")],
            {fingerprint: "made-up 1.0"}, {})

    (entry,) = _apply(monkeypatch, module, patch)
    assert entry["how"] == "rewritten on first call" and entry["kind"] == "source edit"
    text = _diff.render(entry)
    line = SOURCE.splitlines().index("def helper(a, b=2):") + 1
    assert "\n@@ -%d,2 +%d,2 @@ made_up_diff_target.helper\n" % (line, line) in text
    assert "\n-    return a + b\n+    return a * b\n" in text


def test_a_wrapper_shows_its_source_and_what_it_wraps(module, monkeypatch):
    def patch(target, release):
        return _patching.wrap_attribute(target, "helper", _doubling, None, {})

    (entry,) = _apply(monkeypatch, module, patch)
    assert entry["kind"] == "wrapper" and entry["target"] == "made_up_diff_target.helper"
    helper_line = SOURCE.splitlines().index("def helper(a, b=2):") + 1
    assert (entry["wraps"]["path"], entry["wraps"]["line"]) == (module.__file__, helper_line)
    text = _diff.render(entry)
    own_lines, own_first = inspect.getsourcelines(_doubling)
    assert "  wraps   made_up_diff_target.helper at %s:%d " % (module.__file__, helper_line) in text
    assert "  runs    %s at %s:%d," % (_doubling.__module__ + "." + _doubling.__qualname__,
                                      __file__, own_first) in text
    assert "  %5d | def _doubling(wrapped, instance, args, kwargs):\n" % own_first in text
    wrapper_source = "".join(own_lines)
    assert entry["running_sha256"] == hashlib.sha256(wrapper_source.encode()).hexdigest()
    assert entry["installed_sha256"] == entry["wraps"]["sha256"]


def _doubling(wrapped, instance, args, kwargs):
    return 2 * wrapped(*args, **kwargs)


def test_the_audit_finds_what_a_patch_set_by_hand(module, monkeypatch):
    def by_hand(a, b=2):
        return a - b

    def patch(target, release):
        target.extra = by_hand
        target.TABLE["helper"] = by_hand
        target.KERNEL.flag = True
        return lambda: None

    found = _apply(monkeypatch, module, patch, audit=True)
    assert {(e["target"], e["how"], e["kind"]) for e in found} == {
        ("made_up_diff_target.extra", "set by hand", "addition"),
        ("made_up_diff_target.TABLE['helper']", "set by hand", "replacement"),
        ("made_up_diff_target.KERNEL.flag", "set by hand", "replacement"),
    }
    (flag,) = [e for e in found if e["target"].endswith("flag")]
    assert "  installed  False\n  running    True\n" in _diff.render(flag)
    assert flag["hash_of"] == "repr"
    # Only in the audit (the CLI's child): it compares every attribute.
    assert _apply(monkeypatch, module, lambda target, release: (
        setattr(target, "other", by_hand), lambda: None)[1], audit=False) == []
    (extra,) = [e for e in found if e["target"].endswith("extra")]
    assert "def by_hand(a, b=2):" in _diff.render(extra)


def test_nothing_is_recorded_outside_an_apply(module):
    method = vars(module.Kernel)["describe"]
    verified = {_fingerprint.of_function(method): "made-up 1.0"}
    fixed = _patching.rewritten(method, [('" (scalar)"', '" (vector)"')], verified, {})
    assert _patching._recording is None
    _patching.replace_attribute(module.Kernel, "describe", fixed, verified, {})()
    assert _patching._recording is None


def test_code_hash_without_source():
    namespace = {}
    exec(compile("def f(x):\n    return [y for y in x]\n", "<nowhere>", "exec"), namespace)
    side = _diff._side(namespace["f"])
    assert side["hash_of"] == "code" and side["source"] is None
    assert side["sha256"] == _diff.code_sha256(namespace["f"].__code__)


# ---- the command, with the fake torch's one backport (a wrapper) ---------


def _fake_dumps_line():
    """The line of the `def dumps` the fake torch 2.10.0 defines."""
    from conftest import FAKE_TORCH

    lines = (FAKE_TORCH / "torch" / "_inductor" / "codecache.py").read_text().splitlines()
    branch = lines.index("    elif _release == (2, 10):  # 2.10.0")
    return next(i for i in range(branch, len(lines)) if lines[i].strip().startswith("def dumps"))\
        + 1, str(FAKE_TORCH / "torch" / "_inductor" / "codecache.py")


def test_the_diff_command_on_the_fake_torch(installed):
    # Names as require() and the opt-out match them: any case, '_' or '-'.
    done = run_interpreter(["-m", "torch_backports", "diff", "FX_Graph_Cache_Pickling",
                            "inductor-mul-zero-nan"], fake_torch=True,
                           env={"FAKE_TORCH_VERSION": "2.10.0"})
    assert done.returncode == 0, done.stderr
    line, path = _fake_dumps_line()
    out = done.stdout
    assert "== fx-graph-cache-pickling: applied (patched for torch 2.10.0)\n" in out
    assert ("torch._inductor.codecache.FxGraphCachePickler.dumps (wrapper)\n"
            "  wraps   torch._inductor.codecache.FxGraphCachePickler.dumps at %s:%d "
            % (path, line)) in out
    assert re.search(r"  runs    torch_backports\.backports\.fx_graph_cache_pickling\.apply\."
                     r"<locals>\.convert at .*fx_graph_cache_pickling\.py:\d+,", out)
    assert "|     def convert(wrapped, instance, args, kwargs):" in out
    # A backport that is not applied: one line with its state and reason.
    assert re.search(r"\n== inductor-mul-zero-nan: pending: .+\n", out)


def test_the_diff_command_refuses_an_unknown_name():
    done = run_interpreter(["-m", "torch_backports", "diff", "no-such-backport"])
    assert done.returncode == 2 and "no backport named 'no-such-backport'" in done.stderr


def test_status_json_gives_the_hashes_of_each_target(installed):
    done = run_interpreter(["-m", "torch_backports", "status", "--json"], fake_torch=True,
                           env={"FAKE_TORCH_VERSION": "2.10.0"})
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["backports"]}
    line, path = _fake_dumps_line()
    with open(path) as file:
        lines = file.read().splitlines(True)
    # inspect's block of the installed dumps: up to the next branch
    end = next(i for i in range(line, len(lines)) if lines[i].startswith(("    elif", "    else")))
    installed_text = "".join(lines[line - 1:end]).rstrip("\n") + "\n"
    (patch,) = rows["fx-graph-cache-pickling"]["patches"]
    assert patch["target"] == "torch._inductor.codecache.FxGraphCachePickler.dumps"
    assert patch["hash_of"] == "source" and patch["kind"] == "wrapper"
    assert patch["installed_sha256"] == hashlib.sha256(installed_text.encode()).hexdigest()
    assert re.fullmatch("[0-9a-f]{64}", patch["running_sha256"])
    assert patch["running_sha256"] != patch["installed_sha256"]
    # the keys status had before are all still there; not applied: no patches
    assert {"name", "summary", "upstream", "affects", "target", "torch", "state",
            "reason", "patches", "stale"} == set(rows["fx-graph-cache-pickling"])
    assert rows["inductor-mul-zero-nan"]["patches"] == []


def test_a_table_entry_holding_the_patched_function_hashes_apart(module):
    """An entry such as inductor's inplaceable_ops[...] that a patch points
    at the copy: same repr, other hash."""
    helper = vars(module)["helper"]
    verified = {_fingerprint.of_function(helper): "made-up 1.0"}
    copy = _patching.rewritten(helper, [("a + b", "a - b")], verified, {})
    before = _diff._side(types.SimpleNamespace(check=helper, limit=3))
    after = _diff._side(types.SimpleNamespace(check=copy, limit=3))
    assert before["hash_of"] == after["hash_of"] == "repr"
    assert re.sub(" at 0x[0-9a-f]+", "", before["repr"]) == re.sub(" at 0x[0-9a-f]+", "",
                                                                   after["repr"])
    assert before["sha256"] != after["sha256"]
    assert before["sha256"] == _diff._side(types.SimpleNamespace(check=helper, limit=3))["sha256"]


def test_an_instance_target_is_named_by_its_class_and_its_own_name():
    class CustomOpDef:
        _qualname = "flex_lib::zeros_and_scatter"

    name = _diff.qualified_name(CustomOpDef(), "_vmap_fn")
    assert name == "%s.%s[flex_lib::zeros_and_scatter]._vmap_fn" % (
        __name__, CustomOpDef.__qualname__)


def test_a_table_of_kernels_made_from_another_function_hashes_apart():
    # A dispatcher's table: each entry is a closure with the same text,
    # made from the op's implementation; replacing the implementation
    # changes what runs, and so the table's hash.
    def make_kernel(implementation):
        def kernel(*args):
            return implementation(*args)
        return kernel

    def installed(x):
        return x

    def patched(x):
        return x + 1

    before = {None: make_kernel(installed)}
    after = {None: make_kernel(patched)}
    assert _diff._value_text(before) != _diff._value_text(after)
    assert _diff._value_text(before) == _diff._value_text({None: make_kernel(installed)})
