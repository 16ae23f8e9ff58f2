"""The documents' examples marked `<!-- runs -->` exit 0 on a real torch
wheel. The unit envs check that every example is complete Python but have
no torch to run these with (tests/test_doc_examples.py); here torch is
installed, so a failing `import torch` is a failure, not a skip."""

import pytest

import doc_blocks
from conftest import run_python
from test_real_torch import EXPECTED, needs_torch, pytestmark  # noqa: F401

RUNS = doc_blocks.blocks("runs")


@pytest.mark.parametrize("block", RUNS, ids=[b.where for b in RUNS])
def test_blocks_marked_runs_exit_0(block, tmp_path):
    """Run from an empty folder, so that the installed torch_backports, not
    the checkout's, is the one the example imports."""
    needs_torch()
    done = run_python(block.code, cwd=str(tmp_path))
    assert done.returncode == 0, "%s exited %d on torch %s:\n%s" % (
        block.where, done.returncode, EXPECTED, done.stderr[-3000:])
