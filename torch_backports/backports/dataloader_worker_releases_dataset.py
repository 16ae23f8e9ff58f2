"""A DataLoader worker started with spawn or forkserver lets go of its copy of
the dataset when it finishes, so the dataset's __del__ and finalizers run
there, and CUDA tensors it received over IPC are released.

Upstream:
  https://github.com/pytorch/pytorch/pull/190485   the fix (first in 2.14.0)
  https://github.com/pytorch/pytorch/issues/190268 the report

_MultiProcessingDataLoaderIter.__init__ starts each worker as
multiprocessing Process(target=_utils.worker._worker_loop, args=(kind,
dataset, ...)). In the worker, two references to the dataset outlive
_worker_loop: the Process object's args (multiprocessing keeps the worker's
Process as current_process() until the interpreter exits) and the WorkerInfo
that _worker_loop stores in the module global _worker_info for
get_worker_info(). The worker ends by os._exit (fork, forkserver) or by an
exit that never reaches those objects (spawn), so the dataset is never freed
there: its __del__ and weakref finalizers never run, and a dataset holding
CUDA tensors received over IPC never gives them back, so the producer keeps
the blocks referenced ("in limbo") and its CUDA memory grows with every
epoch of non-persistent workers. forkserver is Python 3.14's default start
method on Linux. There is no error message: the symptom is what never happens.
A forked worker is another matter, fixed or not: it holds the parent's whole
heap, in which the DataLoader still refers to the dataset.

Read from each release's torch/utils/data/_utils/worker.py and
torch/utils/data/dataloader.py (lines: the length of the source block):

  release          _worker_loop             _MultiProcessingDataLoaderIter.__init__
  2.7.0 - 2.8.0    78b7c4dc9c7619f6 (147)   aafa0650d55e2187 (123)
  2.9.1            78b7c4dc9c7619f6 (147)   19dd62e86a5cde48 (115)
  2.10.0 - 2.12.1  9f667195bea2a438 (156)   d3c3834e1d4b3169 (134)
  2.13.0           9f667195bea2a438 (156)   1506ddc3e8963046 (131)
  2.14.1 - 2.15.0  560b8fec46132004 (159)   418664c309de6035 (133)   fixed

PR #190485 passes the dataset to the worker in a one-item list (args[1]
becomes `dataset_holder = [self._dataset]`), _worker_loop takes the dataset
with `dataset_holder.pop()`, so the Process's args no longer reach it, and
clears _worker_info in a `finally` when its loop ends. Once _worker_loop
returns nothing refers to the dataset any more.

The patch keeps upstream's wire format (the Process's args[1] is the
one-item list, as on 2.14) but not upstream's new _worker_loop signature.
The worker process runs whatever _worker_loop its own torch has: a spawned
or forkserver child imports torch afresh, and pickle names the target by
reference, so it may be stock (TORCH_BACKPORTS_DISABLE set only there, a
child without the .pth, an install() made late in the parent) while the
parent is patched, or the other way round. A stock _worker_loop handed a
list instead of its dataset would fail. So the patched __init__ starts the
worker with target functools.partial(_worker_loop_from_holder, <the
_worker_loop it would have started>): _worker_loop_from_holder, a function
of this module that the child imports by name, pops the dataset and calls
that _worker_loop the stock way. A stock child thus still works (and drops
the Process's reference; _worker_info then keeps the dataset until the
interpreter's final teardown); a patched child also clears _worker_info.
_worker_loop keeps its signature, so code calling it directly is unaffected.
A parent left stock sends the dataset itself to _worker_loop, as before,
which a patched child takes as ever.

Not carried, deliberately: _worker_loop's new parameter `dataset_holder` and
its `dataset = dataset_holder.pop()`; _worker_loop_from_holder does that pop
(above). The two comment typo fixes of the same release are not code.

Cost: torch.utils.data.dataloader is imported by `import torch`, where the
rewrite of these two long functions (compile) cost several M instructions,
and reading their source for the fingerprints about half of the 4.0 M that
the five checks `import torch` made on 2.13 cost (callgrind, 2026-12-05).
So apply() puts stand-ins in place (_patching.rewritten_on_first_call),
which check both fingerprints and compile each copy at its first call: the
first multi-process DataLoader iterator of a process, and a worker's first
loop.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "dataloader-worker-releases-dataset"

LOOP_VERIFIED = {
    "78b7c4dc9c7619f6": "2.7.0 - 2.9.1",
    "9f667195bea2a438": "2.10.0 - 2.13.0",
}
LOOP_FIXED = {"560b8fec46132004": "2.14.1 - 2.15.0"}
INIT_VERIFIED = {
    "aafa0650d55e2187": "2.7.0 - 2.8.0",
    "19dd62e86a5cde48": "2.9.1",
    "d3c3834e1d4b3169": "2.10.0 - 2.12.1",
    "1506ddc3e8963046": "2.13.0",
}
INIT_FIXED = {"418664c309de6035": "2.14.1 - 2.15.0"}

# The name under which the patched __init__ finds _worker_loop_from_holder
# in torch.utils.data.dataloader's namespace.
GLOBAL = "_torch_backports_worker_loop"

# pytorch/pytorch#190485, in the dedented sources. The __init__ edit keeps
# the line count, so torch's line numbers in the rest of it stay right.
INIT_EDITS = [
    (
        "        w = multiprocessing_context.Process(\n"
        "            target=_utils.worker._worker_loop,\n"
        "            args=(\n"
        "                self._dataset_kind,\n"
        "                self._dataset,\n",
        "        w = multiprocessing_context.Process(\n"
        "            target=functools.partial(%s, _utils.worker._worker_loop),\n"
        "            args=(\n"
        "                self._dataset_kind,\n"
        "                [self._dataset],  # popped by the worker: its Process keeps no dataset\n"
        % GLOBAL,
    ),
]
LOOP_EDITS = [
    (
        "    except KeyboardInterrupt:\n"
        "        # Main process will raise KeyboardInterrupt anyways.\n"
        "        pass\n"
        "    if done_event.is_set():\n",
        "    except KeyboardInterrupt:\n"
        "        # Main process will raise KeyboardInterrupt anyways.\n"
        "        pass\n"
        "    finally:\n"
        "        _worker_info = None\n"
        "    if done_event.is_set():\n",
    ),
]

def _worker_loop_from_holder(worker_loop: Callable, dataset_kind: Any, dataset_holder: list,
                             *args: Any, **kwargs: Any) -> None:
    """The worker process's target: take the dataset out of the one-item
    list the patched parent sent, so that the Process's args no longer hold
    it, and run `worker_loop` (torch's _worker_loop) with it."""
    return worker_loop(dataset_kind, dataset_holder.pop(), *args, **kwargs)


def apply(dataloader: ModuleType, release: Release) -> Revert:
    """Make torch.utils.data.dataloader start workers that pop the dataset
    from a one-item list, and _utils.worker._worker_loop clear _worker_info
    when it ends; return the undo."""
    utils = vars(dataloader).get("_utils")
    worker = getattr(utils, "worker", None)
    owner = vars(dataloader).get("_MultiProcessingDataLoaderIter")
    if not isinstance(worker, ModuleType) or not isinstance(owner, type):
        raise _patching.Unrecognised("%s has no _utils.worker module and "
                                     "_MultiProcessingDataLoaderIter class" % dataloader.__name__)
    if GLOBAL in vars(dataloader):
        raise RuntimeError("%s.%s exists: patched by torch-backports already"
                           % (dataloader.__name__, GLOBAL))
    # Both or neither: each stand-in checks both functions at its first call
    # (its partner check), and either refusal puts both back. _worker_loop
    # lives in another module than this target, which the restore point
    # taken for a failing apply() does not cover.
    originals = [(*_patching.own_attribute(owner_of, name), verified, fixed)
                 for owner_of, name, verified, fixed in (
                     (worker, "_worker_loop", LOOP_VERIFIED, LOOP_FIXED),
                     (owner, "__init__", INIT_VERIFIED, INIT_FIXED))]

    def check_both() -> None:
        for function, where, verified, fixed in originals:
            _patching.check(function, where, verified, fixed)

    # Checked and compiled at first use, not in every `import torch`: the
    # worker loop where a worker first runs it (the stand-in keeps its
    # name, so pickle still sends torch.utils.data._utils.worker._worker_loop
    # by reference).
    undo_loop = _patching.rewritten_on_first_call(worker, "_worker_loop", LOOP_EDITS,
                                                  LOOP_VERIFIED, LOOP_FIXED, partner=check_both)
    try:
        undo_init = _patching.rewritten_on_first_call(owner, "__init__", INIT_EDITS,
                                                      INIT_VERIFIED, INIT_FIXED,
                                                      partner=check_both)
    except BaseException:
        undo_loop()
        raise
    setattr(dataloader, GLOBAL, _worker_loop_from_holder)

    def revert() -> None:
        undo_init()
        undo_loop()
        if vars(dataloader).get(GLOBAL) is _worker_loop_from_holder:
            delattr(dataloader, GLOBAL)

    def check() -> None:
        _patching.check_put_off(undo_loop)
        _patching.check_put_off(undo_init)

    revert.check = check  # type: ignore[attr-defined]
    return revert


# A dataset whose __del__ writes a marker file when a worker frees it. It
# lives in a module of its own (written to a temporary folder on the path),
# since a spawn or forkserver worker imports the dataset's class by name and
# this program has no file. Each of spawn and forkserver (where the platform
# has it) starts one non-persistent worker; once the loader is exhausted (its
# workers joined), the worker must have freed the dataset before exiting, not
# at shutdown. (A forked worker keeps a copy of the parent's DataLoader, and
# with it the dataset, fixed or not.)
REPRODUCER = r'''
import multiprocessing, os, sys, tempfile, time
import torch
from torch.utils.data import DataLoader

folder = tempfile.mkdtemp(prefix="bp_dataset_")
with open(os.path.join(folder, "bp_marked_dataset.py"), "w") as f:
    f.write("""
import os, sys
import torch

class MarkedDataset(torch.utils.data.Dataset):
    def __init__(self, marker):
        self.marker = marker
        self.owner = os.getpid()
        self.data = torch.arange(6)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return self.data[index]

    def __del__(self):
        if os.getpid() != self.owner:
            with open(self.marker, "a") as marker:
                marker.write("%d %s\\n" % (os.getpid(), sys.is_finalizing()))
""")
sys.path.insert(0, folder)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [folder] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
from bp_marked_dataset import MarkedDataset

if __name__ == "__main__":
    methods = [m for m in ("spawn", "forkserver")
               if m in multiprocessing.get_all_start_methods()]
    for method in methods:
        marker = os.path.join(folder, method + ".released")
        loader = DataLoader(MarkedDataset(marker), batch_size=2, num_workers=1,
                            multiprocessing_context=method, persistent_workers=False)
        batches = [batch.tolist() for batch in loader]
        assert batches == [[0, 1], [2, 3], [4, 5]], batches
        del loader
        deadline = time.monotonic() + 10
        while not os.path.exists(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert os.path.exists(marker), (
            "%s: the DataLoader worker never released its dataset "
            "(Dataset.__del__ did not run in the worker)" % method)
        with open(marker) as f:
            lines = f.read().split()
        assert len(lines) == 2 and lines[1] == "False", (method, lines)
'''

BACKPORT = Backport(
    name=NAME,
    summary="a DataLoader worker started by spawn or forkserver frees its copy of the dataset "
    "when it ends, so Dataset.__del__ and finalizers run there and CUDA IPC storages "
    "are given back to the producer",
    headline="spawn/forkserver DataLoader workers never free the dataset (CUDA IPC memory grows)",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/190485",
        "https://github.com/pytorch/pytorch/issues/190268",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="the DataLoader worker never released its dataset",
    readme_symptom=(
        "a `DataLoader` worker started by spawn or forkserver (Python 3.14's default on "
        "Linux) never frees its copy of the dataset: the dataset's `__del__` and "
        "finalizers never run there, and CUDA tensors it received over IPC stay "
        "referenced, so the producer's CUDA memory grows with every epoch of "
        "non-persistent workers"
    ),
    readme_fix=(
        "[pytorch#190485]'s wire format: `_MultiProcessingDataLoaderIter.__init__` hands each "
        "worker the dataset in a one-item list that the worker pops, so the worker's "
        "`Process` args no longer hold it, and `_worker_loop` clears `_worker_info` in a "
        "`finally` when its loop ends. Both are recompiled from their installed source at "
        "first call, after a fingerprint check of each; the worker is started through a "
        "small function of this package that pops the dataset and calls `_worker_loop` the "
        "stock way, so a worker whose torch is not patched still works. Upstream's new "
        "`_worker_loop` parameter is not carried."
    ),
)
