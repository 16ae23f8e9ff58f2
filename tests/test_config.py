"""TORCH_BACKPORTS_DISABLE parsing."""

import pytest

from torch_backports._config import ENV_DISABLE, read_opt_in, read_opt_out

KNOWN = ("fx-graph-cache-pickling", "other-fix")


def opt_out(value):
    return read_opt_out(KNOWN, {ENV_DISABLE: value})


@pytest.mark.parametrize("value", ["", " ", "0", "false", "FALSE", "no", "n", "off", " Off ", "none", "None"])
def test_enabled_words(value):
    result = opt_out(value)
    assert not result.everything and not result.names and not result.unknown
    assert not result.disables("fx-graph-cache-pickling")


def test_unset_means_enabled():
    assert not read_opt_out(KNOWN, {}).disables("fx-graph-cache-pickling")


@pytest.mark.parametrize("value", ["1", "true", "True", "yes", "y", "Y", "on", "all", " ALL "])
def test_everything_words(value):
    result = opt_out(value)
    assert result.everything
    assert all(result.disables(name) for name in KNOWN)


@pytest.mark.parametrize("value", [
    "fx-graph-cache-pickling", "FX_GRAPH_CACHE_PICKLING", " fx-graph-cache-pickling , ",
])
def test_names(value):
    result = opt_out(value)
    assert result.names == {"fx-graph-cache-pickling"}
    assert result.disables("fx-graph-cache-pickling") and not result.disables("other-fix")


def test_unknown_names_are_reported_not_fatal():
    result = opt_out("other-fix, nope,__import__('os').system('x')")
    assert result.names == {"other-fix"}
    assert result.unknown == ("nope", "__import__('os').system('x')")
    assert not result.disables("fx-graph-cache-pickling")


@pytest.mark.parametrize("value", ["\x00", ",,,", "é,ü", "a" * 10000, "${HOME}", "1,2"])
def test_garbage_never_raises(value):
    result = opt_out(value)
    assert not result.everything


def test_enable_takes_names_only():
    names, unknown = read_opt_in(KNOWN, {"TORCH_BACKPORTS_ENABLE": "Other_Fix, bogus,1"})
    assert names == {"other-fix"} and unknown == ("bogus", "1")
    assert read_opt_in(KNOWN, {}) == (frozenset(), ())
