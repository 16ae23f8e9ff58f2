"""Tensor.register_hook refreshes a stale view's grad_fn before it creates
the view's hook dict, instead of crashing the process.

Upstream:
  https://github.com/pytorch/pytorch/pull/196514    the fix (in 2.15.0)
  https://github.com/pytorch/pytorch/issues/196459  the bug (high priority, crash)

A segmentation fault in eager mode, on the CPU and on CUDA:

  >>> a = torch.ones(4, requires_grad=True)
  >>> base = a.clone()
  >>> view = base[:2]
  >>> base.mul_(2)              # view's autograd history is now stale
  >>> view.register_hook(print) # stock 2.7 - 2.14: Segmentation fault

The first register_hook of a tensor creates its `_backward_hooks` dict and,
where the tensor has a grad_fn, hands the dict to it
(`self.grad_fn._register_hook_dict(self)`). For a view whose base was
changed in place, reading `grad_fn` first refreshes the view's history, and
the refresh clears the view's hook dict, the one just created, before
`_register_hook_dict` uses it. A hook registered on a view that already had
one was attached to the old node instead of the current one.

2.15.0 reads `self.grad_fn` once right after the requires_grad check, before
the dict is looked at or made (`_ = self.grad_fn`, with a comment); nothing
else in the method changed. The backport makes exactly that edit in the
installed method (one line added, so the method's lines after it are one
off in a traceback). The PR's tests check the first hook on a stale view
(the crash) and that registering a second hook on a view whose base changed
in place since the first attaches it to the current node, so that it fires
in backward; the reproducer does both.

Read from each release's torch/_tensor.py:

  release            Tensor.register_hook
  2.7.0 - 2.14.1     e99f62d66cedd53c   (every release read: 2.7.0, 2.8.0,
                                         2.9.0, 2.9.1, 2.10.0, 2.11.0, 2.12.0,
                                         2.12.1, 2.13.0, 2.14.0, 2.14.1)
  2.15.0             54c62d6c81e3f773   refreshes grad_fn first (the fix)

Releases before 2.7 were not read. The crash is in C++ (the view's hook dict
is cleared under a caller still using it); the fix avoids it from Python,
so no C++ code needs to change.

Cost: `import torch` defines this method. Checking its source and compiling
the copy would be paid by every process that imports torch, so apply() puts
a stand-in in place (_patching.rewritten_on_first_call) that does both at
the first register_hook call.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "tensor-register-hook-stale-view"

VERIFIED = {"e99f62d66cedd53c": "2.7.0 - 2.14.1"}
FIXED = {"54c62d6c81e3f773": "2.15.0"}

# In the dedented source of register_hook, where the body is at 4 spaces.
EDITS = [
    (
        "    if self._backward_hooks is None:\n",
        "    # Accessing grad_fn refreshes a stale view before creating its hook dict.\n"
        "    _ = self.grad_fn\n"
        "    if self._backward_hooks is None:\n",
    ),
]


def apply(tensor: ModuleType, release: Release) -> Revert:
    """Put a stand-in for torch._tensor.Tensor.register_hook that makes the
    fixed copy at its first call; return the undo."""
    owner = _patching.own_class(tensor, "Tensor")
    return _patching.rewritten_on_first_call(owner, "register_hook", EDITS, VERIFIED, FIXED)


# The crash is run in a child process, so that stock torch fails with a
# message (the symptom) rather than a bare signal. Then the PR's second
# check: a hook added to a view after its base changed in place fires.
REPRODUCER = r'''
import subprocess, sys
import torch

CRASH = """
import torch
a = torch.ones(4, requires_grad=True)
base = a.clone()
view = base[:2]
base.mul_(2)
view.register_hook(lambda grad: grad * 3)
view.sum().backward()
assert a.grad.tolist() == [6.0, 6.0, 0.0, 0.0], a.grad
"""
child = subprocess.run([sys.executable, "-c", CRASH], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=600)
if child.returncode != 0:
    sys.stderr.write(child.stderr)
    raise SystemExit("register_hook on a view whose base changed in place ended the "
                     "process with exit status %d" % child.returncode)

fired = []
a = torch.ones(4, requires_grad=True)
base = a.clone()
view = base[:2]
view.register_hook(lambda grad: fired.append("first"))
base.mul_(2)
view.register_hook(lambda grad: fired.append("second"))
view.sum().backward()
if "second" not in fired:
    raise SystemExit("register_hook on a view whose base changed in place: the hook "
                     "never fired (fired: %s)" % fired)
'''

BACKPORT = Backport(
    name=NAME,
    summary="Tensor.register_hook on a view whose base changed in place no longer "
    "crashes the process (segmentation fault) and attaches to the current grad_fn",
    headline="**segmentation fault**: `register_hook` on a view whose base changed in place",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/196514",
        "https://github.com/pytorch/pytorch/issues/196459",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="register_hook on a view whose base changed in place",
    readme_symptom=(
        "**segmentation fault** in eager mode: `view.register_hook(fn)` on a view whose "
        "base changed in place (`base = a.clone(); view = base[:2]; base.mul_(2)`); a "
        "later hook on such a view never fires"
    ),
    readme_fix=(
        "2.15's one line in `Tensor.register_hook`, `_ = self.grad_fn` before the hook "
        "dict is looked at, so a stale view's history is refreshed before its dict is "
        "made and handed to the current node. `import torch` defines the method, so a "
        "stand-in makes the fixed copy at the first `register_hook` call."
    ),
)
