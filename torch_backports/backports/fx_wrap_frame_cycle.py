"""torch.fx.wrap lets go of its caller's frames when it returns, instead of
keeping the whole calling stack alive until the cyclic garbage collector runs.

Upstream:
  https://github.com/pytorch/pytorch/issues/195586  the bug (release triage)
  https://github.com/pytorch/pytorch/pull/196091    proposes this same change
  The fix is in torch 2.15.0 (read from its wheel).

Memory held, on every device:

  >>> gc.disable()                    # as torchtitan and Megatron do in training
  >>> def load():
  ...     activations = torch.empty(2**28)            # 1 GiB
  ...     exec("import torch.fx\ntorch.fx.wrap('len')", {})
  >>> load()                          # stock 2.7 - 2.14: the 1 GiB stays allocated

wrap() looks up its caller, which must be a module's top level, through
`currentframe = inspect.currentframe()` and `f = currentframe.f_back`. The
local `currentframe` is wrap's own frame, so the frame refers to itself: a
reference cycle that, once wrap returns (or raises, when not called at a
module's top level), keeps that frame and through `f_back` every frame
below it, with their locals, alive until the cyclic collector runs. That
stack is deep when a module calling wrap is first imported lazily from
inside running code, and with automatic collection off it is never freed.

2.15.0 sets `f = None` and runs the rest of the function in a
`try: ... finally: del currentframe, f`, with a comment; nothing else
changed. The backport makes that change to the installed function's own
source (_patching.rewritten): the lines after `currentframe = ...` up to
`return fn_or_name`, whose text differs between releases (asserts before
2.11), go into the try block as they are, so in a traceback they are two lines
off the file's (and `return`, five).

Read from each release's torch/fx/_symbolic_trace.py:

  release            wrap
  2.7.0              b368e453105ef1e6
  2.8.0 - 2.10.0     ff863e18f1a7a81e   (2.8.0, 2.9.0, 2.9.1, 2.10.0)
  2.11.0             99b6a546bb10d0f7   raises AssertionError, not assert
  2.12.0 - 2.14.1    fd9a44509c46266b   (2.12.0, 2.12.1, 2.13.0, 2.14.0, 2.14.1)
  2.15.0             838bf01476e8359e   try/finally (the fix)

torch.fx re-exports the function (`from ._symbolic_trace import wrap`).
The hook runs when _symbolic_trace has executed, before torch.fx binds the
name, so torch.fx.wrap is ours; where torch.fx was imported before
torch-backports armed, apply() sets torch.fx.wrap as well.

Cost: `import torch` imports _symbolic_trace, and checking wrap and
compiling the copy there cost 3.7 M instructions (callgrind, torch 2.13.0,
2026-12-07), the largest part of what torch-backports added to `import
torch`. So until wrap's first call a stand-in takes its place
(_patching.rewritten_on_first_call), as for the other functions `import
torch` loads. wrap reads its caller's frame, which the stand-in would be;
so the stand-in calls it through _as_its_caller, which makes the call from
code run at the caller's top level, in the caller's globals, the two things
wrap reads of that frame. _symbolic_trace.wrap is then the fixed copy;
torch.fx.wrap stays the stand-in, which costs a few microseconds a call
(wrap is called once per wrapped name, when a module is imported).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, Callable, List, Tuple

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "fx-wrap-frame-cycle"

VERIFIED = {
    "b368e453105ef1e6": "2.7.0",
    "ff863e18f1a7a81e": "2.8.0 - 2.10.0",
    "99b6a546bb10d0f7": "2.11.0",
    "fd9a44509c46266b": "2.12.0 - 2.14.1",
}
FIXED = {"838bf01476e8359e": "2.15.0"}

_FRAME = "    currentframe = inspect.currentframe()\n"
_RETURN = "    return fn_or_name\n"


def in_try_finally(source: str) -> List[Tuple[str, str]]:
    """The edit of wrap's dedented source: the lines between `currentframe
    = ...` and `return fn_or_name` into a try block that deletes both frame
    references, as in 2.15.0."""
    start = source.index(_FRAME) + len(_FRAME)
    body = source[start:source.index(_RETURN, start)]
    indented = "".join("    " + line if line.strip() else line
                       for line in body.splitlines(keepends=True))
    return [(_FRAME + body, _FRAME + "    f = None\n    try:\n" + indented
             + "    finally:\n"
             "        # Holding our own frame in a local makes a reference cycle that keeps the\n"
             "        # entire calling stack (and its tensors) alive until the next gc.\n"
             "        del currentframe, f\n")]


def apply(symbolic_trace: ModuleType, release: Release) -> Revert:
    """Put a stand-in for torch.fx._symbolic_trace.wrap (and torch.fx.wrap,
    where it is already bound) that makes the copy in a try/finally at its
    first call; return the undo."""
    original, _ = _patching.own_attribute(symbolic_trace, "wrap")
    with _patching.all_or_nothing() as reverts:  # torch.fx is outside the snapshot
        reverts.append(_patching.rewritten_on_first_call(
            symbolic_trace, "wrap", in_try_finally, VERIFIED, FIXED, through=_as_its_caller))
        reverts.append(_patching.rebind(("torch.fx",), "wrap", original,
                                        vars(symbolic_trace)["wrap"]))
    return _patching.undo_all(reverts)


# The call as wrap's caller would make it at a module's top level: code
# named "<module>", exec'd in that module's globals.
_AT_TOP_LEVEL = compile("result = wrap(*args, **kwargs)", "<torch.fx.wrap's caller>", "exec")


def _as_its_caller(function: Callable, args: tuple, kwargs: dict) -> Any:
    """Call `function` (wrap or its fixed copy) for the stand-in's caller,
    two frames up: wrap checks that its caller's code is a module's top
    level ("<module>") and records that module's globals. Where the caller
    is a top level, the call is made from code exec'd there, which wrap
    sees as the caller; anywhere else it is made from here, and wrap raises
    as it would have for the real caller."""
    caller = sys._getframe(2)
    at_top_level, scope = caller.f_code.co_name == "<module>", caller.f_globals
    del caller
    if not at_top_level:
        return function(*args, **kwargs)
    names = {"wrap": function, "args": args, "kwargs": kwargs}
    exec(_AT_TOP_LEVEL, scope, names)
    return names["result"]


# What torch.fx.wrap's callers leave behind, with automatic collection off:
# a module importing under a function holding a large tensor, and a call
# from inside a function, which raises. Each must be freed by reference
# counting alone.
REPRODUCER = r'''
import gc, sys, weakref
import torch
import torch.fx

gc.disable()


class Activations:
    pass


def import_a_module_that_wraps():
    held = Activations()
    exec(compile("import torch.fx\ntorch.fx.wrap('len')\n", "<module>", "exec"), {})
    return weakref.ref(held)


def wrap_inside_a_function():
    held = Activations()
    try:
        torch.fx.wrap("len")
    except NotImplementedError:
        pass
    else:
        raise AssertionError("torch.fx.wrap inside a function did not raise")
    return weakref.ref(held)


gc.collect()
kept = [f.__name__ for f in (import_a_module_that_wraps, wrap_inside_a_function) if f()() is not None]
if kept:
    raise SystemExit("torch.fx.wrap kept its caller's frames alive after it returned: "
                     "the locals of %s were not freed" % ", ".join(kept))
'''

BACKPORT = Backport(
    name=NAME,
    summary="torch.fx.wrap no longer keeps its caller's whole stack (and its tensors) "
    "alive in a reference cycle until the cyclic garbage collector runs",
    headline="memory held: `torch.fx.wrap` keeps its caller's stack alive in a reference cycle",
    upstream=(
        "https://github.com/pytorch/pytorch/issues/195586",
        "https://github.com/pytorch/pytorch/pull/196091",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="torch.fx.wrap kept its caller's frames alive",
    readme_symptom=(
        "**memory held**: `torch.fx.wrap` keeps its caller's whole stack, with its "
        "tensors, alive in a reference cycle until the cyclic GC runs, and for good where "
        "training loops turn automatic GC off"
    ),
    readme_fix=(
        "2.15's `try: … finally: del currentframe, f` in `torch.fx.wrap`, around each "
        "release's own lines. `import torch` loads `wrap`, so a stand-in makes the fixed "
        "copy at its first call; since `wrap` reads its caller's frame, the stand-in calls "
        "it from code run at its caller's top level, in its caller's globals."
    ),
)
