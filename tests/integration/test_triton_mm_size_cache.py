"""triton-mm-size-int64 changes the Triton mm template's code: a process
with the fix, on an inductor cache dir that stock torch warmed with the
empty (M * N wrapped to 0) kernel, writes and gets the fixed kernel, and
stock torch on the same dir still gets its own; the FX graph and AOTAutograd
cache keys of the fixed process name the backport and differ from stock's.
(The compile stops after codegen, Triton having no CPU target, so no graph
is stored: the keys are checked where they are made.) On the CPU, through the
template's codegen and Triton's compiler for sm_90 (the backport's CPU
check); it needs triton, which CPU-only wheels lack."""

from pathlib import Path

import pytest

from conftest import last_json, run_interpreter
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports import _registry
from torch_backports._versions import release_of

NAME = "triton-mm-size-int64"
PROGRAM = Path(__file__).with_name("triton_mm_size_cache_program.py")
STOCK_KERNEL = "M = 32768"
FIXED_KERNEL = "M = tl.full([], 32768, dtype=INDEX_DTYPE)"


def compile_once(cache, stock):
    done = run_interpreter([PROGRAM, cache],
                           env={"TORCH_BACKPORTS_DISABLE": NAME} if stock else None)
    if done.returncode == 77:
        pytest.skip(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, done.stderr[-3000:]
    return last_json(done.stdout)


def kernel_files(cache, line):
    return [p for p in Path(cache).rglob("*.py")
            if line + "\n" in p.read_text(errors="replace")]


def test_the_fix_does_not_get_the_kernel_stock_torch_cached(tmp_path):
    needs_torch()
    if not _registry.load(NAME).needed_by(release_of(EXPECTED)):
        pytest.skip("torch %s does not need %s" % (EXPECTED, NAME))
    cache = str(tmp_path / "cache")
    warm = compile_once(cache, stock=True)
    assert warm["m_line"] == STOCK_KERNEL and not warm["tt_dot"], warm
    assert kernel_files(cache, STOCK_KERNEL), "stock torch cached no mm kernel"
    fixed = compile_once(cache, stock=False)
    assert fixed["m_line"] == FIXED_KERNEL and fixed["tt_dot"], fixed
    assert fixed["keys"]["fx"] and all(named for _, named in fixed["keys"]["fx"]), fixed["keys"]
    assert not any(named for _, named in warm["keys"]["fx"]), warm["keys"]
    for kind in ("fx", "aot"):
        stock_keys = {key for key, _ in warm["keys"][kind]}
        assert not stock_keys & {key for key, _ in fixed["keys"][kind]}, (kind, warm, fixed)
    assert fixed["fx"].get("fxgraph_cache_hit", 0) == 0, fixed
    assert kernel_files(cache, FIXED_KERNEL)
    stock = compile_once(cache, stock=True)
    assert stock["m_line"] == STOCK_KERNEL and not stock["tt_dot"], stock
