"""Run by `python -m torch.distributed.run --nproc_per_node=2 ranks.py KIND DIR`:
each rank joins a gloo group on the CPU, then runs compile_kind.py, whose
JSON line goes to DIR/rank<N>.json (the ranks share torchrun's stdout, where
their lines once ran together). It never imports torch_backports."""

import contextlib
import os
import runpy
import sys
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
assert total.item() == dist.get_world_size()
kind, out = sys.argv[1], Path(sys.argv[2])
sys.argv = ["compile_kind.py", kind]
with open(out / ("rank%s.json" % os.environ["RANK"]), "w") as stdout, \
        contextlib.redirect_stdout(stdout):
    runpy.run_path(str(Path(__file__).with_name("compile_kind.py")), run_name="__main__")
dist.destroy_process_group()
