"""torch_backports._hooks, the post-import hooks, on throw-away packages."""

import importlib
import importlib.util
import sys
import threading

import pytest

from torch_backports import _hooks


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `hooked_pkg` with submodules `target` and `broken`."""
    root = tmp_path / "hooked_pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "target.py").write_text(
        "import sys\nSEEN_LOADER = __loader__\nSEEN_SPEC_LOADER = __spec__.loader\nVALUE = 42\n")
    (root / "broken.py").write_text("raise ValueError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "hooked_pkg"
    for name in [m for m in sys.modules if m.split(".")[0] == "hooked_pkg"]:
        del sys.modules[name]
    _hooks._hooks.clear()
    if _hooks in sys.meta_path:
        sys.meta_path.remove(_hooks)


def test_a_hook_runs_once_right_after_its_module(package):
    seen = []
    _hooks.register(package + ".target", lambda m: seen.append(m.VALUE))
    assert _hooks in sys.meta_path and seen == []
    module = importlib.import_module(package + ".target")
    importlib.import_module(package + ".target")
    assert seen == [42]
    # The module saw its real loader, and keeps it.
    assert type(module.SEEN_LOADER).__name__ == "SourceFileLoader"
    assert module.SEEN_SPEC_LOADER is module.SEEN_LOADER is module.__loader__
    assert module.__spec__.loader is module.__loader__
    # Every hook has run, so the finder has left sys.meta_path.
    assert _hooks not in sys.meta_path and _hooks.pending() == []


def test_a_module_imported_already_gets_its_hook_at_once(package):
    importlib.import_module(package + ".target")
    seen = []
    _hooks.register(package + ".target", lambda m: seen.append(m.VALUE))
    assert seen == [42] and _hooks not in sys.meta_path


def test_a_probe_does_not_run_the_hook(package):
    seen = []
    _hooks.register(package + ".target", seen.append)
    spec = importlib.util.find_spec(package + ".target")
    assert spec is not None and seen == []
    assert _hooks.pending() == [package + ".target"]


def test_a_raising_hook_does_not_fail_the_import(package):
    def hook(module):
        raise RuntimeError("a hook that raises")

    _hooks.register(package + ".target", hook)
    assert importlib.import_module(package + ".target").VALUE == 42


def test_a_failing_module_keeps_its_own_error_and_its_hook(package):
    seen = []
    _hooks.register(package + ".broken", seen.append)
    with pytest.raises(ValueError, match="broken on purpose"):
        importlib.import_module(package + ".broken")
    assert seen == [] and _hooks.pending() == [package + ".broken"]


def test_threads_importing_at_once_run_the_hook_once(package):
    seen = []
    _hooks.register(package + ".target", seen.append)
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        importlib.import_module(package + ".target")

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 1
