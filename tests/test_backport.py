"""The FX graph cache pickling patch, in-process, on the fake codecache.

The fake (tests/fake_torch/torch/_inductor/codecache.py) imitates the dumps
of real 2.9.1, 2.10.0 and 2.11.0; tests/integration proves the same on the
real wheels.
"""

import importlib.util
import inspect
import logging
import sys
import threading
import types

import pytest

from conftest import FAKE_TORCH
from torch_backports import _activate, _records
from torch_backports.backports import fx_graph_cache_pickling as fx

CODECACHE = FAKE_TORCH / "torch" / "_inductor" / "codecache.py"

# Module-level, so its qualified name is '<lambda>': pickling it by reference
# fails with pickle.PicklingError (a local lambda gives AttributeError).
UNNAMED = lambda: None  # noqa: E731


def _cyclic():
    loop = []
    loop.append(loop)
    return loop


class _Pybind11Like:
    """Refuses pickling with the RuntimeError text real pybind11 objects give
    (seen from torch.ops.aten.sin.default._op on torch 2.13.0)."""

    def __reduce_ex__(self, protocol):
        raise RuntimeError(
            "<pybind11_builtins.pybind11_detail_function_record_v1_system_libstdcpp_gxx_abi_1xxx"
            "_use_cxx11_abi_1 object at 0x7f1286840030> is not pickleable.")


class _Raises:
    def __init__(self, error):
        self.error = error

    def __reduce_ex__(self, protocol):
        raise self.error


KINDS = {
    "PicklingError": lambda: UNNAMED,
    "ValueError": _cyclic,
    "pybind11": _Pybind11Like,
}
# Which kinds each fake release lets escape, from the table in fx's docstring.
ESCAPES = {"2.9.1": {"PicklingError", "ValueError", "pybind11"},
           "2.10.0": {"ValueError", "pybind11"},
           "2.11.0": set()}


def load_codecache(monkeypatch, version):
    """A fresh fake codecache module imitating `version`, not in sys.modules."""
    monkeypatch.setenv("FAKE_TORCH_VERSION", version)
    monkeypatch.delenv("FAKE_TORCH_FAULT", raising=False)
    name = "fake_codecache_" + version.replace(".", "_")
    spec = importlib.util.spec_from_file_location(name, CODECACHE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["2.9.1", "2.10.0"])
def patched(request, monkeypatch):
    codecache = load_codecache(monkeypatch, request.param)
    release = tuple(int(p) for p in request.param.split("."))
    revert = fx.apply(codecache, release)
    yield request.param, codecache
    revert()


@pytest.mark.parametrize("version", ["2.9.1", "2.10.0", "2.11.0"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_fake_matches_the_release_table(monkeypatch, version, kind):
    """Unpatched, each fake lets escape what its real release lets escape."""
    codecache = load_codecache(monkeypatch, version)
    with pytest.raises(Exception) as caught:
        codecache.FxGraphCachePickler().dumps(KINDS[kind]())
    escaped = not isinstance(caught.value, codecache.BypassFxGraphCache)
    assert escaped == (kind in ESCAPES[version])


# What the newest release (2.15) does with each kind, read from its
# codecache.py: a warning and "Failed to pickle cache key" for a pickling
# error or a cycle; for a pybind11 object without a stable key, its
# reducer_override bypasses silently and names the type.
NEWEST = {
    "PicklingError": ("Failed to pickle cache key", ["Failed to pickle cache key"]),
    "ValueError": ("Failed to pickle cache key", ["Failed to pickle cache key"]),
    "pybind11": ("Cannot produce stable cache key for unpicklable type "
                 "pybind11_detail_function_record_v1_system_libstdcpp_gxx_abi_1xxx_use_cxx11_abi_1",
                 []),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_becomes_a_bypass_as_in_the_newest_release(patched, kind, caplog):
    version, codecache = patched
    pickler = codecache.FxGraphCachePickler()
    with caplog.at_level(logging.WARNING, logger=codecache.__name__):
        with pytest.raises(codecache.BypassFxGraphCache) as caught:
            pickler.dumps(KINDS[kind]())
    message, logged = NEWEST[kind]
    assert str(caught.value) == message
    assert caught.value.__cause__ is not None
    assert not isinstance(caught.value.__cause__, codecache.BypassFxGraphCache)
    warnings = [r for r in caplog.records if r.name == codecache.__name__]
    assert [r.getMessage() for r in warnings] == logged
    assert all(r.exc_info is not None for r in warnings)
    assert pickler._stream.getvalue() == b""


@pytest.mark.parametrize("error", [
    RuntimeError("CUDA error: device-side assert"),
    RuntimeError("pybind11 is fine here"),
    MemoryError(),
    KeyboardInterrupt(),
], ids=repr)
def test_other_errors_propagate_unchanged(patched, error):
    _, codecache = patched
    pickler = codecache.FxGraphCachePickler()
    with pytest.raises(type(error)) as caught:
        pickler.dumps(_Raises(error))
    assert caught.value is error
    assert pickler._stream.getvalue() == b""


def test_bypass_propagates_unchanged(patched):
    _, codecache = patched
    bypass = codecache.BypassFxGraphCache("from a reducer")
    with pytest.raises(codecache.BypassFxGraphCache) as caught:
        codecache.FxGraphCachePickler().dumps(_Raises(bypass))
    assert caught.value is bypass


def test_good_keys_pickle_as_before(monkeypatch, patched):
    version, codecache = patched
    stock = load_codecache(monkeypatch, version)
    key = {"graph": "def forward(x): return x.sin()", "inputs": [(4,), "float32"]}
    assert codecache.FxGraphCachePickler().dumps(key) == stock.FxGraphCachePickler().dumps(key)


def test_wrapper_keeps_identity(patched):
    _, codecache = patched
    dumps = codecache.FxGraphCachePickler.dumps
    original = dumps.__wrapped__
    assert dumps.__name__ == original.__name__ == "dumps"
    assert dumps.__doc__ == original.__doc__
    assert inspect.signature(dumps) == inspect.signature(original)
    assert original is not dumps and inspect.isfunction(original)


def test_codecache_subclasses_are_covered(patched):
    """A pickler subclass defined in codecache itself inherits the fix."""
    _, codecache = patched

    class Subclass(codecache.FxGraphCachePickler):
        __module__ = codecache.__name__

    with pytest.raises(codecache.BypassFxGraphCache):
        Subclass().dumps(_cyclic())


def test_aot_autograd_pickler_is_left_as_stock(patched, caplog):
    """AOTAutogradCachePickler (defined in torch._functorch) inherits dumps,
    but its caller turns any error into a silent bypass on every covered
    release: the error passes through unchanged and nothing is logged."""
    _, codecache = patched

    class AOTAutogradCachePickler(codecache.FxGraphCachePickler):
        __module__ = "torch._functorch._aot_autograd.autograd_cache"

    with caplog.at_level(logging.WARNING, logger=codecache.__name__):
        with pytest.raises(ValueError):
            AOTAutogradCachePickler().dumps(_cyclic())
    assert [r for r in caplog.records if r.name == codecache.__name__] == []


def test_revert_restores_the_shipped_function(monkeypatch):
    codecache = load_codecache(monkeypatch, "2.10.0")
    original = codecache.FxGraphCachePickler.__dict__["dumps"]
    revert = fx.apply(codecache, (2, 10, 0))
    assert codecache.FxGraphCachePickler.__dict__["dumps"] is not original
    revert()
    assert codecache.FxGraphCachePickler.__dict__["dumps"] is original
    with pytest.raises(ValueError):
        codecache.FxGraphCachePickler().dumps(_cyclic())


def test_second_apply_refuses(patched):
    _, codecache = patched
    before = codecache.FxGraphCachePickler.__dict__["dumps"]
    with pytest.raises(RuntimeError, match="already patched"):
        fx.apply(codecache, (2, 10, 0))
    assert codecache.FxGraphCachePickler.__dict__["dumps"] is before


@pytest.mark.parametrize("fault, error", [
    ("no-pickler", AttributeError),
    ("no-bypass", AttributeError),
    ("no-dumps", AttributeError),
    ("dumps-not-function", TypeError),
    ("dumps-signature", TypeError),
])
def test_api_drift_is_refused_before_any_change(monkeypatch, fault, error):
    monkeypatch.setenv("FAKE_TORCH_FAULT", fault)
    spec = importlib.util.spec_from_file_location("fake_codecache_drift", CODECACHE)
    codecache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(codecache)
    pickler = getattr(codecache, "FxGraphCachePickler", None)
    before = dict(vars(pickler)) if pickler else None
    with pytest.raises(error):
        fx.apply(codecache, (2, 10, 0))
    assert (dict(vars(pickler)) if pickler else None) == before


def test_concurrent_triggers_patch_once(monkeypatch):
    codecache = load_codecache(monkeypatch, "2.10.0")
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.10.0+cpu"))
    original = codecache.FxGraphCachePickler.__dict__["dumps"]
    barrier = threading.Barrier(16)
    states = []

    def trigger():
        barrier.wait()
        states.append(_activate.apply(fx.NAME, codecache))

    threads = [threading.Thread(target=trigger) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert states == [_records.APPLIED] * 16
        assert codecache.FxGraphCachePickler.__dict__["dumps"].__wrapped__ is original
    finally:
        assert _activate.revert(fx.NAME)
    assert codecache.FxGraphCachePickler.__dict__["dumps"] is original
