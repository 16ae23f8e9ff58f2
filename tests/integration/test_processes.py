"""The fix is active in every kind of process a torch program starts, with
no code in the program: multiprocessing workers, torchrun ranks, `-I`, and
threads; under `-S` it is not, until torch_backports.install()."""

from pathlib import Path

import pytest

from conftest import SITE_PACKAGES, last_json, run_interpreter
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401

HERE = Path(__file__).parent


def patch_expected():
    return (2, 6) <= tuple(int(p) for p in EXPECTED.split(".")[:2]) <= (2, 10)


def run(*args, env=None, timeout=900):
    done = run_interpreter(args, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_multiprocessing_workers(method):
    needs_torch()
    assert last_json(run(HERE / "workers.py", method).stdout) == [patch_expected()] * 2


def test_both_torchrun_ranks(tmp_path):
    needs_torch()
    out = tmp_path / "ranks"
    out.mkdir()
    done = run("-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29533",
               HERE / "ranks.py", "ValueError", out,
               env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "OMP_NUM_THREADS": "1"})
    ranks = {}
    for path in sorted(out.glob("rank*.json")):
        result = last_json(path.read_text())
        ranks[result["rank"]] = result
    assert sorted(ranks) == ["0", "1"], done.stdout + done.stderr[-3000:]
    for result in ranks.values():
        assert result["outcome"] == "compiled" and result["correct"], result
        assert result["counters"].get("fxgraph_cache_bypass", 0) >= 1


def test_isolated_mode(tmp_path):
    needs_torch()
    done = run("-I", HERE / "compile_kind.py", "ValueError",
               env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)})
    result = last_json(done.stdout)
    assert result["outcome"] == "compiled", result


def test_no_site_is_inactive_until_install():
    needs_torch()
    code = """
import json, sys
sys.path.append(%r)
import torch._inductor.codecache as cc
def patched():
    return "FunctionWrapper" in type(cc.FxGraphCachePickler.__dict__["dumps"]).__name__
before = patched()
import torch_backports
torch_backports.install()
print(json.dumps([before, patched(), torch_backports.status()[0]["state"]]))
""" % SITE_PACKAGES
    before, after, state = last_json(run("-S", "-c", code).stdout)
    assert before is False
    assert after is patch_expected()
    assert state == ("applied" if patch_expected() else "not needed")


def test_sixteen_threads_import_codecache_at_once():
    needs_torch()
    code = """
import json, threading
import torch
barrier = threading.Barrier(16)
seen = []
def work():
    barrier.wait()
    import torch._inductor.codecache as cc
    seen.append("FunctionWrapper" in type(cc.FxGraphCachePickler.__dict__["dumps"]).__name__)
threads = [threading.Thread(target=work) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
import torch._inductor.codecache as cc
d = cc.FxGraphCachePickler.__dict__["dumps"]
print(json.dumps({"seen": seen, "single": not hasattr(getattr(d, "__wrapped__", None), "__wrapped__")}))
"""
    result = last_json(run("-c", code).stdout)
    assert result == {"seen": [patch_expected()] * 16, "single": True}
