"""The startup code is visibly harmless (PEP 829 names .pth code as an attack
surface): an audit hook installed before site runs sees everything it does.
"""

import ast
import json
import pkgutil
from pathlib import Path

import pytest

from conftest import SITE_PACKAGES, last_json, run_python

pytestmark = pytest.mark.usefixtures("installed")

# Runs with -S: installs the audit hook, then lets site do its usual work.
# An event is ours if our package, or the exec of our .pth line, is on the
# stack; site's own reading of the .pth (and, on 3.13, the codec it loads
# for that) is not. '' (the working directory) is taken off sys.path first:
# a normal start adds it only after site has run.
AUDITED_START = r"""
import sys, sysconfig
site_file = sysconfig.get_paths()["stdlib"] + "/site.py"
events = []
busy = []
def ours():
    frame = sys._getframe(2)  # the code that raised the event
    if frame.f_code.co_filename in ("<frozen site>", site_file):
        return False  # site's own work: reading .pth files, loading codecs
    while frame is not None:
        name = frame.f_code.co_filename
        caller = frame.f_back
        if PACKAGE in name or (name == "<string>" and caller is not None
                               and caller.f_code.co_name == "addpackage"
                               and caller.f_locals.get("name") == "torch_backports.pth"):
            return True
        frame = frame.f_back
    return False
def hook(event, args):
    if busy or event in ("sys._getframe", "object.__getattr__"):
        return  # the hook's own work
    busy.append(1)
    try:
        if ours():
            if event == "exec":
                args = (getattr(args[0], "co_filename", repr(args[0])),)
            events.append([event, [a if isinstance(a, (str, int)) else repr(a) for a in args]])
    finally:
        busy.pop()
sys.addaudithook(hook)
while "" in sys.path:
    sys.path.remove("")
import site
site.main()
import json, torch_backports
print(json.dumps({"events": events, "state": torch_backports._startup_state,
                  "pkg": torch_backports.__file__}))
"""

FORBIDDEN_PREFIXES = ("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
                      "os.fork", "socket.", "ctypes.", "compile", "os.putenv", "os.unsetenv",
                      "urllib.", "http.", "shutil.", "os.remove", "os.rename")


def audited_start(tmp_path, env=None):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    for decoy in ("torch_backports.py", "wrapt.py", "torch_backports.pth"):
        (cwd / decoy).write_text("raise SystemExit('read from the cwd')\n")
    code = AUDITED_START.replace("PACKAGE", repr("/torch_backports/"))
    done = run_python(code, flags=["-S"], cwd=str(cwd), env=env)
    assert done.returncode == 0, done.stderr
    return last_json(done.stdout)


def test_startup_opens_only_its_own_module(tmp_path):
    result = audited_start(tmp_path)
    assert result["state"] == "watching"
    package = str(Path(result["pkg"]).parent)
    opened = [args[0] for event, args in result["events"] if event == "open"]
    assert opened, "the audit hook saw nothing: the test would prove nothing"
    for path in opened:
        assert path.startswith(package + "/__init__.") or \
            path.startswith(package + "/__pycache__/__init__."), path
    for event, args in result["events"]:
        if event == "compile":
            # the import system compiling our module where no .pyc is fresh
            # (editable installs)
            assert args[1] == package + "/__init__.py", args
            continue
        assert not event.startswith(FORBIDDEN_PREFIXES), (event, args)
        assert not any(str(tmp_path) in str(a) for a in args), (event, args)
        if event == "exec":
            assert args[0].startswith(package) or args[0] == "<string>", args
    # sys and _thread are already loaded, so importing them raises no event.
    imported = sorted({args[0] for event, args in result["events"] if event == "import"})
    assert imported == ["torch_backports"]


@pytest.mark.parametrize("value", ["__import__('os').system('touch PWNED')", "$(touch PWNED)",
                                   "`touch PWNED`", "1; touch PWNED", "\x01\x02\x7f"])
def test_opt_out_values_are_never_evaluated(tmp_path, value):
    result = audited_start(tmp_path, env={"TORCH_BACKPORTS_DISABLE": value})
    assert result["state"] == "watching"
    code = ("import os, sys; sys.path.insert(0, %r)\n"
            "import torch._inductor.codecache, torch_backports, json\n"
            "print(json.dumps(torch_backports.status()[0]['state']))\n") % str(
        Path(__file__).parent / "fake_torch")
    done = run_python(code, env={"TORCH_BACKPORTS_DISABLE": value, "FAKE_TORCH_VERSION": "2.10.0"},
                      cwd=str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == "applied"
    assert not (tmp_path / "PWNED").exists()


def test_start_file_names_the_callable_the_pth_runs():
    """Python 3.15 resolves a .start entry with pkgutil.resolve_name; it must be
    the very function the .pth line calls on older Pythons."""
    start = (Path(SITE_PACKAGES) / "torch_backports.start").read_text().split()
    assert len(start) == 1
    from_start = pkgutil.resolve_name(start[0])
    (line,) = (Path(SITE_PACKAGES) / "torch_backports.pth").read_text().splitlines()
    module_stmt, call_stmt = ast.parse(line).body
    assert isinstance(module_stmt, ast.Import) and len(module_stmt.names) == 1
    call = call_stmt.value
    assert isinstance(call, ast.Call) and not call.args and not call.keywords
    assert isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
    module = __import__(module_stmt.names[0].name)
    assert call.func.value.id == module.__name__
    assert getattr(module, call.func.attr) is from_start


def test_the_startup_module_imports_nothing_at_module_level():
    """torch_backports/__init__.py runs at every interpreter start. Any
    import at its top level, `from __future__ import annotations` too (it
    loads the __future__ module: 0.54 M instructions, 1.4 % of `python -c
    pass`, 2026-12-05), is paid by every process of the environment."""
    import torch_backports

    tree = ast.parse(Path(torch_backports.__file__).read_text())
    imports = [ast.unparse(node) for node in tree.body
               if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert imports == []
