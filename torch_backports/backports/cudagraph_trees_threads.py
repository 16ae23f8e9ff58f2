"""A `mode="reduce-overhead"` function runs in a plain Python thread (a
thread-pool server, asyncio's run_in_executor, Gradio), instead of failing
its first run there with an AssertionError in cudagraph_trees.get_obj.

Upstream:
  https://github.com/pytorch/pytorch/pull/184357   the fix (first in 2.13.0)
  https://github.com/pytorch/pytorch/issues/123177 the bug

  >>> f = torch.compile(model, mode="reduce-overhead")
  >>> ThreadPoolExecutor(1).submit(f, x).result()   # CUDA tensors
  File ".../torch/_inductor/cudagraph_trees.py", in get_obj
      assert torch._C._is_key_in_tls(attr_name)
  AssertionError                                     # stock 2.9 - 2.12

CUDA graph trees keep one tree manager per device in thread-local storage:
cudagraph_trees' module code puts the dicts of tree manager containers and
their locks on a threading.local and stashes them in torch's C++ TLS, which
autograd copies to the threads it starts. get_obj looks them up there, and
asserts that the C++ TLS has them; a thread Python started (not autograd)
has neither, so the first cudagraph recording in it (get_container, from
cudagraphify), `get_manager(...)`, or on 2.9 and 2.10 `torch.compiler.reset()`
after a reduce-overhead compile failed with that assertion. (2.11 made
reset_cudagraph_trees return early in a thread without the TLS, a
workaround, not this fix; the backport leaves that function as each
release ships it. So on 2.9 and 2.10, reset in such a thread sets up the
thread's TLS and then does what reset does in any thread there, clearing
the thread's own (empty) trees, turning cached tensors off and zeroing the
mark_step counter, where 2.13 returns at once.)

PR #184357 makes four changes, all carried here:
  1. cudagraph_trees, module level: the TLS set-up becomes a function,
     _initialize_tls(local), which the module's code calls once as before;
  2. cudagraph_trees.get_obj: where the C++ TLS lacks the key, it calls
     _initialize_tls for this thread and returns its new object, instead of
     asserting: each Python thread gets its own tree managers;
  3. cudagraph_trees: a process-wide graph_capture_lock (a threading.Lock),
     held by CUDAGraphTreeManager.__init__ around its warm-up capture of
     the private pool, and by CUDAGraphTreeManager._run around run_eager
     (warm-up in the pool) and record_function (the capture): CUDA graph
     capture and the allocator's pool switch are process-wide, so another
     thread's synchronize or allocation must not run during a capture;
  4. compile_fx.cudagraphify: the cudagraphified callable is made and kept
     per host thread (a threading.local) instead of once for all threads,
     so that each thread records into its own tree manager (2).
The backport adds _initialize_tls (2.13's, defined here, with one addition
below) and graph_capture_lock to cudagraph_trees, and replaces get_obj,
CUDAGraphTreeManager.__init__, CUDAGraphTreeManager._run and
compile_fx.cudagraphify by copies of the installed functions with exactly
the PR's edits (torch_backports._patching.rewritten); the module-level
set-up that already ran at import is what 2.13's _initialize_tls(local)
does, so it is left as it ran. The only edit not in the PR's text is in
cudagraphify: `import threading` inside the function, since 2.9 - 2.12's
compile_fx does not import it (2.13 added it at the top of the file).
2.14.1 and 2.15.0 have the same four changes (get_manager there also got a
default device, and get_obj an annotation, later changes).

The addition, not in the PR: on 2.9 - 2.11, torch._C._stash_obj_in_tls
keeps the object in torch's C++ TLS without a reference of its own (its
refcount is unchanged by the stash; 2.12.1's C++ adds one), yet drops one
when the thread ends. At cudagraph_trees' import that is harmless: the
module's `local` keeps the main thread's objects alive for good. For a
thread that 2.13's get_obj sets up and that then ends, Python frees the
thread-local's objects and torch's C++ TLS then frees them again: a
segfault, a hang or "terminate called" at a thread's end (in 3 of 5 runs
of an earlier CPU_CHECK of five scenarios on 2.11.0 without the addition,
2026-12-06; the check's refcount test now finds it in every run). So the
backport's _initialize_tls, where the stash left the object's refcount
unchanged (detected, not assumed from the version), adds the reference
2.12's stash takes (ctypes.pythonapi.Py_IncRef), which the thread's end
then drops: the thread's tree managers are freed once, when it ends, as on
2.13. On 2.12.1 the stash takes its reference and the addition does
nothing.

The target is torch._inductor.cudagraph_trees, not compile_fx: every
version imports cudagraph_trees lazily (in compile_fx.cudagraphify, in
torch._dynamo.reset on a CUDA machine, in torch.compiler's
cudagraph_mark_step_begin, in output_code for a backward), and its module
code imports compile_fx first. So when cudagraph_trees' hook runs, compile_fx
is always complete and nothing of cudagraph_trees has run but its module
code; both are patched together, and nothing is imported that stock torch
would not have imported. Targeting compile_fx instead would patch
cudagraph_trees in a hook of its own, but where cudagraph_trees is imported
first (`torch.compiler.reset()` on a CUDA machine before the first compile)
compile_fx's hook runs while cudagraph_trees is half-executed, and
cudagraph_trees could not be patched at all. What this target leaves out:
where compile_fx.cudagraphify's own first call is what imports
cudagraph_trees, that one call is already running 2.12's code, so the first
graph it cudagraphifies keeps one callable for all threads (change 4 for
that graph only), as stock does; every later graph, and every graph where
cudagraph_trees was imported before, gets 2.13's.

Read from each release's torch/_inductor/:

  release  get_obj           Manager.__init__  Manager._run      cudagraphify
  2.9.1    6cfd2c9def9b8d43  baae88d0f7156169  fde10f34e845a571  41a03bbc27b3579a
  2.10.0   6cfd2c9def9b8d43  baae88d0f7156169  fde10f34e845a571  41a03bbc27b3579a
  2.11.0   6cfd2c9def9b8d43  baae88d0f7156169  a3a7280608c1b899  41a03bbc27b3579a
  2.12.1   6cfd2c9def9b8d43  bcfe1460ff9b56bd  b2f19a1dfd23fb2f  a91f081e9530ee05
  2.13.0   cc85be6b95f73efb  015456bd0af69f8d  85e33b202c1187c7  1801da145769f9ec  (the fix)
  2.14.1   cc85be6b95f73efb  2b115f7f7366906c  4864ac64c3aaaf93  a66010632dece39e
  2.15.0   cf662c5682ffa546  9d094b85e9170b46  5c30b617c9e14f7d  64813f82c20aef6d

Each edit's text occurs once in each claimed release's function (2.12.1's
cudagraphify differs from 2.11's only in an annotation). 2.9.0 and 2.12.0,
read from their wheels (2026-12-06), have 2.9.1's and 2.12.1's
cudagraph_trees.py and compile_fx.py byte for byte. Releases before 2.9
are not claimed: they were not read here.

This is a fix of GPU code whose main part runs on a CPU: get_obj and
get_container touch no CUDA. CPU_CHECK drives changes 1, 2 and 4, and the
addition, in plain threads, six scenarios: get_manager and get_container from a
threading.Thread, from a ThreadPoolExecutor and from asyncio's
run_in_executor (each thread gets its own containers, the main thread's
untouched); torch.compiler.reset() from a worker after
torch.compile(mode="reduce-overhead") (which fails stock on 2.9 and 2.10
only); the C++ TLS holding its own reference to a thread's containers, and
20 threads ending with their tree managers freed; and
compile_fx.cudagraphify's callable called from two threads and the main
one, with cudagraph_trees.cudagraphify_impl stubbed to record its calls
(one per thread with the fix, one in all stock). On 2026-12-06 it failed
stock with the symptom in 5 of 5 runs on each of 2.9.1, 2.10.0 (6 of 6
scenarios), 2.11.0 and 2.12.1 (5 of 6), and passed with the backport in 5
of 5 runs on each; it passed stock on 2.13.0 and 2.14.1. Change 3, the capture lock, runs only where a
CUDAGraphTreeManager is made and runs, which needs a CUDA GPU: no CPU test
reaches it, so the backport is off by default until a GPU run records
REPRODUCER (a first run in a worker thread, then two workers compiling and
replaying at once). No GPU was lent to this work (2026-12-06).

changes_codegen is False: nothing here is inductor's code generation or a
cache key; the graphs are the same, only where their cudagraph trees live
and which lock guards their capture changes.
"""

from __future__ import annotations

import sys
import threading
from collections import defaultdict
from types import ModuleType
from typing import Any

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "cudagraph-trees-threads"

COMPILE_FX = "torch._inductor.compile_fx"

GET_OBJ = (
    {"6cfd2c9def9b8d43": "2.9.1, 2.10.0, 2.11.0, 2.12.1"},
    {"cc85be6b95f73efb": "2.13.0, 2.14.1", "cf662c5682ffa546": "2.15.0"},
)
MANAGER_INIT = (
    {"baae88d0f7156169": "2.9.1, 2.10.0, 2.11.0", "bcfe1460ff9b56bd": "2.12.1"},
    {"015456bd0af69f8d": "2.13.0", "2b115f7f7366906c": "2.14.1", "9d094b85e9170b46": "2.15.0"},
)
MANAGER_RUN = (
    {"fde10f34e845a571": "2.9.1, 2.10.0", "a3a7280608c1b899": "2.11.0",
     "b2f19a1dfd23fb2f": "2.12.1"},
    {"85e33b202c1187c7": "2.13.0", "4864ac64c3aaaf93": "2.14.1", "5c30b617c9e14f7d": "2.15.0"},
)
CUDAGRAPHIFY = (
    {"41a03bbc27b3579a": "2.9.1, 2.10.0, 2.11.0", "a91f081e9530ee05": "2.12.1"},
    {"1801da145769f9ec": "2.13.0", "a66010632dece39e": "2.14.1", "64813f82c20aef6d": "2.15.0"},
)

# pytorch/pytorch#184357, in the dedented source of each function.
GET_OBJ_EDITS = [(
    "    else:\n"
    "        assert torch._C._is_key_in_tls(attr_name)\n"
    "        return torch._C._get_obj_in_tls(attr_name)\n",
    "    if not torch._C._is_key_in_tls(attr_name):\n"
    "        _initialize_tls(local)\n"
    "        return getattr(local, attr_name)\n"
    "    return torch._C._get_obj_in_tls(attr_name)\n",
)]
MANAGER_INIT_EDITS = [(
    "    with torch.cuda.device(device_index):\n",
    "    with graph_capture_lock, torch.cuda.device(device_index):\n",
)]
MANAGER_RUN_EDITS = [
    ("        return self.run_eager(new_inputs, function_id)\n",
     "        with graph_capture_lock:\n"
     "            return self.run_eager(new_inputs, function_id)\n"),
    ("\n    return self.record_function(new_inputs, function_id)\n",
     "\n    with graph_capture_lock:\n"
     "        return self.record_function(new_inputs, function_id)\n"),
]
CUDAGRAPHIFY_EDITS = [(
    "    compiled_fn = None\n"
    "\n"
    "    def run(new_inputs: Sequence[InputType]) -> Any:\n"
    "        nonlocal compiled_fn\n"
    "        if compiled_fn is None:\n"
    "            with dynamo_utils.preserve_rng_state():\n"
    "                compiled_fn = cudagraphify_fn(model, new_inputs, static_input_idxs)"
    "  # type: ignore[arg-type]\n"
    "        return compiled_fn(new_inputs)",
    "    import threading\n"
    "\n"
    "    thread_local = threading.local()\n"
    "\n"
    "    def run(new_inputs: Sequence[InputType]) -> Any:\n"
    "        compiled_fn = getattr(thread_local, \"compiled_fn\", None)\n"
    "        if compiled_fn is None:\n"
    "            with dynamo_utils.preserve_rng_state():\n"
    "                compiled_fn = cudagraphify_fn(model, new_inputs, static_input_idxs)"
    "  # type: ignore[arg-type]\n"
    "            thread_local.compiled_fn = compiled_fn\n"
    "        return compiled_fn(new_inputs)",
)]

# The names this backport adds to cudagraph_trees, as 2.13 has them.
ADDED = ("_initialize_tls", "graph_capture_lock")


def _initialize_tls(local: threading.local) -> None:
    """2.13.0's cudagraph_trees._initialize_tls (pytorch#184357)."""
    import torch

    # one tree manager per device
    local.tree_manager_containers = {}
    local.tree_manager_locks = defaultdict(threading.Lock)

    # We need to register this as an object that will be copied over as TLS when new
    # threads are created in autograd
    _stash_obj_in_tls(torch, "tree_manager_containers", local.tree_manager_containers)
    _stash_obj_in_tls(torch, "tree_manager_locks", local.tree_manager_locks)


def _stash_obj_in_tls(torch: Any, key: str, obj: object) -> None:
    """torch._C._stash_obj_in_tls(key, obj), holding a reference of its own
    to obj as 2.12 does (see the docstring): on 2.9 - 2.11 it holds none but
    drops one when the thread ends, which freed the thread's tree managers
    twice (a crash at the exit of a thread that used them)."""
    before = sys.getrefcount(obj)
    torch._C._stash_obj_in_tls(key, obj)
    if sys.getrefcount(obj) == before:  # the stash took no reference
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def apply(cudagraph_trees: ModuleType, release: Release) -> Revert:
    """Add _initialize_tls and graph_capture_lock to cudagraph_trees, and
    replace its get_obj, CUDAGraphTreeManager.__init__ and ._run, and
    compile_fx.cudagraphify, by the installed ones with #184357's edits;
    return the undo."""
    compile_fx = sys.modules.get(COMPILE_FX)
    if compile_fx is None or "cudagraphify" not in vars(compile_fx):
        raise _patching.Unrecognised("%s is loaded without %s" % (cudagraph_trees.__name__,
                                                                  COMPILE_FX))
    for name in ADDED:
        if name in vars(cudagraph_trees):
            raise _patching.Unrecognised("%s.%s exists already"
                                         % (cudagraph_trees.__name__, name))
    if not isinstance(vars(cudagraph_trees).get("local"), threading.local):
        raise _patching.Unrecognised("%s has no threading.local named local"
                                     % cudagraph_trees.__name__)
    manager = _patching.own_class(cudagraph_trees, "CUDAGraphTreeManager")
    # Everything checked and compiled before anything is set.
    plan = []
    for owner, name, edits, (verified, fixed) in (
        (cudagraph_trees, "get_obj", GET_OBJ_EDITS, GET_OBJ),
        (manager, "__init__", MANAGER_INIT_EDITS, MANAGER_INIT),
        (manager, "_run", MANAGER_RUN_EDITS, MANAGER_RUN),
        (compile_fx, "cudagraphify", CUDAGRAPHIFY_EDITS, CUDAGRAPHIFY),
    ):
        original, _ = _patching.own_attribute(owner, name)
        plan.append((owner, name, _patching.rewritten(original, edits, verified, fixed),
                     verified, fixed))

    added = {"_initialize_tls": _initialize_tls, "graph_capture_lock": threading.Lock()}

    def remove_added() -> None:
        for name, value in added.items():
            if vars(cudagraph_trees).get(name) is value:
                delattr(cudagraph_trees, name)

    with _patching.all_or_nothing() as reverts:  # compile_fx is outside the snapshot
        for name, value in added.items():
            setattr(cudagraph_trees, name, value)
        reverts.append(remove_added)
        for owner, name, new, verified, fixed in plan:
            reverts.append(_patching.replace_attribute(owner, name, new, verified, fixed))
    return _patching.undo_all(reverts)


# The program: a reduce-overhead function first run in a worker
# thread, then in the main thread, then in two worker threads at once.
REPRODUCER = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
from concurrent.futures import ThreadPoolExecutor
import torch

if not torch.cuda.is_available():
    print("skipped: needs a CUDA GPU")
    sys.exit(77)


def fn(x):
    return (x * 2).sin() + 1


compiled = torch.compile(fn, mode="reduce-overhead")


def work(seed):
    x = torch.randn(1024, device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
    for _ in range(4):  # warm-up, recording, replays
        got = compiled(x).clone()
        torch.testing.assert_close(got, fn(x))
    torch.cuda.synchronize()
    return got


with ThreadPoolExecutor(1) as pool:  # the issue: the first run is in a worker
    pool.submit(work, 0).result()
work(1)
with ThreadPoolExecutor(2) as pool:  # two workers, each its own tree, at once
    for future in [pool.submit(work, seed) for seed in (2, 3, 4, 5)]:
        future.result()
"""

# On the CPU: changes 1, 2 and 4 (see the docstring), each in plain
# threads; internal APIs and a stub, as a test.
CPU_CHECK = r"""
import asyncio, faulthandler, sys, threading, traceback
faulthandler.dump_traceback_later(150, exit=True)  # a thread that hangs as it ends
from concurrent.futures import ThreadPoolExecutor
import torch

try:
    from torch._inductor import compile_fx, cudagraph_trees
    from torch._inductor.cudagraph_trees import get_container, get_manager
    cudagraph_trees.get_obj
    cudagraph_trees.local
    compile_fx.cudagraphify
except (ImportError, AttributeError) as exc:
    print("skipped: needs inductor's cudagraph trees as in 2.9 - 2.15 (%s)" % exc)
    sys.exit(77)

main_containers = cudagraph_trees.get_obj(cudagraph_trees.local, "tree_manager_containers")
main_before = dict(main_containers)


def in_thread(function):
    box = {}

    def target():
        try:
            box["value"] = function()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def in_pool(function):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function).result()


def in_executor(function):
    async def main():
        return await asyncio.get_running_loop().run_in_executor(None, function)
    return asyncio.run(main())


def own_containers():
    manager = get_manager(0, create_if_none_exists=False)
    container = get_container(0)
    if manager is not None or container.tree_manager is not None:
        raise AssertionError("a new thread found a tree manager: %r" % manager)
    containers = cudagraph_trees.get_obj(cudagraph_trees.local, "tree_manager_containers")
    if containers is main_containers or containers.get(0) is not container:
        raise AssertionError("this thread shares the main thread's tree managers")
    return container


def reset_after_reduce_overhead():
    torch.compiler.reset()


failures = []
scenarios = [0]


def scenario(name, run):
    scenarios[0] += 1
    try:
        run()
    except BaseException:
        failures.append(name)
        print("FAILED: %s" % name)
        traceback.print_exc()
    else:
        print("passed: %s" % name)


scenario("get_manager/get_container in a threading.Thread", lambda: in_thread(own_containers))
scenario("get_manager/get_container in a ThreadPoolExecutor worker",
         lambda: in_pool(own_containers))
scenario("get_manager/get_container in asyncio's run_in_executor",
         lambda: in_executor(own_containers))


def reset_scenario():
    torch.compile(lambda x: x + 1, mode="reduce-overhead")  # registers its backend
    in_pool(reset_after_reduce_overhead)


scenario("torch.compiler.reset() in a worker after torch.compile(mode='reduce-overhead')",
         reset_scenario)

class Marker:
    pass


def threads_end_cleanly():
    # Each thread's tree managers are its own, freed when it ends; on 2.9 -
    # 2.11 a thread's stash in torch's C++ TLS, without a reference of its
    # own, freed them twice there (a crash or a hang, mostly within 20).
    import gc, time, weakref

    def held_by_tls():
        # Deterministic: the stash must hold a reference of its own, one
        # more than an object the thread-local alone holds.
        containers = cudagraph_trees.get_obj(cudagraph_trees.local, "tree_manager_containers")
        probe = {}
        cudagraph_trees.local.probe = probe
        if sys.getrefcount(containers) != sys.getrefcount(probe) + 1:
            raise AssertionError("torch's C++ TLS holds no reference of its own to this "
                                 "thread's tree managers: the thread's end frees them twice")

    in_thread(held_by_tls)
    markers = []

    def use():
        marker = Marker()
        get_container(0).marker = marker
        markers.append(weakref.ref(marker))

    for _ in range(20):
        in_thread(use)
    time.sleep(0.2)  # a thread's C++ TLS goes after join() returns
    gc.collect()
    alive = sum(ref() is not None for ref in markers)
    if len(markers) != 20 or alive:
        raise AssertionError("%d of %d threads' tree managers outlived them"
                             % (alive, len(markers)))


scenario("20 threads that used cudagraph trees end, and their tree managers go",
         threads_end_cleanly)

made = []


def stub_impl(model, inputs, static_input_idxs, **kwargs):
    made.append(threading.current_thread().name)
    number = len(made)  # thread idents are reused once a thread has ended
    return lambda new_inputs: ("callable", number)


def per_thread_callable():
    cudagraph_trees.cudagraphify_impl = stub_impl
    run = compile_fx.cudagraphify(lambda inputs: inputs, (), device_index=0,
                                  stack_traces=[], is_backward=False, is_inference=True)
    first = in_thread(lambda: run([torch.ones(2)]))
    second = in_thread(lambda: run([torch.ones(2)]))
    again = run([torch.ones(2)]), run([torch.ones(2)])
    if again[0] != again[1]:
        raise AssertionError("one thread got two callables: %r" % (again,))
    if len({first, second, again[0]}) != 3 or len(made) != 3:
        raise AssertionError("one cudagraphified callable shared by threads: %r"
                             % ([first, second, again[0]],))


scenario("compile_fx.cudagraphify's callable made per thread", per_thread_callable)

if main_containers is not cudagraph_trees.get_obj(cudagraph_trees.local,
                                                  "tree_manager_containers") \
        or dict(main_containers) != main_before:
    failures.append("the main thread's tree managers changed")
    print("FAILED: the main thread's tree managers changed")
if failures:
    sys.exit("%d of %d failed" % (len(failures), scenarios[0]))
print("all %d passed" % scenarios[0])
"""

BACKPORT = Backport(
    name=NAME,
    summary="a mode=\"reduce-overhead\" function runs in a plain Python thread (was: "
    "AssertionError in cudagraph_trees.get_obj, assert torch._C._is_key_in_tls)",
    headline='`mode="reduce-overhead"` fails in a plain Python thread (`_is_key_in_tls`)',
    upstream=("https://github.com/pytorch/pytorch/pull/184357",
              "https://github.com/pytorch/pytorch/issues/123177"),
    first_affected=(2, 9, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="assert torch._C._is_key_in_tls(attr_name)",
    off_by_default=(
        "its graph_capture_lock around CUDA graph capture and private-pool warm-up "
        "(CUDAGraphTreeManager.__init__ and ._run) runs only on a CUDA GPU, which no CPU "
        "test reaches"),
    cpu_check=CPU_CHECK,
    cpu_check_symptom="assert torch._C._is_key_in_tls(attr_name)",
    readme_symptom=(
        "**crash**: a `torch.compile(mode=\"reduce-overhead\")` function first run in a "
        "plain Python thread (a thread-pool server, `run_in_executor`, Gradio) fails with "
        "`AssertionError` at `assert torch._C._is_key_in_tls(attr_name)` in "
        "`cudagraph_trees.get_obj`; on 2.9 - 2.10 `torch.compiler.reset()` in such a "
        "thread too"
    ),
    readme_fix=(
        "2.13's change ([#184357](https://github.com/pytorch/pytorch/pull/184357)): "
        "`get_obj` sets up cudagraph trees' thread-local state for a thread that lacks it, "
        "so each Python thread has its own tree managers; `compile_fx.cudagraphify` keeps "
        "the cudagraphified callable per thread; a process-wide lock serializes CUDA graph "
        "capture and private-pool warm-up. Off by default: the lock runs only on a GPU."
    ),
)
