"""`python -m torch_backports`: the same as the `torch-backports` command."""

from torch_backports._cli import entry_point

entry_point()
