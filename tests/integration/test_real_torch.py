"""torch-backports on real torch wheels, installed from the built wheel by tox.

tox sets TORCH_BACKPORTS_REAL_TORCH to the torch release its env installs
(or to "none"); without it these tests are skipped, as in the unit envs.
Every program here runs in a new interpreter and only uses torch.compile;
none imports torch_backports, except the CLI checks.
"""

import json
import os
from pathlib import Path

import pytest

from conftest import last_json, run_interpreter, run_python
from torch_backports import _registry
from torch_backports._versions import release_of

EXPECTED = os.environ.get("TORCH_BACKPORTS_REAL_TORCH")
pytestmark = [
    pytest.mark.skipif(not EXPECTED, reason="real-torch tests run in tox's torch envs"),
    pytest.mark.usefixtures("installed"),
]
SCRIPT = Path(__file__).with_name("compile_kind.py")
KINDS = ("PicklingError", "ValueError", "pybind11")


def release():
    return tuple(int(p) for p in EXPECTED.split(".")[:2])


def escaping():
    """The kinds whose error escapes stock dumps on this release, from the
    table read off each wheel's codecache.py (see the backport's docstring)."""
    if release() <= (2, 9):
        return {"PicklingError", "ValueError", "pybind11"}
    if release() == (2, 10):
        return {"ValueError", "pybind11"}
    return set()


def needs_torch():
    if EXPECTED == "none":
        pytest.skip("this env has no torch")


def compile_kind(kind, cache_dir, disable=None):
    env = {"TORCHINDUCTOR_CACHE_DIR": str(cache_dir)}
    if disable is not None:
        env["TORCH_BACKPORTS_DISABLE"] = disable
    done = run_interpreter([SCRIPT, kind], env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    if kind != "fine" and result["raises"] != kind:
        # Only the pybind11 object depends on the build: torch 2.6's older
        # pybind11 refuses it with TypeError, which every release catches.
        assert kind == "pybind11", result
        pytest.skip("on torch %s this object raises %s, not the pybind11 RuntimeError"
                    % (result["torch"], result["raises"]))
    return result, done.stderr


def cli(*args, env=None):
    return run_interpreter(["-m", "torch_backports", *args], env=env)


def test_the_env_has_the_torch_tox_promised():
    from importlib import metadata

    if EXPECTED == "none":
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version("torch")
    else:
        assert metadata.version("torch").split("+")[0] == EXPECTED


@pytest.mark.parametrize("kind", KINDS)
def test_stock_behaviour_under_opt_out(kind, tmp_path):
    """With TORCH_BACKPORTS_DISABLE=1 torch is stock: the escaping kinds crash."""
    needs_torch()
    result, _ = compile_kind(kind, tmp_path, disable="1")
    if kind in escaping():
        assert result["outcome"] == "crashed", result
        assert result["error"] == "BackendCompilerFailed"
    else:
        assert result["outcome"] == "compiled", result
        assert result["counters"].get("fxgraph_cache_bypass", 0) >= 1


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_bypasses_the_cache(kind, tmp_path):
    needs_torch()
    result, stderr = compile_kind(kind, tmp_path)
    assert result["outcome"] == "compiled" and result["correct"], result
    assert result["counters"].get("fxgraph_cache_bypass", 0) >= 1
    if release() <= (2, 10) and kind in escaping():
        # As the newest release: a warning for a pickling error or a cycle,
        # a silent bypass for a pybind11 object it has no stable key for.
        assert ("Failed to pickle cache key" in stderr) is (kind != "pybind11"), stderr[-3000:]


def test_picklable_graphs_still_hit_the_cache_from_a_second_process(tmp_path):
    needs_torch()
    first, _ = compile_kind("fine", tmp_path)
    second, _ = compile_kind("fine", tmp_path)
    assert first["outcome"] == second["outcome"] == "compiled"
    assert first["counters"].get("fxgraph_cache_miss", 0) >= 1
    assert second["counters"].get("fxgraph_cache_hit", 0) >= 1
    assert "fxgraph_cache_bypass" not in second["counters"]


def test_dumps_is_patched_only_where_needed():
    """On 2.9/2.10 dumps is our wrapper; elsewhere it is the wheel's own
    function, whose code is byte-for-byte what the wheel's source compiles to."""
    needs_torch()
    code = """
import inspect, json, textwrap
import torch._inductor.codecache as cc
d = cc.FxGraphCachePickler.__dict__["dumps"]
wrapped = "FunctionWrapper" in type(d).__name__
f = d.__wrapped__ if wrapped else d
src = textwrap.dedent(inspect.getsource(f))
ns = {}
exec(compile(src, inspect.getsourcefile(f), "exec"), vars(cc).copy(), ns)
print(json.dumps({"wrapped": wrapped, "plain": type(f).__name__ == "function",
                  "as_shipped": ns["dumps"].__code__.co_code == f.__code__.co_code,
                  "module": f.__module__}))
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    assert result["wrapped"] is ((2, 6) <= release() <= (2, 10))
    assert result["plain"] and result["as_shipped"]
    assert result["module"] == "torch._inductor.codecache"


def test_ops_torch_defines_while_importing_have_no_backward_formula():
    """custom-op-autograd-tensorlist-defaults leaves the kernels made inside
    `import torch` as shipped (its Cost note), which is exact only while
    none of those ops has a backward formula; the ops defined afterwards
    get the fixed kernel."""
    needs_torch()
    if expected_state("custom-op-autograd-tensorlist-defaults") != "applied":
        pytest.skip("the backport does not apply to this release")
    code = """
import json, torch
from torch._library import autograd, custom_ops
defined = dict(custom_ops.OPDEFS)

@torch.library.custom_op("bp_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2

twice.register_autograd(lambda ctx, g: (g, g), setup_context=lambda ctx, inputs, output: None)
try:
    twice(torch.ones(1, requires_grad=True)).sum().backward()
except RuntimeError as e:
    message = str(e)
print(json.dumps({"defined": len(defined),
                  "with_formula": sorted(k for k, d in defined.items() if d._backward_fn),
                  "stand_in": getattr(autograd.make_autograd_impl,
                                      "_torch_backports_replacement", False),
                  "message": message}))
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    assert result["defined"] > 0 and result["with_formula"] == [], result
    assert result["stand_in"] is True
    assert "The backward formula for bp_test.twice.default returned an incorrect number" \
        in result["message"], result


def expected_state(name):
    backport = _registry.load(name)
    release = release_of(EXPECTED)
    if release < backport.first_affected:
        return "not covered"
    if not backport.needed_by(release):
        return "not needed"
    # A backport that is off by default (a hunk no CPU test reaches) stays
    # off unless TORCH_BACKPORTS_ENABLE names it; status says "off".
    return "off" if backport.off_by_default else "applied"


def test_status_and_check_report_this_torch():
    needs_torch()
    done = cli("status", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)["backports"]}
    assert sorted(rows) == sorted(_registry.names())
    for name, row in rows.items():
        assert row["state"] == expected_state(name), row
    # The audit over the whole catalogue (torch_backports._stale): no loaded
    # module still holds a function or class a backport replaced.
    assert {name: row["stale"] for name, row in rows.items() if row["stale"]} == {}
    assert cli("check").returncode == 0
    needed = [name for name in rows if expected_state(name) == "applied"]
    disabled = cli("check", env={"TORCH_BACKPORTS_DISABLE": "1"})
    assert disabled.returncode == (1 if needed else 0), disabled.stdout
    for name in needed:
        assert "%s is needed by torch" % name in disabled.stdout


# The backports whose fingerprint check waits for the patched function's
# first call (_patching.rewritten_on_first_call), with what they replace.
PUT_OFF = {
    "dynamo-nnmodule-wrap-values": [("torch._dynamo.variables.nn_module",
                                     "NNModuleVariable.call_method")],
    "library-define-qualified-name": [("torch.library", "Library.define")],
    "custom-op-autograd-tensorlist-defaults": [("torch._library.autograd", "make_autograd_impl")],
    "dataloader-worker-releases-dataset": [
        ("torch.utils.data.dataloader", "_MultiProcessingDataLoaderIter.__init__"),
        ("torch.utils.data._utils.worker", "_worker_loop")],
    "export-proxy-map-retains-graph": [("torch.fx.experimental.proxy_tensor",
                                        "_ModuleStackTracer.trace")],
}

# Every fingerprint reads as unknown, as on a vendor build that changed each
# function; each patch whose check was put off must then be refused when
# status asks, with the function put back as shipped.
REFUSING = r"""
import functools, importlib, json, sys
from torch_backports import _fingerprint
_fingerprint.of_source = lambda source: "0" * 16
import torch_backports
wanted = json.loads(sys.argv[1])
def marked(module, path):
    return bool(getattr(functools.reduce(getattr, path.split("."), importlib.import_module(module)),
                        "_torch_backports_replacement", False))
before = {name: [marked(*where) for where in places] for name, places in wanted.items()}
states = {r["name"]: r["state"] for r in torch_backports.status()}
print(json.dumps({name: [states[name], before[name], [marked(*where) for where in places]]
                  for name, places in wanted.items()}))
"""


def test_checks_put_off_refuse_unknown_code_when_status_asks():
    needs_torch()
    wanted = {name: places for name, places in PUT_OFF.items()
              if expected_state(name) == "applied"}
    if not wanted:
        pytest.skip("torch %s needs none of these backports" % EXPECTED)
    done = run_interpreter(["-c", REFUSING, json.dumps(wanted)])
    assert done.returncode == 0, done.stderr[-3000:]
    result = last_json(done.stdout)
    # Before status, each is a stand-in whose check is still to come, or
    # the original, put back at its first call (importing dynamo on 2.10
    # defines ops, which calls make_autograd_impl); status must finish the
    # checks still to come, so at least one was.
    assert any(any(before) for _, before, _ in result.values()), result
    for name, (state, before, after) in result.items():
        assert state == "unrecognised", name
        assert after == [False] * len(after), name  # put back as shipped


def test_without_torch_nothing_is_printed_or_loaded():
    if EXPECTED != "none":
        pytest.skip("only in the env without torch")
    quiet = run_python("pass")
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    code = ("import sys, json; print(json.dumps(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('torch_backports', 'wrapt', 'logging', 'torch'))))")
    loaded = run_python(code)
    assert json.loads(loaded.stdout) == ["torch_backports"]
    check = cli("check")
    assert check.returncode == 0 and "torch is not installed" in check.stdout
    assert "not installed" in cli("status").stdout


# torch.fx.wrap used as libraries use it: by name and as a decorator at a
# module's top level (each module a file, imported), then traced; called
# inside a function and in a class body, where it raises. Printed as JSON.
_WRAP_PROGRAM = r'''
import json, os, sys, tempfile
import torch
import torch.fx
import torch.fx._symbolic_trace as symbolic_trace

folder = tempfile.mkdtemp()
sys.path.insert(0, folder)
modules = {
    "by_name": "import torch.fx\ndef helper(x):\n    return x + 1\ntorch.fx.wrap('helper')\n"
               "def f(x):\n    return helper(x) * 2\n",
    "decorated": "import torch.fx\n@torch.fx.wrap\ndef helper(x):\n    return x - 1\n"
                 "def f(x):\n    return helper(x) * 3\n",
    "inner": "from torch.fx._symbolic_trace import wrap\ndef helper(x):\n    return x / 2\n"
             "wrap('helper')\ndef f(x):\n    return helper(x) + 4\n",
}
seen = {"stand_in_first": getattr(torch.fx.wrap, "_torch_backports_replacement", False)}
for name, text in modules.items():
    with open(os.path.join(folder, name + ".py"), "w") as f:
        f.write(text)
    module = __import__(name)
    graph = torch.fx.symbolic_trace(module.f).graph
    seen[name] = [getattr(n.target, "__name__", str(n.target))
                  for n in graph.nodes if n.op == "call_function"]
def inside():
    torch.fx.wrap("len")
try:
    inside()
except Exception as exc:
    seen["inside"] = "%s: %s" % (type(exc).__name__, exc)
try:
    class Body:
        torch.fx.wrap("len")
except Exception as exc:
    seen["class body"] = "%s: %s" % (type(exc).__name__, exc)
try:
    torch.fx.wrap(3)
except Exception as exc:
    seen["not a name"] = "%s: %s" % (type(exc).__name__, exc)
seen["fixed after"] = "finally" in getattr(symbolic_trace.wrap, "_torch_backports_source", "")
print(json.dumps(seen))
'''


def test_fx_wrap_through_its_stand_in_behaves_as_stock():
    """fx-wrap-frame-cycle's stand-in calls wrap from its caller's top level:
    what wrap records and raises is stock torch's, by name, as a decorator
    and through the module's own name."""
    needs_torch()
    fixed = run_python(_WRAP_PROGRAM)
    stock = run_python(_WRAP_PROGRAM, env={"TORCH_BACKPORTS_DISABLE": "fx-wrap-frame-cycle"})
    assert fixed.returncode == 0 and stock.returncode == 0, fixed.stderr[-3000:] + stock.stderr[-3000:]
    fixed_seen, stock_seen = last_json(fixed.stdout), last_json(stock.stdout)
    applies = _registry.load("fx-wrap-frame-cycle").needed_by(release_of(EXPECTED))
    assert fixed_seen.pop("stand_in_first") is applies
    assert fixed_seen.pop("fixed after") is applies
    assert not stock_seen.pop("stand_in_first") and not stock_seen.pop("fixed after")
    assert fixed_seen == stock_seen
    # wrap took effect: each helper is a call in the graph, not traced through
    assert [stock_seen[name] for name in ("by_name", "decorated", "inner")] == [
        ["helper", "mul"], ["helper", "mul"], ["helper", "add"]], stock_seen
    assert stock_seen["inside"].startswith("NotImplementedError"), stock_seen


# Run in one of inductor's compile workers, the process torch starts as
# `sys.executable .../compile_worker/__main__.py` with the parent's
# environment, and then in the parent: import every backport's target, as a
# job might, and write that process's own states to the file named. The job
# is exec with this text, which pickles by reference, as any job the worker
# runs must.
STATES_JOB = """
import importlib, json, torch_backports
from torch_backports import _registry
for name in _registry.names():
    try:
        importlib.import_module(_registry.target(name))
    except Exception:
        pass
with open(%r, "w") as out:
    json.dump({r["name"]: r["state"] for r in torch_backports.status()}, out)
"""


def test_compile_workers_get_the_patches_as_the_parent_has_them(tmp_path):
    """Inductor's compile workers (SubprocPool, used for Triton compiles and
    by TORCHINDUCTOR_WORKER_START) are new interpreters of this environment:
    site runs the .pth there, so each backport stands in a worker as in the
    parent, applied where the parent has it applied."""
    needs_torch()
    worker, parent = tmp_path / "worker.json", tmp_path / "parent.json"
    done = run_python(
        "import functools\n"
        "import torch\n"
        "from torch._inductor.compile_worker.subproc_pool import SubprocPool\n"
        "pool = SubprocPool(1)\n"
        "try:\n"
        "    pool.submit(functools.partial(exec, %r, {})).result(timeout=600)\n"
        "finally:\n"
        "    pool.shutdown()\n"
        "exec(%r, {})\n" % (STATES_JOB % str(worker), STATES_JOB % str(parent)), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    states = json.loads(parent.read_text())
    assert json.loads(worker.read_text()) == states
    release = release_of(EXPECTED)
    needed = [n for n in _registry.names() if _registry.load(n).needed_by(release)
              and not _registry.load(n).off_by_default]
    assert [n for n in needed if states[n] == "applied"] == needed, states
