"""Library("ns", ...).define("ns::foo(...) -> ...") records the op as ns::foo,
not ns::ns::foo, so tearing the library down works.

Upstream:
  https://github.com/pytorch/pytorch/pull/187970   the fix (first in 2.14.0)
  https://github.com/ROCm/pytorch/pull/3662        ROCm's cherry-pick into its 2.13
  https://github.com/ROCm/aiter/pull/4593          aiter's workaround (drops the prefix)

The C++ schema parser accepts a schema whose name carries the library's own
namespace, and registers torch.ops.ns.foo correctly. Library.define then builds
the Python-side qualname as `self.ns + "::" + name`, recording "ns::ns::foo" in
the library's _op_defs (and the module-global _defs). Every teardown that
splits those names as `ns, name = qualname.split("::")` then raises

  ValueError: too many values to unpack (expected 2)

On 2.7 - 2.12 that split is in Library._destroy, so an explicit _destroy() or
leaving a torch.library._scoped_library block raises (after the C++ side was
reset). 2.13 moved it into _clear_torch_ops_cache, which the library's
weakref.finalize (_del_library) also calls, so on 2.13 every such Library
prints "Exception ignored in: <finalize object ...>" and the traceback when it
is collected, at the latest at every interpreter exit.

Library.define, read from each release's torch/library.py (the line
`qualname = self.ns + "::" + name` occurs once in each):

  release          Library.define      lines
  2.7.0            ae1ca515d1327bca    51    (torch._running_with_deploy() check)
  2.8.0            80599607917606cc    52
  2.9.1 - 2.10.0   f211e2a7cb9f846b    49
  2.11.0 - 2.12.1  48026cb70c48ffda    50
  2.13.0           e6029e259defbeb2    55    (out/inplace schema validation)
  2.14.1 - 2.15.0  7089a74b5eb790e8    57    fixed

The patch recompiles the installed Library.define from its own source with
upstream's one-line edit (a name that already holds "::" is not prefixed)
and sets it on the class.

Not carried: 2.14 also made _clear_torch_ops_cache skip a qualname that does
not split into two parts ("defense-in-depth" for the finalizer). With define
fixed nothing puts such a name in _op_defs (define is the only writer), and on
2.7 - 2.12 the split sits inside _destroy, a different function, so carrying
it would be a second rewrite of code torch imports at start for no behaviour
this patch does not already give.

Cost: torch.library is imported by `import torch`, which defines ~130 ops
through Library.define itself. So the fingerprint is checked and the fixed
copy compiled only at the first define() of a schema whose name holds "::",
the one input where it differs from the shipped code; every other call goes
to the shipped define (_patching.rewritten_on_first_call with `when`).
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "library-define-qualified-name"

VERIFIED = {
    "ae1ca515d1327bca": "2.7.0",
    "80599607917606cc": "2.8.0",
    "f211e2a7cb9f846b": "2.9.1 - 2.10.0",
    "48026cb70c48ffda": "2.11.0 - 2.12.1",
    "e6029e259defbeb2": "2.13.0",
}
FIXED = {"7089a74b5eb790e8": "2.14.1 - 2.15.0"}

# pytorch/pytorch#187970, in the dedented source of Library.define.
EDITS = [
    (
        '    qualname = self.ns + "::" + name\n',
        '    qualname = name if "::" in name else f"{self.ns}::{name}"\n',
    ),
]


def apply(library: ModuleType, release: Release) -> Revert:
    """Replace library.Library.define by one that does not prefix a name
    already qualified; return the undo."""
    owner = _patching.own_class(library, "Library")
    # The fix changes only what a schema whose name holds "::" records, and
    # `import torch` defines ~130 ops itself: only such a call goes to the
    # fixed copy, compiled when first needed.
    return _patching.rewritten_on_first_call(owner, "define", EDITS, VERIFIED, FIXED,
                                             when=_names_a_namespace)


def _names_a_namespace(library: object, schema: object, *args: object, **kwargs: object) -> bool:
    """Whether define() is asked for a schema whose name holds "::", the one
    case where upstream's line differs from the shipped one."""
    return isinstance(schema, str) and "::" in schema.partition("(")[0]


# The op defined with its namespace in the schema: the library must record it
# so that an explicit teardown works (upstream's regression test) and a
# process defining it exits without "Exception ignored in" (2.13's symptom).
REPRODUCER = r'''
import subprocess, sys
import torch

lib = torch.library.Library("bp_qualname", "DEF")
lib.define("bp_qualname::foo(Tensor x) -> Tensor")
lib.impl("foo", lambda x: x + 1, "CompositeExplicitAutograd")
assert torch.equal(torch.ops.bp_qualname.foo(torch.zeros(2)), torch.ones(2))
lib._destroy()  # stock: ValueError: too many values to unpack (expected 2)
assert not hasattr(torch.ops.bp_qualname, "foo"), "foo outlived its library"

# the name is free again after the teardown
with torch.library._scoped_library("bp_qualname", "DEF") as lib2:
    lib2.define("bp_qualname::foo(Tensor x) -> Tensor")
    lib2.impl("foo", lambda x: x * 2, "CompositeExplicitAutograd")
    assert torch.equal(torch.ops.bp_qualname.foo(torch.ones(2)), torch.full((2,), 2.0))

child = subprocess.run(
    [sys.executable, "-c",
     "import torch\n"
     "lib = torch.library.Library('bp_qualname2', 'DEF')\n"
     "lib.define('bp_qualname2::foo(Tensor x) -> Tensor')\n"],
    capture_output=True, text=True, stdin=subprocess.DEVNULL)
assert child.returncode == 0, child.stderr
noise = [line for line in child.stderr.splitlines()
         if "Exception ignored" in line or "too many values to unpack" in line]
assert not noise, "a process defining ns::foo exits with:\n" + child.stderr
'''

BACKPORT = Backport(
    name=NAME,
    summary="Library('ns').define('ns::foo(...)') records ns::foo, not ns::ns::foo, so "
    "its teardown (and, on 2.13, every interpreter exit) no longer raises "
    "ValueError: too many values to unpack",
    headline='`define("ns::foo")` records `ns::ns::foo`: `ValueError` at teardown and exit',
    upstream=(
        "https://github.com/pytorch/pytorch/pull/187970",
        "https://github.com/ROCm/pytorch/pull/3662",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    # Python 3.11/3.12 say "(expected 2)", 3.13+ "(expected 2, got 3)".
    symptom="too many values to unpack",
    readme_symptom=(
        '`Library("ns", "DEF").define("ns::foo(...)")` records `ns::ns::foo`: '
        "`ValueError: too many values to unpack (expected 2)` at teardown, and on 2.13.0 "
        "`Exception ignored in: <finalize object …>` at every process exit"
    ),
    readme_fix=(
        "upstream's one line of `Library.define`: a name that already holds `::` is not "
        "prefixed. Not carried: 2.14's extra guard in the teardown, which nothing reaches "
        "once `define` is fixed."
    ),
)
