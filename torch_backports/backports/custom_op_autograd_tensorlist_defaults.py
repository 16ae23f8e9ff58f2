"""A torch.library.custom_op with a list[Tensor] argument can be
differentiated when the caller leaves out a defaulted argument; a backward
formula that returns the wrong number of gradients is told so in its own
terms.

Upstream:
  https://github.com/pytorch/pytorch/pull/185132   the fix (first in 2.14.0)
  https://github.com/pytorch/pytorch/pull/186226   the gradient-count error (2.14.0)
  https://github.com/pytorch/pytorch/issues/137219 the off-by-one count message

torch._library.autograd.make_autograd_impl builds the autograd kernel of a
custom op (custom_op(...).register_autograd, torch.library.register_autograd)
as a generated autograd.Function, wrapped by supports_tensorlist when the op
has a TensorList-like argument or return. The dispatcher drops trailing
arguments equal to their defaults, so the Function sees fewer inputs than the
schema has, while setup_context gets the default-filled inputs and the
documented backward returns one gradient per schema input. supports_tensorlist
compares the returned structure with the (shorter) inputs it recorded, and
.backward() raises, in eager mode and under torch.compile alike:

  RuntimeError: Expected the return from backward to be of the same structure
  as the inputs. Got: ... (return from backward), ... (inputs)

A formula returning the wrong number of gradients got autograd's message
counting the hidden metadata input ("function GeneratedBackwardFor_...
returned an incorrect number of gradients (expected 3, got 2)", issue
137219); 2.14 checks the count first: "The backward formula for ns.op.default
returned an incorrect number of gradients (expected 1 or 2, got 3). ...", and
rejects a non-None gradient for a defaulted input that was not passed
("... returned a non-None gradient for an input that was not passed to the
operator. ...").

make_autograd_impl, read from each release's torch/_library/autograd.py:

  release          make_autograd_impl   lines
  2.7.0            9fa9c90a18e476f1     94   (requires_grad test by tree_any_only)
  2.8.0 - 2.12.1   96b6a16dea95d289     92
  2.13.0           53202c3c6607be8a     103  (raises for out= ops needing grad)
  2.14.1 - 2.15.0  2c2e7fa99a042b12     127  fixed

The releases differ only in autograd_impl, the kernel's last part; the text
the fix changes (the top, backward, and the supports_tensorlist decision) is
the same in all of them, so one set of edits applies to every claimed
release. supports_tensorlist itself is unchanged by 2.14 (38db91f8f7d73a33 in
2.13.0 - 2.15.0).

The patch recompiles the installed make_autograd_impl from its own source
with 2.14's edits, for the module attribute that custom_ops.py and
torch.library look up at each registration (when, under Cost):
  - the schema's positional-argument count and TensorList-likeness are
    computed once, up front;
  - backward checks the number of gradients (one per forward input, or one
    per positional schema argument), requires None for the inputs the
    dispatcher dropped, and, for TensorList ops, trims those slots so the
    structure matches the inputs supports_tensorlist recorded.

Not carried: 2.14 also renames forward_no_grad to redispatch_no_grad, which
takes (keyset, args, kwargs) instead of packing them into a Metadata, and
computes utils.is_out(op) once instead of per call on 2.13 (2.7 - 2.12 have
no out= test). Those change no behaviour, and the out= part does not exist
on most claimed releases.

Cost: torch._library.autograd is imported by `import torch`, and `import
torch` itself makes 114 kernels through make_autograd_impl (2.10 - 2.14: 112
prims, rngprims, debug_mode_ops), which costs nothing extra only if the
patch compiles nothing there: compiling the edited function is ~1 ms, ~10 M
instructions, 0.2 % of `import torch` (callgrind, torch 2.13.0, 2026-12-04).
So the patch puts a stand-in in place (_patching.rewritten_on_first_call)
that sends the calls made while torch's own __init__ is still executing to
the shipped make_autograd_impl, and every later call to the fixed copy,
checked by fingerprint and compiled at the first of them. The kernels
made during `import torch` behave alike either way: those ops have no
backward formula (checked on 2.10.0, 2.12.1, 2.13.0 and 2.14.1: no
CustomOpDef in OPDEFS has one after `import torch`), and the edits change
only what happens after a formula returns. An op defined by any later import,
torch's own or the user's, gets the fixed kernel.
"""

from __future__ import annotations

import sys
from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "custom-op-autograd-tensorlist-defaults"

VERIFIED = {
    "9fa9c90a18e476f1": "2.7.0",
    "96b6a16dea95d289": "2.8.0 - 2.12.1",
    "53202c3c6607be8a": "2.13.0",
}
FIXED = {"2c2e7fa99a042b12": "2.14.1 - 2.15.0"}

# pytorch/pytorch#185132 and #186226, as in 2.14's make_autograd_impl.
EDITS = [
    (
        "    has_kwarg_only_args = utils.has_kwarg_only_args(op._schema)\n",
        "    schema = op._schema\n"
        "    has_kwarg_only_args = utils.has_kwarg_only_args(op._schema)\n"
        "    num_positional_args = sum(not a.kwarg_only for a in schema.arguments)\n"
        "    has_tensorlist_like_args = any(\n"
        "        utils.is_tensorlist_like_type(a.type)\n"
        "        for a in (*schema.arguments, *schema.returns)\n"
        "    )\n",
    ),
    (
        "                ctx.needs_input_grad = ctx.needs_input_grad[:-1]\n"
        "                result = info._backward_fn(ctx, *grads)\n"
        "            finally:\n"
        "                ctx.needs_input_grad = prev_needs_input_grad\n"
        "            if isinstance(result, tuple):\n"
        "                return (*result, None)\n",
        "                ctx.needs_input_grad = prev_needs_input_grad[:-1]\n"
        "                result = info._backward_fn(ctx, *grads)\n"
        "            finally:\n"
        "                ctx.needs_input_grad = prev_needs_input_grad\n"
        "            num_actual_inputs = len(prev_needs_input_grad) - 1\n"
        "            valid_return_counts = {num_actual_inputs, num_positional_args}\n"
        "            actual = len(result) if isinstance(result, tuple) else 1\n"
        "            if actual not in valid_return_counts:\n"
        "                expected = (\n"
        "                    str(num_actual_inputs)\n"
        "                    if num_actual_inputs == num_positional_args\n"
        "                    else f\"{num_actual_inputs} or {num_positional_args}\"\n"
        "                )\n"
        "                raise RuntimeError(\n"
        "                    f\"The backward formula for {op} returned an incorrect \"\n"
        "                    f\"number of gradients (expected {expected}, got {actual}). \"\n"
        "                    f\"Expected one gradient for each forward input, or for \"\n"
        "                    f\"each positional input to the operator. Use None for \"\n"
        "                    f\"inputs that do not require a gradient.\"\n"
        "                )\n"
        "            if isinstance(result, tuple):\n"
        "                extra_grads = result[num_actual_inputs:]\n"
        "                if any(grad is not None for grad in extra_grads):\n"
        "                    raise RuntimeError(\n"
        "                        f\"The backward formula for {op} returned a non-None \"\n"
        "                        f\"gradient for an input that was not passed to the \"\n"
        "                        f\"operator. Defaulted inputs that were not passed \"\n"
        "                        f\"through autograd must return None.\"\n"
        "                    )\n"
        "                if has_tensorlist_like_args:\n"
        "                    result = result[:num_actual_inputs]\n"
        "                return (*result, None)\n",
    ),
    (
        "    schema = op._schema\n"
        "    if any(\n"
        "        utils.is_tensorlist_like_type(a.type)\n"
        "        for a in (*schema.arguments, *schema.returns)\n"
        "    ):\n"
        "        Generated = supports_tensorlist(Generated)\n",
        "    if has_tensorlist_like_args:\n"
        "        Generated = supports_tensorlist(Generated)\n",
    ),
]


def apply(autograd: ModuleType, release: Release) -> Revert:
    """Make autograd.make_autograd_impl the one with 2.14's backward for
    every op defined once `import torch` is done; return the undo."""
    return _patching.rewritten_on_first_call(autograd, "make_autograd_impl", EDITS, VERIFIED,
                                             FIXED, when=_after_import_torch)


def _after_import_torch(*args: object, **kwargs: object) -> bool:
    """False while torch's __init__ is executing (its own ops, see Cost)."""
    spec = getattr(sys.modules.get("torch"), "__spec__", None)
    # importlib sets _initializing for the duration of a module's exec; the
    # interpreter reads it too, for "partially initialized module" errors.
    return not getattr(spec, "_initializing", False)


REPRODUCER = r'''
import torch

# A TensorList op whose trailing float keeps its default at the call site:
# the dispatcher drops it, setup_context sees it filled in.
@torch.library.custom_op("bp_tl::scaled_sum", mutates_args=())
def scaled_sum(xs: list[torch.Tensor], alpha: float = 2.0) -> torch.Tensor:
    return sum(x * alpha for x in xs)

@scaled_sum.register_fake
def _(xs, alpha=2.0):
    return torch.empty_like(xs[0])

def setup_context(ctx, inputs, output):
    xs, alpha = inputs
    ctx.alpha = alpha
    ctx.n = len(xs)

def backward(ctx, grad):
    return [grad * ctx.alpha] * ctx.n, None  # one per schema input

scaled_sum.register_autograd(backward, setup_context=setup_context)

def check(fn):
    xs = [torch.randn(3, requires_grad=True) for _ in range(2)]
    fn(xs).sum().backward()
    for x in xs:
        torch.testing.assert_close(x.grad, torch.full((3,), 2.0))

check(lambda xs: scaled_sum(xs))  # eager; stock: "Expected the return from
# backward to be of the same structure as the inputs"
check(lambda xs: scaled_sum(xs, 2.0))  # passed explicitly (dropped as well)
check(torch.compile(lambda xs: scaled_sum(xs), backend="aot_eager", fullgraph=True))

# A non-None gradient for the dropped default is an error, not ignored.
@torch.library.custom_op("bp_tl::bad_extra", mutates_args=())
def bad_extra(xs: list[torch.Tensor], alpha: float = 2.0) -> torch.Tensor:
    return sum(x * alpha for x in xs)

bad_extra.register_autograd(lambda ctx, g: ([g, g], torch.zeros(())),
                            setup_context=lambda ctx, inputs, output: None)
try:
    bad_extra([torch.randn(3, requires_grad=True) for _ in range(2)]).sum().backward()
except RuntimeError as e:
    assert "returned a non-None gradient for an input that was not passed" in str(e), e
else:
    raise AssertionError("a gradient for a dropped default was accepted")

# The wrong number of gradients is counted without the hidden metadata input
# (pytorch#137219): one Tensor input, the formula returns two.
@torch.library.custom_op("bp_tl::sin", mutates_args=())
def sin(x: torch.Tensor) -> torch.Tensor:
    return x.sin()

sin.register_autograd(lambda ctx, g: (g, g), setup_context=lambda ctx, inputs, output: None)
try:
    sin(torch.randn(3, requires_grad=True)).sum().backward()
except RuntimeError as e:
    assert ("The backward formula for bp_tl.sin.default returned an incorrect number "
            "of gradients (expected 1, got 2)") in str(e), e
else:
    raise AssertionError("two gradients for one input were accepted")

# A non-TensorList op with a dropped default still accepts one gradient per
# schema input, and one per passed input.
@torch.library.custom_op("bp_tl::mul", mutates_args=())
def mul(x: torch.Tensor, alpha: float = 3.0) -> torch.Tensor:
    return x * alpha

def mul_setup(ctx, inputs, output):
    ctx.alpha = inputs[1]

mul.register_autograd(lambda ctx, g: (g * ctx.alpha, None), setup_context=mul_setup)
x = torch.randn(3, requires_grad=True)
mul(x).sum().backward()
torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
'''

BACKPORT = Backport(
    name=NAME,
    summary="custom ops with a list[Tensor] argument backpropagate when a defaulted "
    "argument is left out, instead of raising \"Expected the return from backward to be "
    "of the same structure as the inputs\"; a wrong gradient count is reported as such",
    headline="backward fails for a `list[Tensor]` custom op called without a defaulted argument",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/185132",
        "https://github.com/pytorch/pytorch/pull/186226",
        "https://github.com/pytorch/pytorch/issues/137219",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="Expected the return from backward to be of the same structure as the inputs",
    readme_symptom=(
        "`RuntimeError: Expected the return from backward to be of the same structure as "
        "the inputs` for a `torch.library.custom_op` with a `list[Tensor]` argument when "
        "the caller leaves out a defaulted argument, eager and compiled"
    ),
    readme_fix=(
        "2.14's edits to `make_autograd_impl`: the backward checks the gradient count "
        "with 2.14's message, requires `None` for the defaulted inputs the dispatcher "
        "dropped, and trims their slots for ops with a `list[Tensor]` argument. Not "
        "carried: 2.14's renames, which change no behaviour. The ops torch defines inside "
        "`import torch` (prims and two others, none with a backward formula) keep the "
        "shipped kernel, so that `import torch` compiles nothing; every op defined "
        "afterwards gets the fixed one."
    ),
)
