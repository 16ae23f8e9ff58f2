"""Run by `python -m torch.distributed.run --nproc_per_node=2 ranks.py KIND`:
each rank joins a gloo group on the CPU, then runs compile_kind.py (which
prints that rank's JSON line). It never imports torch_backports."""

import runpy
import sys
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
assert total.item() == dist.get_world_size()
sys.argv = ["compile_kind.py", sys.argv[1]]
runpy.run_path(str(Path(__file__).with_name("compile_kind.py")), run_name="__main__")
dist.destroy_process_group()
