"""torch_backports._hooks, the post-import hooks, on throw-away packages."""

import importlib
import importlib.util
import sys
import threading
from importlib.machinery import PathFinder

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
    if PathFinder.__dict__["find_spec"] is _hooks._path_find_spec:
        PathFinder.find_spec = _hooks._path_replaced
    _hooks._path_in_chain = False
    assert PathFinder.__dict__["find_spec"] is STOCK_FIND_SPEC


STOCK_FIND_SPEC = PathFinder.__dict__["find_spec"]


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


def test_a_submodule_of_a_loaded_package_is_hooked_in_path_finder(package):
    importlib.import_module(package)
    meta_path = list(sys.meta_path)
    seen = []
    _hooks.register(package + ".target", lambda m: seen.append(m.VALUE))
    # No finder in front of the others: PathFinder's own lookup carries it.
    assert sys.meta_path == meta_path
    assert PathFinder.__dict__["find_spec"] is _hooks._path_find_spec
    # Another submodule's lookup passes through untouched.
    other = importlib.util.find_spec(package + ".broken")
    assert type(other.loader).__name__ == "SourceFileLoader" and seen == []
    module = importlib.import_module(package + ".target")
    assert seen == [42]
    assert type(module.SEEN_LOADER).__name__ == "SourceFileLoader"
    assert module.__spec__.loader is module.__loader__ is module.SEEN_LOADER
    # Every hook has run: PathFinder is as it was, sys.meta_path untouched.
    assert PathFinder.__dict__["find_spec"] is STOCK_FIND_SPEC
    assert sys.meta_path == meta_path and _hooks.pending() == []


def test_a_probe_through_path_finder_does_not_run_the_hook(package):
    importlib.import_module(package)
    seen = []
    _hooks.register(package + ".target", seen.append)
    assert importlib.util.find_spec(package + ".target") is not None and seen == []
    assert _hooks.pending() == [package + ".target"]
    importlib.import_module(package + ".target")
    assert len(seen) == 1


def test_both_routes_at_once_hook_each_module_once(package, tmp_path):
    # A top-level module (no package loaded: the meta path finder) and a
    # submodule of a loaded package (PathFinder) wait at the same time; the
    # meta path finder's own lookup goes through the PathFinder hook too.
    (tmp_path / "hooked_top.py").write_text("VALUE = 7\n")
    seen = []
    try:
        _hooks.register("hooked_top", lambda m: seen.append(m.VALUE))
        importlib.import_module(package)
        _hooks.register(package + ".target", lambda m: seen.append(m.VALUE))
        assert _hooks in sys.meta_path
        assert PathFinder.__dict__["find_spec"] is _hooks._path_find_spec
        top = importlib.import_module("hooked_top")
        assert type(top.__spec__.loader).__name__ == "SourceFileLoader"
        importlib.import_module(package + ".target")
        assert seen == [7, 42]
        assert _hooks not in sys.meta_path
        assert PathFinder.__dict__["find_spec"] is STOCK_FIND_SPEC
    finally:
        sys.modules.pop("hooked_top", None)


def test_a_wrapper_put_over_the_hook_stays_working(package, tmp_path):
    # Someone wraps PathFinder.find_spec while ours is in place: ours is
    # left there (a pass-through once no hooks remain), theirs still works.
    importlib.import_module(package)
    seen = []
    _hooks.register(package + ".target", seen.append)
    ours = PathFinder.__dict__["find_spec"]
    calls = []

    @classmethod
    def theirs(cls, fullname, path=None, target=None):
        calls.append(fullname)
        return ours.__func__(cls, fullname, path, target)

    PathFinder.find_spec = theirs
    try:
        importlib.import_module(package + ".target")
        assert len(seen) == 1 and package + ".target" in calls
        assert PathFinder.__dict__["find_spec"] is theirs
        assert importlib.util.find_spec(package + ".broken") is not None
        # A hook registered later listens through ours, still under theirs,
        # and does not put ours over theirs (which calls ours: a loop).
        (tmp_path / package / "other.py").write_text("VALUE = 9\n")
        _hooks.register(package + ".other", lambda m: seen.append(m.VALUE))
        assert PathFinder.__dict__["find_spec"] is theirs
        importlib.import_module(package + ".other")
        assert seen[1:] == [9] and _hooks.pending() == []
    finally:
        PathFinder.find_spec = ours
