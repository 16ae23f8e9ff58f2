"""Judging the torch release by (major, minor, micro)."""

import pytest

from torch_backports import _registry, _versions
from torch_backports._versions import UnknownRelease, release_of
from torch_backports.backports import fx_graph_cache_pickling as fx


@pytest.mark.parametrize("version", [
    "2.10.0", "2.10.0+cu128", "2.10.0+cpu", "2.10.0a0+git449b176",
    "2.10.0.dev20260101", "2.10.0rc1", "2.10",
])
def test_builds_of_one_release_agree(version):
    assert release_of(version) == (2, 10, 0)


@pytest.mark.parametrize("version, release", [
    ("2.7.1", (2, 7, 1)), ("2.7.1+cu126", (2, 7, 1)), ("2.9.1a0+gitabc", (2, 9, 1)),
    ("2.12.1rc2", (2, 12, 1)), ("2.10.0.post1", (2, 10, 0)),
])
def test_patch_releases_differ(version, release):
    assert release_of(version) == release


@pytest.mark.parametrize("version", [
    "", "garbage", "2", "two.ten", None, 2.10, b"2.10.0", "2.10.0+", "2.10.0++x",
    "2.10.0+cu128 extra", "2.10.0.0rc1rc2",
])
def test_unreadable_versions_are_refused(version):
    with pytest.raises(UnknownRelease):
        release_of(version)


# Every spelling a torch build prints, and near misses: release_of must read
# each as packaging.version reads it, which _versions replaced on the
# import-torch path for its cost. packaging comes with pytest.
SPELLINGS = [
    "2.10.0", "2.10", "2.10.0.1", "2.10.0+cu128", "2.10.0+cpu", "2.10.0+rocm6.4",
    "2.10.0a0+git449b176", "2.10.0a0+git449b176.nv25.10", "2.10.0.dev20260101",
    "2.10.0.dev20260101+cpu", "2.10.0rc1", "2.10.0-rc1", "2.10.0RC1", "2.10.0.post1",
    "2.10.0a", "2.10.0.post", "v2.10.0", " 2.10.0 ", "2.10.0+ab.cd-ef_1", "2.10.0+",
    "2.10.0++x", "2.10.0+cu128 extra", "2", "garbage", "two.ten", "", "2.10.0.0rc1rc2",
    "2.7.1", "2.9.1a0+gitabc", "12.3.4b2.post3.dev4+local.7",
]


@pytest.mark.parametrize("version", SPELLINGS)
def test_release_of_reads_versions_as_packaging_does(version):
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
        expected = (parsed.release + (0,))[:3] if len(parsed.release) >= 2 else None
    except InvalidVersion:
        expected = None
    try:
        got = release_of(version)
    except UnknownRelease:
        got = None
    assert got == expected


@pytest.mark.parametrize("version, needed", [
    ("2.5.1", False), ("2.6.0", True), ("2.9.1", True), ("2.10.0a0+git449b176", True),
    ("2.10.1", True), ("2.11.0", False), ("2.11.0rc1", False), ("2.13.0+cpu", False),
    ("3.0.0", False),
])
def test_fx_backport_range(version, needed):
    assert fx.BACKPORT.needed_by(release_of(version)) is needed


def test_every_target_lies_under_the_startup_trigger():
    """The startup watcher arms wrapt at torch's first submodule import; a
    target outside torch would be imported before its hook exists."""
    import torch_backports

    for name in _registry.names():
        assert _registry.target(name).startswith(torch_backports._TRIGGER), name


def test_registry_names_are_unique_and_load_their_modules():
    names = _registry.names()
    assert len(set(names)) == len(names)
    for name in names:
        backport = _registry.load(name)
        assert backport.name == name
        assert backport.first_affected < backport.first_fixed
        # the registry's copy, which judges a release without the module
        assert _registry.releases(name) == (backport.first_affected, backport.first_fixed)
        assert backport.reproducer.strip() and backport.symptom
        assert all(link.startswith("https://") for link in backport.upstream)
    assert _registry.load(fx.NAME) is fx.BACKPORT


def test_reproducers_never_import_torch_backports():
    for name in _registry.names():
        assert "torch_backports" not in _registry.load(name).reproducer, name


@pytest.mark.parametrize("version", SPELLINGS + ["2.13.0", "2.13.0+cpu", "2.10.0+cu128", "2.10",
                                                 "2.10.0+", "2.10.0+a..b", "2.10.0+ROCM6.3"])
def test_the_plain_reading_agrees_with_the_expression(version):
    """release builds are read without compiling the regular expression;
    wherever that shortcut answers, the expression answers the same."""
    from torch_backports import _versions

    plain = _versions._plain_release(version)
    match = _versions._version().fullmatch(version.strip())
    if plain is not None:
        assert match is not None
        assert plain == tuple(int(g or 0) for g in match.groups())


@pytest.mark.parametrize("version, by_code", [
    ("2.13.0", False), ("2.13.0+cpu", False), ("2.10.0+cu128", False), ("2.13.0+rocm6.4", False),
    ("2.13.0.post1", False),
    ("2.13.0a0+8145d630e8", True),   # NGC
    ("2.13.0a0+git8145d63", True),   # a source build of main
    ("2.13.0+git8145d63", True),     # a source build
    ("2.15.0.dev20260901", True), ("2.15.0rc1", True), ("2.13.0b1", True),
    (None, False),
])
def test_which_builds_the_code_judges(version, by_code):
    assert _versions.judged_by_code(version) is by_code
