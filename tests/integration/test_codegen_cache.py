"""A backport that changes inductor's generated code is named in the graph
cache keys (torch_backports._cache_key): with a cache that stock torch
warmed, the process with the fix compiles anew instead of loading the
stock graph, then hits its own entry; stock torch keeps hitting its own."""

from pathlib import Path

import pytest

import ci_plan
from conftest import last_json, run_interpreter
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports import _registry
from torch_backports._versions import release_of

PROGRAM = Path(__file__).with_name("codegen_cache_program.py")
# The code-changing backports with a case in the program; each one's stock
# result differs from eager, its fixed result matches.
NAMES = ("inductor-mul-zero-nan", "inductor-fused-mutation-read-alias",
         "inductor-noop-copy-of-mutated-input", "inductor-reinplace-scatter-self-overlap",
         "aot-noop-view-output-alias")
# CI runs one case for each place a fix changes what is cached: a lowering,
# the scheduler, and AOTAutograd's graph. The post-grad passes' two cases
# name themselves in the keys the same way as the lowering's; they run where
# every run is made (ci_plan.everything(): TORCH_BACKPORTS_STOCK_RUNS=all,
# tox -e matrix). Each case is four compiles, ~40 s (2.13.0, 2026-12-07).
IN_CI = ("inductor-mul-zero-nan", "inductor-fused-mutation-read-alias",
         "aot-noop-view-output-alias")


def compile_once(cache, name, stock):
    disable = _registry.load(name).disabled_when_verified(stock)
    done = run_interpreter([PROGRAM, cache, name],
                           env={"TORCH_BACKPORTS_DISABLE": disable} if disable else None)
    assert done.returncode == 0, done.stderr[-3000:]
    return last_json(done.stdout)


def hits(run):
    return run["fx"].get("fxgraph_cache_hit", 0) + run["aot"].get("autograd_cache_hit", 0)


@pytest.mark.parametrize("name", NAMES)
def test_a_cache_stock_torch_warmed_is_not_reused_by_the_fix(tmp_path, name):
    needs_torch()
    if name not in IN_CI:
        ci_plan.skip_outside_full_runs("CI runs the cases of " + ", ".join(IN_CI))
    if not _registry.load(name).needed_by(release_of(EXPECTED)):
        pytest.skip("torch %s does not need %s" % (EXPECTED, name))
    cache = str(tmp_path / "cache")
    warm = compile_once(cache, name, stock=True)
    assert not warm["matches_eager"] and hits(warm) == 0, warm
    fixed = compile_once(cache, name, stock=False)
    assert fixed["matches_eager"] and hits(fixed) == 0, fixed
    again = compile_once(cache, name, stock=False)
    assert again["matches_eager"] and hits(again) >= 1, again
    stock = compile_once(cache, name, stock=True)
    assert not stock["matches_eager"] and hits(stock) >= 1, stock
