"""A backport that is off by default (a hunk no CPU test reaches) stays off,
recorded with its reason, until TORCH_BACKPORTS_ENABLE names it."""

import sys
import types

import pytest

from torch_backports import _activate, _config, _records, _registry
from torch_backports._backport import Backport

NAME = "inductor-mul-zero-nan"  # any backport torch 2.13.0 needs


@pytest.fixture
def off_backport(monkeypatch):
    applied = []

    def apply(module, release):
        applied.append(release)
        return lambda: applied.remove(release)

    first_affected, first_fixed = _registry.releases(NAME)
    backport = Backport(name=NAME, summary="", upstream=(), first_affected=first_affected,
                        first_fixed=first_fixed, apply=apply, reproducer="", symptom="",
                        off_by_default="the graph-capture lock runs only on a GPU")
    monkeypatch.setattr(_registry, "load", lambda name: backport)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="2.13.0+cpu"))
    monkeypatch.delenv(_config.ENV_DISABLE, raising=False)
    monkeypatch.delenv(_config.ENV_ENABLE, raising=False)
    yield applied
    _activate.revert(NAME)


def test_off_unless_enabled(off_backport):
    assert _activate.apply(NAME, types.ModuleType("target")) == _records.OFF
    state, reason, _ = _records.get(NAME)
    assert state == _records.OFF and off_backport == []
    assert reason == ("off by default: the graph-capture lock runs only on a GPU; "
                      "TORCH_BACKPORTS_ENABLE=%s turns it on" % NAME)


def test_enable_turns_it_on(off_backport, monkeypatch):
    monkeypatch.setenv(_config.ENV_ENABLE, NAME.replace("-", "_").upper())
    assert _activate.apply(NAME, types.ModuleType("target")) == _records.APPLIED
    assert off_backport == [(2, 13, 0)]


def test_disable_wins_over_enable(off_backport, monkeypatch):
    monkeypatch.setenv(_config.ENV_ENABLE, NAME)
    monkeypatch.setenv(_config.ENV_DISABLE, NAME)
    assert _activate.apply(NAME, types.ModuleType("target")) == _records.DISABLED
    assert off_backport == []


def test_require_names_an_off_backport_and_how_to_turn_it_on(off_backport, monkeypatch):
    import torch_backports
    from torch_backports import _require

    assert _activate.apply(NAME, types.ModuleType("target")) == _records.OFF
    monkeypatch.setattr(torch_backports, "_startup_state", "armed")
    monkeypatch.setattr(_require, "_import_targets", lambda known: {})
    with pytest.raises(torch_backports.BackportNotInEffect) as raised:
        torch_backports.require(NAME)
    state, reason = raised.value.missing[NAME]
    assert state == _records.OFF
    assert "TORCH_BACKPORTS_ENABLE=%s turns it on" % NAME in str(raised.value), raised.value
