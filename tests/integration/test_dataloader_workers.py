"""dataloader-worker-releases-dataset on the real wheel, with the parent and its
DataLoader workers disagreeing about the backport.

A spawn or forkserver worker imports torch afresh, so torch-backports can be
on in the parent and off in the worker (TORCH_BACKPORTS_DISABLE set only
there), or the other way round. The patched parent sends the dataset in a
one-item list, which a stock _worker_loop would take for the dataset; these
runs show both mixes load every item, with get_worker_info() intact.
"""

import json

import pytest

from conftest import last_json, run_python
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401
from torch_backports import _registry
from torch_backports._versions import release_of

NAME = "dataloader-worker-releases-dataset"

DATASET = """
import torch

class StateDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, index):
        from torch_backports import _records
        info = torch.utils.data.get_worker_info()
        return {"index": index, "state": _records.get(%r)[0],
                "worker_info": info is not None and info.dataset is self}
""" % NAME

PROGRAM = r"""
import json, multiprocessing, os, sys
folder, mode = sys.argv[1], sys.argv[2]
sys.path.insert(0, folder)
os.environ["PYTHONPATH"] = folder
if mode == "parent-disabled":
    os.environ["TORCH_BACKPORTS_DISABLE"] = %(name)r
import torch
from torch.utils.data import DataLoader
from torch_backports import _records
from bp_state_dataset import StateDataset

result = {"parent": _records.get(%(name)r)[0]}
# Workers inherit the environment as it is when they start.
if mode == "child-disabled":
    os.environ["TORCH_BACKPORTS_DISABLE"] = %(name)r
else:
    os.environ.pop("TORCH_BACKPORTS_DISABLE", None)
for method in ("spawn", "forkserver"):
    if method in multiprocessing.get_all_start_methods():
        loader = DataLoader(StateDataset(), batch_size=None, num_workers=1,
                            multiprocessing_context=method)
        result[method] = [[item["index"], item["state"], item["worker_info"]] for item in loader]
print(json.dumps(result))
""" % {"name": NAME}


@pytest.mark.parametrize("mode, parent, child", [
    ("child-disabled", "applied", "disabled"),
    ("parent-disabled", "disabled", "applied"),
])
def test_parent_and_worker_may_disagree(mode, parent, child, tmp_path):
    needs_torch()
    if not _registry.load(NAME).needed_by(release_of(EXPECTED)):
        pytest.skip("torch %s is not claimed by %s" % (EXPECTED, NAME))
    (tmp_path / "bp_state_dataset.py").write_text(DATASET)
    done = run_python(PROGRAM.replace("sys.argv[1], sys.argv[2]",
                                      "%r, %r" % (str(tmp_path), mode)))
    assert done.returncode == 0, done.stderr[-4000:]
    result = last_json(done.stdout)
    assert result["parent"] == parent, result
    assert result["spawn"] == [[i, child, True] for i in range(3)], json.dumps(result)
    if "forkserver" in result:
        assert result["forkserver"] == [[i, child, True] for i in range(3)], json.dumps(result)
