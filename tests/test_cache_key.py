"""torch_backports._cache_key on a stand-in for inductor's codecache."""

import types

import pytest

from torch_backports import _cache_key, _records, _registry


class FxGraphHashDetails:
    def __init__(self, gm, example_inputs, fx_kwargs, inputs_to_check):
        self.gm = gm


@pytest.fixture
def codecache(monkeypatch):
    module = types.ModuleType("fake_codecache")
    cls = type("FxGraphHashDetails", (FxGraphHashDetails,), {"__init__": FxGraphHashDetails.__init__})
    module.FxGraphHashDetails = cls
    monkeypatch.setattr(_cache_key, "_installed", False)
    monkeypatch.setattr(_cache_key, "error", None)
    _cache_key.install(module)
    return module


def test_details_are_stock_while_no_code_changing_backport_is_applied(codecache, monkeypatch):
    monkeypatch.setattr(_records, "get", lambda name: (_records.PENDING, "", None))
    details = codecache.FxGraphHashDetails("gm", [], {}, [])
    assert vars(details) == {"gm": "gm"}
    assert _cache_key.ready() is None


def test_an_applied_code_changing_backport_is_named(codecache, monkeypatch):
    monkeypatch.setattr(_records, "get", lambda name: (_records.APPLIED, "", None))
    details = codecache.FxGraphHashDetails("gm", [], {}, [])
    changing = tuple(sorted(name for name in _registry.names()
                            if _registry.load(name).changes_codegen))
    assert "inductor-mul-zero-nan" in changing
    # Those whose real-wheel cache test CI leaves to full runs, and the rest
    # of issues 24 and 25's code-changing ones (test_codegen_cache.py).
    assert {"inductor-reinplace-scatter-self-overlap", "inductor-noop-copy-of-mutated-input",
            "inductor-fused-mutation-read-alias", "aot-noop-view-output-alias",
            "tensorify-float-stale-cache", "triton-mm-size-int64"} <= set(changing)
    assert details.torch_backports == changing


def test_without_the_class_code_changing_backports_refuse(monkeypatch):
    monkeypatch.setattr(_cache_key, "_installed", False)
    monkeypatch.setattr(_cache_key, "error", None)
    _cache_key.install(types.ModuleType("drifted_codecache"))
    assert "FxGraphHashDetails.__init__ does not exist" in _cache_key.ready()
