"""A backport that changes inductor's generated code is named in the graph
cache keys (torch_backports._cache_key): with a cache that stock torch
warmed, the process with the fix compiles anew instead of loading the
stock graph, then hits its own entry; stock torch keeps hitting its own."""

from pathlib import Path

import pytest

from conftest import last_json, run_interpreter
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports import _registry
from torch_backports._versions import release_of

NAME = "inductor-mul-zero-nan"
PROGRAM = Path(__file__).with_name("codegen_cache_program.py")
STOCK = ["1.0", "1.0", "1.0"]  # x * 0 folded to 0: nan and inf lost
FIXED = ["nan", "nan", "1.0"]  # eager's result


def compile_once(cache, stock):
    done = run_interpreter([PROGRAM, cache], env={"TORCH_BACKPORTS_DISABLE": NAME} if stock else None)
    assert done.returncode == 0, done.stderr[-3000:]
    return last_json(done.stdout)


def hits(run):
    return run["fx"].get("fxgraph_cache_hit", 0) + run["aot"].get("autograd_cache_hit", 0)


def test_a_cache_stock_torch_warmed_is_not_reused_by_the_fix(tmp_path):
    needs_torch()
    if not _registry.load(NAME).needed_by(release_of(EXPECTED)):
        pytest.skip("torch %s does not need %s" % (EXPECTED, NAME))
    cache = str(tmp_path / "cache")
    warm = compile_once(cache, stock=True)
    assert warm["result"] == STOCK and hits(warm) == 0, warm
    fixed = compile_once(cache, stock=False)
    assert fixed["result"] == FIXED and hits(fixed) == 0, fixed
    again = compile_once(cache, stock=False)
    assert again["result"] == FIXED and hits(again) >= 1, again
    stock = compile_once(cache, stock=True)
    assert stock["result"] == STOCK and hits(stock) >= 1, stock
