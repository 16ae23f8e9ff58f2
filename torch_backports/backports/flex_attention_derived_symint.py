"""A compiled flex_attention whose mask_mod or score_mod closes over an
expression of a dynamic int (`pos + 1`) compiles, instead of failing
inductor's lowering with "'ShapeAsConstantBuffer' object has no attribute
'dtype'".

Upstream:
  https://github.com/pytorch/pytorch/pull/182610   the fix (first in 2.13.0)
  https://github.com/pytorch/pytorch/issues/182606 the bug (a ring-buffer
                                                   KV-cache decode)
  https://github.com/pytorch/pytorch/issues/157833 the same error for a bare
                                                   dynamic int, fixed in 2.9

  >>> def fn(q, k, v, pos: int):
  ...     last = pos + 1
  ...     mask = lambda b, h, q_idx, kv_idx: kv_idx <= last
  ...     bm = create_block_mask(mask, None, None, q.shape[2], k.shape[2], device=q.device)
  ...     return flex_attention(q, k, v, block_mask=bm)
  >>> f = torch.compile(fn)
  >>> f(q, k, v, 5); f(q, k, v, 6)    # CUDA tensors; the second call makes pos dynamic
  InductorError: LoweringException: AttributeError: 'ShapeAsConstantBuffer'
  object has no attribute 'dtype'   target: flex_attention   # stock 2.10 - 2.12

A value a score_mod or mask_mod closes over reaches the flex_attention
lowering in its *_other_buffers: tensors as IR nodes, a dynamic int as a
sympy expression. maybe_realize (torch/_inductor/kernel/flex/common.py)
realizes each one except a sympy.Symbol, the fix of #157833. `pos + 1` is a
sympy.Add, not a Symbol, so it was realized: ExternKernel.realize_input makes
a ShapeAsConstantBuffer of it, and require_stride1 copies that and asks it
for a dtype it does not have. Every lowering of flex_attention calls
maybe_realize on its captured values (the Triton kernel, the decoding kernel,
the CPU template, the backward), so any sympy expression other than a bare
symbol failed them all, on the GPU and on the CPU alike.

PR #182610 makes three edits, all `sympy.Symbol` -> `sympy.Expr`:
  1. common.py, maybe_realize: passes every sympy expression through;
  2. flex_decoding.py, create_flex_decoding_kernel: the two filters that keep
     symbolic captures out of the decoding kernel's autotuning inputs;
  3. flex_cpu.py, lower_cpu: the filter that keeps them out of the CPU
     template's input nodes.
Without 2 and 3, edit 1 would let a sympy.Add through maybe_realize into
autotuning inputs and template input nodes, which take IR nodes only. The
backport makes exactly these edits in the installed functions
(torch_backports._patching.rewritten), and sets the copies wherever torch
holds the functions by name: maybe_realize in common, flex_attention,
flex_decoding and flex_cpu; create_flex_decoding_kernel in flex_decoding and
flex_attention; lower_cpu in flex_cpu and flex_attention. The PR's test
(test_mask_mod_handles_derived_symint_closure) is the issue's program, which
REPRODUCER is.

2.15.0 does what 2.13.0 does here, except in create_flex_decoding_kernel:
2.14 rewrote it to autotune on the inputs of the choices it made, with no
filter left, which is a later refactor, not this fix; for captured symbols
and expressions both versions leave them out of the autotuning inputs.

Read from each release's torch/_inductor/kernel/flex/:

  release          maybe_realize     create_flex_decoding_kernel  lower_cpu
  2.9.0, 2.9.1     bf8607b004a5b8a0  6ffdcd18bb34a037             a63502aca6c10d40  (not claimed)
  2.10.0           bf8607b004a5b8a0  6969dbd21e52a715             a63502aca6c10d40
  2.11.0           bf8607b004a5b8a0  6891fc3666cb3147             c5ab153611a65c56
  2.12.0, 2.12.1   9d8a63c988ea81b3  ce2d5bbc68f63fa0             df2e42dcf9fd5afc
  2.13.0           5e0004b536ae163e  875bc1c745304003             364c76c22bdc6f8d  (the fix)
  2.14.0, 2.14.1   5e0004b536ae163e  0339401f354a1280             62a7db28e6cdfd6d
  2.15.0           5e0004b536ae163e  4aa0af9b2d3de77e             62a7db28e6cdfd6d

CPU_CHECK failed on stock 2.10.0 and 2.12.1 with the symptom, in
lower_cpu's maybe_realize, and passed with the backport on both; it passed
on stock 2.13.0 and 2.15.0 (2026-12-06). With any one of the three edits
left out (2.12.1) it failed: without 1 with the symptom, without 2 or 3 with
`s + 1` among the decoding kernel's or the CPU template's inputs. 2.11.0 was
not run here (no disk for its CUDA wheel); it is claimed from its code:
maybe_realize is 2.10.0's, and each edit's text occurs once in its other two
functions, as in every claimed release.

2.9 has the same three lines but is not claimed: it was not run here (the
disk had no room for its CUDA wheel, 2026-12-06), and the note this
backport was asked from says the program does not fail there. Releases
before 2.9 have no kernel/flex package.

This is a fix of GPU code that also runs on the CPU. CPU_CHECK compiles the
issue's program for the CPU with inductor, the int dynamic from the first
call, and replaces flex_attention's lower_cpu by a function that runs, on the
lowering's own arguments, (a) the real lower_cpu up to the CPU template's
add_choices, which it stubs to record the input nodes and stop, and (b) the
real create_flex_decoding_kernel up to its autotuning, stubbed likewise, with
its two GPU-only steps stubbed (get_split_k reads the CUDA device's SM count;
the Triton template's maybe_append_choice). All three edits run: (1) in both
(a) and (b), where stock fails with the symptom; (2) and (3) where the check
then asserts that the captured `s + 1` (a sympy.Add, asserted present) is in
neither list of inputs, which an unedited filter would have let through. So
the backport is on by default. It stops there on purpose: past add_choices
2.13 - 2.15 fail on the CPU in the C++ flex template ("'Add' object has no
attribute 'get_name'"), a different bug that no release fixes. On a GPU the
REPRODUCER runs the program itself, the decode kernel (one query) and the
Triton kernel (128 queries).

changes_codegen is False: the edits change what inductor generates only for
a graph with a sympy expression other than a bare symbol among a
flex_attention's captured values, and stock lowering always fails for such a
graph in maybe_realize, before edits 2 and 3 are reached; a graph that fails
to compile is never stored in inductor's or AOTAutograd's caches. So no graph
stock torch cached is lowered differently with the backport, and a key that
names it would only keep a patched process from every graph stock cached.
(The converse, stock torch later loading a graph the backport compiled, gives
it 2.13's working kernel.)
"""

from __future__ import annotations

import sys
from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "flex-attention-derived-symint"

PACKAGE = "torch._inductor.kernel.flex"

MAYBE_REALIZE = (
    {"bf8607b004a5b8a0": "2.10.0, 2.11.0", "9d8a63c988ea81b3": "2.12.0, 2.12.1"},
    {"5e0004b536ae163e": "2.13.0, 2.14.0, 2.14.1, 2.15.0"},
)
DECODING = (
    {"6969dbd21e52a715": "2.10.0", "6891fc3666cb3147": "2.11.0",
     "ce2d5bbc68f63fa0": "2.12.0, 2.12.1"},
    {"875bc1c745304003": "2.13.0", "0339401f354a1280": "2.14.0, 2.14.1",
     "4aa0af9b2d3de77e": "2.15.0"},
)
LOWER_CPU = (
    {"a63502aca6c10d40": "2.10.0", "c5ab153611a65c56": "2.11.0",
     "df2e42dcf9fd5afc": "2.12.0, 2.12.1"},
    {"364c76c22bdc6f8d": "2.13.0", "62a7db28e6cdfd6d": "2.14.0, 2.14.1, 2.15.0"},
)

# pytorch/pytorch#182610, in the dedented source of each function.
MAYBE_REALIZE_EDITS = [("not isinstance(x, sympy.Symbol)", "not isinstance(x, sympy.Expr)")]
DECODING_EDITS = [
    ("buf for buf in score_mod_other_buffers if not isinstance(buf, sympy.Symbol)",
     "buf for buf in score_mod_other_buffers if not isinstance(buf, sympy.Expr)"),
    ("buf for buf in mask_mod_other_buffers if not isinstance(buf, sympy.Symbol)",
     "buf for buf in mask_mod_other_buffers if not isinstance(buf, sympy.Expr)"),
]
LOWER_CPU_EDITS = [("if not isinstance(value, sympy.Symbol)",
                    "if not isinstance(value, sympy.Expr)")]


def _module(name: str) -> ModuleType:
    module = sys.modules.get("%s.%s" % (PACKAGE, name))
    if module is None:
        raise _patching.Unrecognised("%s.%s is not loaded" % (PACKAGE, name))
    return module


def apply(flex_attention: ModuleType, release: Release) -> Revert:
    """Replace maybe_realize, create_flex_decoding_kernel and lower_cpu by
    the installed ones with sympy.Expr for sympy.Symbol, in their modules and
    wherever another flex module imported them; return the undo."""
    common, decoding, cpu = _module("common"), _module("flex_decoding"), _module("flex_cpu")
    # (function's name, its module, the modules holding it by name, fingerprints, edits)
    plan = [
        ("maybe_realize", common, (common, flex_attention, decoding, cpu), MAYBE_REALIZE,
         MAYBE_REALIZE_EDITS),
        ("create_flex_decoding_kernel", decoding, (decoding, flex_attention), DECODING,
         DECODING_EDITS),
        ("lower_cpu", cpu, (cpu, flex_attention), LOWER_CPU, LOWER_CPU_EDITS),
    ]
    # Everything checked and compiled before anything is set.
    fixed = []
    for name, home, holders, (verified, fixed_prints), edits in plan:
        original, where = _patching.own_attribute(home, name)
        for holder in holders:
            if vars(holder).get(name) is not original:
                raise _patching.Unrecognised("%s.%s is not %s"
                                             % (holder.__name__, name, where))
        new = _patching.rewritten(original, edits, verified, fixed_prints)
        fixed.append((name, holders, new, verified, fixed_prints))
    # common, flex_decoding and flex_cpu are outside the target's snapshot.
    with _patching.all_or_nothing() as reverts:
        for name, holders, new, verified, fixed_prints in fixed:
            for holder in holders:
                reverts.append(_patching.replace_attribute(holder, name, new, verified,
                                                           fixed_prints))
    return _patching.undo_all(reverts)


# The program (the PR's test): a decode step, one query, and a
# prefill, 128, each called with two positions, so that the second call
# compiles pos as a dynamic int and the mask closes over `s + 1`.
REPRODUCER = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

if not torch.cuda.is_available():
    print("skipped: needs a CUDA GPU")
    sys.exit(77)


def fn(q, k, v, current_pos: int):
    pos_plus = current_pos + 1  # a derived dynamic int, outside the closure

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx >= 0) & (kv_idx <= pos_plus)

    bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=q.shape[2], KV_LEN=k.shape[2],
                           device=q.device)
    return flex_attention(q, k, v, block_mask=bm)


torch.manual_seed(0)
for q_len in (1, 128):
    torch.compiler.reset()
    compiled = torch.compile(fn)
    q = torch.randn(1, 4, q_len, 64, device="cuda")
    k = torch.randn(1, 4, 256, 64, device="cuda")
    v = torch.randn(1, 4, 256, 64, device="cuda")
    for pos in (5, 6, 100):
        got = compiled(q, k, v, pos)
        want = fn(q, k, v, pos)
        torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)
"""

# On the CPU: the lowering of the same program, up to where each edit has
# run (see the docstring). Internal APIs and stubs, as a test.
CPU_CHECK = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import sympy
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

try:
    from torch._inductor.kernel.flex import flex_attention as lowering, flex_cpu, flex_decoding
    lower_cpu = lowering.lower_cpu
    create_flex_decoding_kernel = flex_decoding.create_flex_decoding_kernel
    template = flex_decoding.flex_decoding_template
    flex_cpu.CppFlexAttentionTemplate.add_choices
except (ImportError, AttributeError) as exc:
    print("skipped: needs inductor's flex lowering as in 2.10 - 2.15 (%s)" % exc)
    sys.exit(77)


class Stop(Exception):
    "Raised by a stub where the check has seen what it needs."


seen = {}


def add_choices(*args, **kwargs):
    seen["CPU template input nodes"] = list(kwargs["input_nodes"])
    raise Stop("CppFlexAttentionTemplate.add_choices")


def autotune_select_algorithm(name, choices, input_nodes, *args, **kwargs):
    seen["decoding autotuning inputs"] = list(input_nodes)
    raise Stop("flex_decoding's autotune_select_algorithm")


flex_cpu.CppFlexAttentionTemplate.add_choices = staticmethod(add_choices)
flex_decoding.autotune_select_algorithm = autotune_select_algorithm
flex_decoding.get_split_k = lambda B, H, Mk: 1  # reads the CUDA device's SM count
template.maybe_append_choice = lambda *args, **kwargs: None  # a Triton kernel


def both(query, key, value, subgraph, block_mask, scale, kernel_options,
         score_mod_other_buffers, mask_mod_other_buffers):
    seen["captured"] = list(mask_mod_other_buffers)
    try:
        lower_cpu(query, key, value, subgraph, block_mask, scale, kernel_options,
                  score_mod_other_buffers, mask_mod_other_buffers)
    except Stop:
        pass
    try:  # the GPU's decoding kernel, on the same arguments
        create_flex_decoding_kernel(query, key, value, block_mask, scale, kernel_options,
                                    None, None, score_mod_other_buffers,
                                    mask_mod_other_buffers)
    except Stop:
        pass
    raise Stop("both lowerings ran")


lowering.lower_cpu = both


def fn(q, k, v, current_pos: int):
    pos_plus = current_pos + 1

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx >= 0) & (kv_idx <= pos_plus)

    bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=q.shape[2], KV_LEN=k.shape[2],
                           device=q.device)
    return flex_attention(q, k, v, block_mask=bm)


q = torch.randn(1, 2, 1, 16)
k = torch.randn(1, 2, 128, 16)
v = torch.randn(1, 2, 128, 16)
try:
    torch.compile(fn, fullgraph=True, dynamic=True)(q, k, v, 5)
except Exception as exc:
    if "both lowerings ran" not in str(exc):
        raise  # stock: the lowering's AttributeError
else:
    sys.exit("the stubs did not run: the lowering is not the one this check knows")

derived = [x for x in seen["captured"]
           if isinstance(x, sympy.Expr) and not isinstance(x, sympy.Symbol)]
if not derived:
    sys.exit("the mask captured no derived dynamic int (%s): this check shows nothing"
             % seen["captured"])
for where in ("CPU template input nodes", "decoding autotuning inputs"):
    if where not in seen:
        sys.exit("the lowering stopped before the %s" % where)
    leaked = [x for x in seen[where] if isinstance(x, sympy.Expr)]
    if leaked:
        sys.exit("sympy expressions %s among the %s" % (leaked, where))
print("captured %s; passed through maybe_realize, kept out of both" % derived)
"""

BACKPORT = Backport(
    name=NAME,
    summary="a compiled flex_attention whose mask_mod/score_mod closes over `pos + 1` of a "
    "dynamic int compiles (was: 'ShapeAsConstantBuffer' object has no attribute 'dtype')",
    headline="`'ShapeAsConstantBuffer' … no attribute 'dtype'`: flex_attention mask over `pos + 1`",
    upstream=("https://github.com/pytorch/pytorch/pull/182610",
              "https://github.com/pytorch/pytorch/issues/182606"),
    first_affected=(2, 10, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="'ShapeAsConstantBuffer' object has no attribute 'dtype'",
    cpu_check=CPU_CHECK,
    cpu_check_symptom="'ShapeAsConstantBuffer' object has no attribute 'dtype'",
    readme_symptom=(
        "**crash**: a compiled `flex_attention` whose `mask_mod` or `score_mod` closes over "
        "an expression of a dynamic int (`pos + 1`, as in a ring-buffer KV-cache decode) "
        "fails on the call that makes the int dynamic: `LoweringException: AttributeError: "
        "'ShapeAsConstantBuffer' object has no attribute 'dtype'`"
    ),
    readme_fix=(
        "2.13's three edits ([#182610](https://github.com/pytorch/pytorch/pull/182610)), "
        "`sympy.Symbol` → `sympy.Expr`: `maybe_realize` passes any sympy expression through "
        "instead of realizing it, and the decoding kernel's autotuning inputs and the CPU "
        "template's input nodes leave such captures out. Set wherever the flex modules "
        "import these functions by name. Checked on the CPU (the CPU lowering and, with "
        "its GPU-only steps stubbed, the decoding kernel's, up to autotuning); a graph it "
        "changes is one stock cannot compile, so no cache key needs to change."
    ),
)
