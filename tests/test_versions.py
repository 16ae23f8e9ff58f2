"""Judging the torch release by (major, minor)."""

import pytest

from torch_backports import _registry
from torch_backports._versions import UnknownRelease, release_of
from torch_backports.backports import fx_graph_cache_pickling as fx


@pytest.mark.parametrize("version", [
    "2.10.0", "2.10.0+cu128", "2.10.0+cpu", "2.10.0a0+git449b176",
    "2.10.0.dev20260101", "2.10.0rc1", "2.10.1", "2.10",
])
def test_builds_of_one_release_agree(version):
    assert release_of(version) == (2, 10)


@pytest.mark.parametrize("version", ["", "garbage", "2", "two.ten", None, 2.10, b"2.10.0"])
def test_unreadable_versions_are_refused(version):
    with pytest.raises(UnknownRelease):
        release_of(version)


@pytest.mark.parametrize("version, needed", [
    ("2.5.1", False), ("2.6.0", True), ("2.9.1", True), ("2.10.0a0+git449b176", True),
    ("2.11.0", False), ("2.13.0+cpu", False), ("3.0.0", False),
])
def test_fx_backport_range(version, needed):
    assert fx.BACKPORT.needed_by(release_of(version)) is needed


def test_every_target_lies_under_a_startup_trigger():
    """The startup watcher arms wrapt when a trigger package imports; a target
    outside every trigger would be imported before its hook exists."""
    import torch_backports

    for backport in _registry.BACKPORTS:
        assert any(backport.target.startswith(t + ".") for t in torch_backports._TRIGGERS)


def test_registry_names_are_unique_and_listed():
    names = _registry.names()
    assert len(set(names)) == len(names)
    assert _registry.get(fx.NAME) is fx.BACKPORT
