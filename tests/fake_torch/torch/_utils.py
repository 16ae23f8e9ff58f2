"""Stands for torch._utils, the first submodule real torch imports."""
