"""Inductor no longer folds a floating-point or complex `x * 0` to 0, so NaN
and Inf in x reach the result as in eager.

Upstream:
  https://github.com/pytorch/pytorch/pull/186281   the fix (first in 2.14.0)
  https://github.com/pytorch/pytorch/pull/186379   its re-land, same change
  https://github.com/pytorch/pytorch/pull/187580   its second re-land, same change

A silent wrong result, no error:

  >>> x = torch.tensor([nan, inf, -inf, 2.])
  >>> x * 0 + 1                                  # eager
  tensor([nan, nan, nan, 1.])
  >>> torch.compile(lambda x: x * 0 + 1)(x)      # stock 2.8 - 2.13
  tensor([1., 1., 1., 1.])

The uniform-value constant folder of inductor's joint-graph passes
(torch._inductor.fx_passes.joint_graph.constant_fold_uniform_value, run on
every inference and joint graph) seeds its constant propagation with
UniformValueConstantFolder._add_peephole_patterns: every aten.mul.Tensor or
aten.mul.Scalar node with a literal Python int 0 among its args is taken to
be a tensor full of 0 of its output dtype, whatever the other factor is.
That holds for integer and bool tensors only: in IEEE arithmetic nan * 0 and
+-inf * 0 are nan. The fold then propagates (x * 0 + 1 becomes full(1)), so
the NaN/Inf vanish from everything downstream. A float 0.0 multiplier was
never folded (is_zero_int requires an int).

Read from each release's torch/_inductor/fx_passes/joint_graph.py:

  release          UniformValueConstantFolder._add_peephole_patterns
  2.7.0            absent: no peephole; a pointwise node is folded only by
                   running it on known uniform inputs, so x * 0 with x
                   unknown stays a multiply (not affected; the reproducer
                   passes on stock 2.7.0)
  2.8.0 - 2.13.0   e581e62d4086af49   folds x * 0 for every dtype (the bug;
                   2.8.0, 2.9.1, 2.10.0, 2.11.0, 2.12.0, 2.12.1, 2.13.0)
  2.14.1           15c8ded0967ee53b   skips floating and complex dtypes
                   (2.14.0 is taken as the first fixed release, as filed;
                   its wheel was not read here)
  2.15.0           ec71466fa108054a   the same, `arg: object` annotation

Releases in between whose wheels were not read (2.8.1, 2.9.0, ...) are
patched only where the method has the fingerprint above.

_add_peephole_patterns is called from UniformValueConstantFolder.__init__
only, and UniformValueConstantFolder is used by constant_fold_uniform_value
only; freezing's constant folding (torch._inductor.constant_folding) has no
such peephole. The 2.13.0 -> 2.14.1 diff of the method is exactly the fix's
skip and its comment. The same diff of joint_graph.py also changes
remove_no_ops (Python-scalar operands of add/sub/mul/div, conjugate views)
and adds the FlexGEMM guard: those are other PRs and not carried.

The patch recompiles the installed _add_peephole_patterns from its own
source with upstream's edit (torch_backports._patching.rewritten), after
checking it is the 2.8.0 - 2.13.0 code, and sets it on the class. Integer
and bool `x * 0` are still folded, as on 2.14+.

Graphs compiled by stock torch and stored in the inductor caches (the FX
graph cache and the AOTAutograd cache) hold the folded result, and their
keys hash torch's files on disk, which the patch leaves as they are. So the
backport declares changes_codegen: while it is applied, those keys name it
(torch_backports._cache_key), a graph stock torch cached is compiled anew
once, and the fixed graph is cached under its own key. Where the keys
cannot name it, it is not applied.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "inductor-mul-zero-nan"

VERIFIED = {"e581e62d4086af49": "2.8.0 - 2.13.0"}
FIXED = {
    "15c8ded0967ee53b": "2.14.1",
    "ec71466fa108054a": "2.15.0",
}

# pytorch/pytorch#186281, in the dedented source of _add_peephole_patterns
# (its body at 4 spaces, the loop's at 8).
EDITS = [
    (
        "        if not any(is_zero_int(a) for a in op.args):\n"
        "            continue\n",
        "        if not any(is_zero_int(a) for a in op.args):\n"
        "            continue\n"
        "\n"
        "        # x * 0 is only uniformly 0 for integer/bool dtypes. For floating\n"
        "        # point (and complex) dtypes nan * 0 == nan and (+/-inf) * 0 == nan,\n"
        "        # so folding x * 0 -> 0 would incorrectly drop NaN/Inf when x is not\n"
        "        # known to be finite.\n"
        "        if tensor_val.dtype.is_floating_point or tensor_val.dtype.is_complex:\n"
        "            continue\n",
    ),
]


def apply(joint_graph: ModuleType, release: Release) -> Revert:
    """Replace joint_graph.UniformValueConstantFolder._add_peephole_patterns
    by the installed one with upstream's dtype check; return the undo."""
    owner = _patching.own_class(joint_graph, "UniformValueConstantFolder")
    method = vars(owner).get("_add_peephole_patterns")
    if method is None:  # 2.7.0 and older: no peephole, nothing folds x * 0
        raise _patching.Unrecognised("UniformValueConstantFolder has no _add_peephole_patterns")
    fixed = _patching.rewritten(method, EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(owner, "_add_peephole_patterns", fixed, VERIFIED, FIXED)


# pytorch/pytorch#186281's regression tests (test_mul_by_zero_extremal,
# test_uniform_value_mul_by_zero): float and complex `x * 0` keep nan/inf as
# in eager, integer and bool `x * 0` are still 0. (Inductor warns that it
# does not generate code for complex operators, as stock torch does.)
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
def f(x, n, b, c):
    return x * 0 + 1, n * 0 + 1, b * 0 + 1, c * 0 + 1

inf, nan = float("inf"), float("nan")
args = (torch.tensor([nan, inf, -inf, 2.0]), torch.tensor([3, -5, 7, 0]),
        torch.tensor([True, False]), torch.tensor([complex(nan, 0), complex(inf, 1), 2 + 1j]))
got = torch.compile(f, backend="inductor", fullgraph=True)(*args)
want = f(*args)
for x, g, w in zip(args, got, want):
    try:
        torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
    except AssertionError:
        raise AssertionError("compiled x * 0 + 1 dropped nan/inf: %s for x = %s, eager gives %s"
                             % (g.tolist(), x.tolist(), w.tolist())) from None
# integer and bool x * 0 are still exactly 0
assert got[1].tolist() == [1, 1, 1, 1] and got[2].tolist() == [1, 1], got
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor keeps nan/inf in a floating-point x * 0 (eager's result) instead "
    "of folding it to 0",
    headline="**silent wrong result**: compiled `x * 0` drops NaN and Inf",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/186281",
        "https://github.com/pytorch/pytorch/pull/187580",
    ),
    first_affected=(2, 8, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="compiled x * 0 + 1 dropped nan/inf",
    changes_codegen=True,
    readme_symptom=(
        "**silent wrong result**: compiled `x * 0` folds to 0 for floats, so NaN and Inf "
        "vanish (`torch.compile(lambda x: x * 0 + 1)(tensor([nan, inf, 2.]))` gives `[1, "
        "1, 1]`, eager `[nan, nan, 1]`)"
    ),
    readme_fix=(
        "upstream's two lines in `UniformValueConstantFolder._add_peephole_patterns`: the "
        "zero fold is skipped for floating and complex dtypes; integer and bool `x * 0` "
        "still fold. It changes generated code, so while it is applied inductor's FX "
        "graph and AOTAutograd cache keys name it (`torch_backports/_cache_key.py`): a "
        "graph that stock torch cached yesterday, wrong result and all, is compiled anew "
        "once, and stock torch never loads the fixed graph."
    ),
)
