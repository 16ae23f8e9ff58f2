"""A flex_attention whose score_mod captures a 0-dim tensor that requires
grad (a learned temperature, a slope) gets that tensor's gradient, eager and
compiled, instead of failing its backward.

Upstream:
  https://github.com/pytorch/pytorch/pull/188869   the fix (first in 2.14.0)
  https://github.com/pytorch/pytorch/issues/145208 the bug (FlexAttention
                                                   learned bias limitations)
  https://github.com/meta-pytorch/attention-gym/issues/171  the same, from 2.9

  >>> temp = torch.tensor(0.7, requires_grad=True)
  >>> score_mod = lambda score, b, h, q_idx, kv_idx: score * temp + temp
  >>> flex_attention(q, k, v, score_mod=score_mod).sum().backward()
  ValueError: vmap(<lambda>(), ...): `<lambda>()` can not return a
  BatchedTensor when out_dim is None                  # eager, aot_eager
  torch._inductor.exc.InductorError: LoweringException: AssertionError ...
                                                      # inductor, on the GPU

The backward of flex_attention runs score_mod's joint graph under vmap over
(b, h, q_idx, kv_idx). A captured tensor that requires grad gets its gradient
through ModIndex, whose backward is the flex_lib::zeros_and_scatter operator:
its vmap rule sums the batched gradient into the unbatched buffer, and
inductor lowers it to an atomic add in the backward kernel. Only an indexed
capture (`bias[h]`) goes through ModIndex. A 0-dim capture used as it is
gets an ordinary gradient, batched, which vmap cannot return unbatched
(eager and aot_eager), and which inductor's backward lowering finds as an
unnamed buffer where it wants the scatter's output (the LoweringException).

PR #188869 routes each 0-dim captured tensor that requires grad through
mod_index(buffer, []) while create_fw_bw_graph traces the joint graph, so
its gradient comes out of zeros_and_scatter(shape=[], indices=[]) like any
indexed capture's. Its hunks, all carried here:
  1. torch/_higher_order_ops/flex_attention.py, create_fw_bw_graph: imports
     mod_index and, in fw_with_masks, wraps such captures in it;
  2. torch/_dynamo/_trace_wrapped_higher_order_op.py: ModIndex.forward
     returns x itself for no indices (a 0-dim x only), the zeros_and_scatter
     kernel returns vals.sum() for no indices (shape [] only), and its vmap
     rule reads a None in-dim of the empty index list as no in-dims;
  3. torch/_inductor/kernel/flex/common.py, zeros_and_scatter_lowering: a
     case for no indices, a scalar scatter of the values (the indexed case,
     unchanged, under `else:`);
  4. torch/_inductor/select_algorithm.py, ModificationWrapper._broadcast_index
     (2.11 - 2.13): the index sympified, and an index with no free symbols
     (the scalar scatter's 0) made `tl.full(shape, index, INDEX_DTYPE)`
     instead of `tl.broadcast_to(0, shape)` of a Python int. 2.9 and 2.10
     have no _broadcast_index: ModificationWrapper.store broadcasts the index
     itself, and gets the same two changes there.
These hunks were told apart in the diff of these files between 2.13.0 and
2.14.1 by the PR's description (its own diff was not at hand): it names
mod_index(buffer, []), the empty index list in ModIndex and
zeros_and_scatter, the lowering and the template's index broadcast, and
says #188860 goes first. Not carried, as other PRs' changes that 2.14 also
has in these functions (judged so, not read from their diffs): the
captured-grad buffers allocated from the joint graph's outputs (#188860,
for a capture that requires grad but is unused), the RuntimeError for a
score_mod whose output does not depend on score, is_fake_tensor for the
FakeTensor check, the reordered example run in trace_flex_attention_backward,
guard_or_false on the batch broadcast, the typo fixes, assert -> raise,
and fw_with_masks' return annotation (`list[Tensor | None]`).

`import torch` imports flex_attention's module but neither
_trace_wrapped_higher_order_op (which imports torch._dynamo) nor inductor.
So apply() sets only a stand-in for create_fw_bw_graph
(_patching.rewritten_on_first_call); its partner check, run at the first
call (the first flex_attention whose backward is set up) or by status,
checks create_fw_bw_graph and the inductor functions (read from their
files, not imported), imports _trace_wrapped_higher_order_op as 2.14's
create_fw_bw_graph does, patches hunk 2 there, and hunks 3 and 4 in
inductor's modules if loaded (compile_fx loads both before AOTAutograd
calls create_fw_bw_graph), else when they are imported (a post-import
hook). Each of these changes is recorded with the backport's
(_patching.recorded_later) for `diff` and status, and the undo reverts
them all (a hook that fires after the undo does nothing). A refusal of any
function leaves all of them as shipped and is recorded (status:
unrecognised). So status (which runs the partner check) imports
torch._dynamo where the backport is enabled; `diff` shows inductor's two
changes once inductor's modules are loaded, as they are in a compile.
zeros_and_scatter is a torch.library custom op: its kernel and vmap rule
are its _init_fn and _vmap_fn, and the dispatcher calls _backend_fns[None],
a wrapper of the function it was registered with; the patch sets the two
attributes and a copy of that table whose entry register_kernel makes for
the edited function. The copies of the decorated functions are compiled
without their decorators (a blank line each), which would register the
operator anew.

Read from each release's installed files:

  release  create_fw_bw_graph zeros_and_scatter vmap rule         ModIndex.forward
  2.9.1    85e0aa0348df307b   9f2a82ff0c5cef07  b554d169bb8e8988  9d0941935fe6ad75
  2.10.0   85e0aa0348df307b   9f2a82ff0c5cef07  b554d169bb8e8988  ed65430ff5a5c725
  2.11.0   2e4c3650fd31d63f   9f2a82ff0c5cef07  b554d169bb8e8988  ed65430ff5a5c725
  2.12.1   19a78f8be74e497f   9f2a82ff0c5cef07  b554d169bb8e8988  ed65430ff5a5c725
  2.13.0   19a78f8be74e497f   9f2a82ff0c5cef07  3951c084e47712f4  ed65430ff5a5c725
  2.14.1   372e564a73a0316e   0c4a42a8da65b860  60b27c80aacd1656  423b89df81ca4166  (fixed)
  2.15.0   as 2.14.1 (flex_attention.py and _trace_wrapped_higher_order_op.py are 2.14.1's)
  2.9.0, 2.12.0: as 2.9.1 and 2.12.1 (all four files byte for byte, read from
  their wheels, 2026-12-06)

  release  zeros_and_scatter_lowering  _broadcast_index (store in 2.9, 2.10)
  2.9.1    49acf31833fc52c1            store 93ddb6c721d78fc8
  2.10.0   49acf31833fc52c1            store 93ddb6c721d78fc8
  2.11.0   49acf31833fc52c1            6e0eb7d1d2192a88
  2.12.1   49acf31833fc52c1            6e0eb7d1d2192a88
  2.13.0   49acf31833fc52c1            6e0eb7d1d2192a88
  2.14.1   64223a11df390855            17758e3afa48a8eb  (fixed)
  2.15.0   64223a11df390855            17758e3afa48a8eb

This is a fix of GPU code whose higher-order-op half runs on the CPU.
CPU_CHECK runs the issue's score_mod (`score * temp + temp`, temp a 0-dim
tensor that requires grad; q, k and v do not) in three ways:
  eager and aot_eager (float64), compared with a dense softmax reference:
    hunks 1 and 2. The eager backward runs create_fw_bw_graph's joint graph
    under vmap through ModIndex.forward, the zeros_and_scatter vmap rule and
    its kernel; aot_eager traces the same (the kernel's register_fake,
    unchanged, gives the shape);
  inductor (float32, S 128, D 16): hunks 3 and 4, on CPU tensors, through
    the Triton flex backward template a GPU compile uses. Inductor's CPU
    flex_attention forward is inference-only (lower_cpu refuses
    OUTPUT_LOGSUMEXP), so the check's backend is compile_fx with an
    inner_compile that leaves the forward graph as traced and gives the
    backward graph to compile_fx_inner; flex_attention_backward's lowering
    has no CPU branch on any claimed release (2.13's refuses MPS only) and
    takes the Triton template, which config.cpu_backend = "triton" renders
    as for CUDA: zeros_and_scatter_lowering's case for no indices (hunk 3)
    makes the scatter of d/dtemp, and the template's store of it (hunk 4:
    ModificationWrapper._broadcast_index, store on 2.9 and 2.10) its
    index. A stub Triton driver (triton.runtime.driver.set_active) reports
    sm_90, which inductor only hashes, and AsyncCompile.triton records
    each kernel's source instead of compiling it, so the compiled backward
    stops when it launches its first kernel. The check wants in the
    template kernel an atomic add at `tl.full(<shape>, 0, INDEX_DTYPE)`
    (the store index 0, with no free symbols; it prints the line, e.g.
    `tl.atomic_add(in_ptr17 + tl.full(tmp11.shape, 0, INDEX_DTYPE), tmp11,
    scatter_mask, sem='relaxed')`), compiles that kernel alone with
    triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32)), no
    GPU needed, and wants `tt.atomic_rmw fadd` in its TTIR. (A 0-dim CPU
    tensor is passed to a CPU kernel by value: the check gives its
    signature the pointer a GPU kernel has.) The kernel is compiled, not
    run: the gradient's value is checked eager and aot_eager only.
The inductor part needs triton, which CUDA wheels bring: without it it
prints that it did not run, and the eager parts still run. The CPU wheel of
2.13.0 has none, so CI's torch213 env installs triton 3.7.1 beside it (the
release 2.13.0's CUDA wheel pins). So every hunk of every claimed release is
executed by the CPU check in CI (on 2.9.1 and 2.10.0 hunk 4 is store
93ddb6c721d78fc8), and the backport is on by default (docs/gpu.md). The
2.13.0 hunks also have 2.11.0's and 2.12.1's fingerprints (the tables
above).

CPU_CHECK, 2026-12-06, in overlays of the CUDA wheels (with triton) of
2.9.1, 2.10.0, 2.11.0 and 2.12.1, and 2026-12-07 in the CPU wheel of 2.13.0
with triton 3.7.1, on a CPU-only machine. Stock, each fails:
  eager: ValueError: vmap(<lambda>(), ...): `<lambda>()` can not return a
    BatchedTensor when out_dim is None
  aot_eager: ValueError: vmap(GraphModule(), ...): (the same)
  inductor: InductorError: LoweringException: AssertionError:
    (target: flex_attention_backward)   # 2.9.1 prints LoweringException
With the backport, each passes: eager and aot_eager "d/dtemp 22.951731, as
the dense reference", inductor the tl.full line above and "the flex
backward kernel compiles for sm_90, with tt.atomic_rmw fadd". Stock 2.14.1
(its wheel has triton) passes, with the same template line. 2.15.0 was read
from its wheel (every function here is 2.14.1's text; three of the four
files are 2.14.1's, byte for byte), and CI runs the check there as shipped:
it passes with the same line (docs/cells.md, 2026-12-07). cpu_check_symptom is the eager
ValueError, which every stock run prints, triton or not.

changes_codegen is False: hunks 3 and 4 change what inductor generates only
for a zeros_and_scatter with no indices, which stock create_fw_bw_graph
never emits (hunk 1 is what routes a capture through it), and for a store
index with no free symbols, which only that scalar scatter gives (an indexed
capture's index is a load, a symbol); stock fails to lower the graphs that
would reach either (the LoweringException), and a graph that fails to
compile is never stored in inductor's or AOTAutograd's caches. So a key
naming the backport would only keep a patched process from every graph
stock cached.
"""

from __future__ import annotations

import os
import sys
import threading
from types import ModuleType
from typing import Callable, List

from .. import _hooks, _patching
from .._backport import Backport, Release, Revert

NAME = "flex-attention-scalar-grad"

TRACE = "torch._dynamo._trace_wrapped_higher_order_op"
COMMON = "torch._inductor.kernel.flex.common"
SELECT = "torch._inductor.select_algorithm"

# (verified, fixed) fingerprints of each function, read from each release.
CREATE_FW_BW_GRAPH = (
    {"85e0aa0348df307b": "2.9.1, 2.10.0", "2e4c3650fd31d63f": "2.11.0",
     "19a78f8be74e497f": "2.12.1, 2.13.0"},
    {"372e564a73a0316e": "2.14.1, 2.15.0"},
)
ZEROS_AND_SCATTER = (
    {"9f2a82ff0c5cef07": "2.9.1, 2.10.0, 2.11.0, 2.12.1, 2.13.0"},
    {"0c4a42a8da65b860": "2.14.1, 2.15.0"},
)
VMAP_RULE = (
    {"b554d169bb8e8988": "2.9.1, 2.10.0, 2.11.0, 2.12.1", "3951c084e47712f4": "2.13.0"},
    {"60b27c80aacd1656": "2.14.1, 2.15.0"},
)
MOD_INDEX_FORWARD = (
    {"9d0941935fe6ad75": "2.9.1", "ed65430ff5a5c725": "2.10.0, 2.11.0, 2.12.1, 2.13.0"},
    {"423b89df81ca4166": "2.14.1, 2.15.0"},
)
LOWERING = (
    {"49acf31833fc52c1": "2.9.1, 2.10.0, 2.11.0, 2.12.1, 2.13.0"},
    {"64223a11df390855": "2.14.1, 2.15.0"},
)
# 2.11 - 2.13: ModificationWrapper._broadcast_index
BROADCAST_INDEX = (
    {"6e0eb7d1d2192a88": "2.11.0, 2.12.1, 2.13.0"},
    {"17758e3afa48a8eb": "2.14.1, 2.15.0"},
)
# 2.9, 2.10: ModificationWrapper.store, which broadcasts the index itself
STORE = ({"93ddb6c721d78fc8": "2.9.1, 2.10.0"}, {})

# pytorch/pytorch#188869, in the dedented source of each function.
CREATE_FW_BW_GRAPH_EDITS = [
    ("    from torch._dispatch.python import suspend_functionalization\n",
     "    from torch._dispatch.python import suspend_functionalization\n"
     "    from torch._dynamo._trace_wrapped_higher_order_op import mod_index\n"),
    ("                fw_out = score_mod(*args)\n",
     "                captured_args = [\n"
     "                    mod_index(buffer, [])\n"
     "                    if (\n"
     "                        isinstance(buffer, torch.Tensor)\n"
     "                        and buffer.requires_grad\n"
     "                        and buffer.ndim == 0\n"
     "                    )\n"
     "                    else buffer\n"
     "                    for buffer in args[5:]\n"
     "                ]\n"
     "                fw_out = score_mod(*args[:5], *captured_args)\n"),
]
# The decorators are left out of the copies (a blank line keeps the line
# numbers): run again, they would register the operator or its vmap rule anew.
ZEROS_AND_SCATTER_EDITS = [
    ('@torch.library.custom_op("flex_lib::zeros_and_scatter", mutates_args=())'
     "  # type: ignore[misc]\n", "\n"),
    ("    grad = torch.zeros(shape, device=vals.device, dtype=vals.dtype)\n",
     "    if not indices:\n"
     "        if shape:\n"
     "            raise RuntimeError(\n"
     '                "zeros_and_scatter with no indices only supports scalar outputs"\n'
     "            )\n"
     "        return vals.sum()\n"
     "    grad = torch.zeros(shape, device=vals.device, dtype=vals.dtype)\n"),
]
VMAP_RULE_EDITS = [
    ("@zeros_and_scatter.register_vmap  # type: ignore[misc]\n", "\n"),
    ("    indices_indims = indims[1]\n",
     "    indices_indims: list[int | None] = indims[1] if indims[1] is not None else []\n"),
]
MOD_INDEX_FORWARD_EDITS = [
    ("@staticmethod\n", "\n"),
    ("    return torch.ops.aten.index(x, indices)\n",
     "    if not indices:\n"
     "        if x.ndim != 0:\n"
     "            raise RuntimeError(\n"
     '                "mod_index with no indices only supports scalar tensors"\n'
     "            )\n"
     "        return x\n"
     "    return torch.ops.aten.index(x, indices)\n"),
]
_EMPTY_INDICES = (
    "    if not indices:\n"
    "        if shape:\n"
    "            raise AssertionError(\n"
    '                "zeros_and_scatter with no indices only supports scalar outputs"\n'
    "            )\n"
    "        expected_vals_size = values.get_size()\n"
    "\n"
    "        def inner_fn(index):\n"
    "            return []\n"
    "\n"
    "    else:\n"
)


def _lowering_edits(source: str) -> "list[tuple[str, str]]":
    """Put the indexed case of zeros_and_scatter_lowering (from its index
    loaders through the expand of the values) under `else:`, after 2.14's
    case for no indices, a 0-dim capture's scatter."""
    import textwrap

    end_line = "    values = expand(values, expected_vals_size)\n"
    start = source.index("    indices_loaders = ")
    end = source.index(end_line) + len(end_line)
    block = source[start:end]
    return [(block, _EMPTY_INDICES + textwrap.indent(block, "    "))]


BROADCAST_INDEX_EDITS = [
    ("    index_str = self._process_indexing(index)\n",
     "    index = sympy.sympify(index)\n"
     "    index_str = self._process_indexing(index)\n"),
    ('    return f"tl.broadcast_to({index_str}, {shape})"\n',
     "    if not index_shape and len(index.free_symbols) == 0:\n"
     '        return f"tl.full({shape}, {index_str}, INDEX_DTYPE)"\n'
     '    return f"tl.broadcast_to({index_str}, {shape})"\n'),
]
# 2.9 and 2.10 have no _broadcast_index: store broadcasts the index itself,
# with no case for a block shape of one, which 2.11 added (a later change).
STORE_EDITS = [
    ("    index_str = self._process_indexing(index)\n"
     '    index_str = f"tl.broadcast_to({index_str}, {value}.shape)"\n',
     "    index = sympy.sympify(index)\n"
     "    index_str = self._process_indexing(index)\n"
     "    if len(index.free_symbols) == 0:\n"
     '        index_str = f"tl.full({value}.shape, {index_str}, INDEX_DTYPE)"\n'
     "    else:\n"
     '        index_str = f"tl.broadcast_to({index_str}, {value}.shape)"\n'),
]


def _torch_file(module_name: str) -> str:
    """The source file of torch module `module_name`, found without importing it."""
    torch = sys.modules["torch"]
    parts = module_name.split(".")[1:]
    return os.path.join(os.path.dirname(torch.__file__), *parts) + ".py"


def _inductor_plan() -> "list[tuple[str, str, str, tuple, object]]":
    """(module, owner's qualname or "", function, fingerprints, edits) of
    the inductor half, store where the release has no _broadcast_index;
    each function checked in its file, as _patching.check does a live one,
    without importing its module, and each file read once."""
    from .. import _fingerprint

    def fingerprint(module_name: str, *qualnames: str) -> "tuple[str, str]":
        # (qualname, fingerprint) of the first of `qualnames` the file defines.
        try:
            with open(_torch_file(module_name), encoding="utf-8") as file:
                text = file.read()
            for qualname in qualnames[:-1]:
                try:
                    return qualname, _fingerprint.of_file(text, qualname)
                except LookupError:
                    pass
            return qualnames[-1], _fingerprint.of_file(text, qualnames[-1])
        except (OSError, LookupError, SyntaxError) as exc:
            raise _patching.Unrecognised("%s.%s: its source cannot be read (%s)"
                                         % (module_name, qualnames[-1], exc)) from None

    _, found = fingerprint(COMMON, "zeros_and_scatter_lowering")
    _patching.judge(found, COMMON + ".zeros_and_scatter_lowering", *LOWERING)
    qualname, found = fingerprint(SELECT, "ModificationWrapper._broadcast_index",
                                  "ModificationWrapper.store")
    codegen = ((BROADCAST_INDEX, BROADCAST_INDEX_EDITS) if qualname.endswith("_broadcast_index")
               else (STORE, STORE_EDITS))
    _patching.judge(found, "%s.%s" % (SELECT, qualname), *codegen[0])
    return [(COMMON, "", "zeros_and_scatter_lowering", LOWERING, _lowering_edits),
            (SELECT, "ModificationWrapper", qualname.split(".")[1]) + codegen]


def _patch_inductor(module: ModuleType, owner_name: str, name: str, prints: tuple,
                    edits: object) -> Revert:
    owner = _patching.own_class(module, owner_name) if owner_name else module
    original, _ = _patching.own_attribute(owner, name)
    new = _patching.rewritten(original, edits, *prints)
    return _patching.replace_attribute(owner, name, new, *prints)


def _patch_trace(trace: ModuleType) -> "list[Revert]":
    """The higher-order-op half in _trace_wrapped_higher_order_op: ModIndex's
    forward and zeros_and_scatter's kernel and vmap rule take an empty list
    of indices; everything checked and compiled before anything is set."""
    op = vars(trace).get("zeros_and_scatter")
    mod_index = _patching.own_class(trace, "ModIndex")
    init_fn, vmap_fn = getattr(op, "_init_fn", None), getattr(op, "_vmap_fn", None)
    backend_fns = getattr(op, "_backend_fns", None)
    if not callable(init_fn) or not callable(vmap_fn) or not isinstance(backend_fns, dict) \
            or None not in backend_fns or not callable(getattr(op, "register_kernel", None)):
        raise _patching.Unrecognised("%s.zeros_and_scatter is not the custom op verified" % TRACE)
    forward_sm, _ = _patching.own_attribute(mod_index, "forward")
    if not isinstance(forward_sm, staticmethod):
        raise _patching.Unrecognised("%s.ModIndex.forward is not a staticmethod" % TRACE)
    new_init = _patching.rewritten(init_fn, ZEROS_AND_SCATTER_EDITS, *ZEROS_AND_SCATTER)
    new_vmap = _patching.rewritten(vmap_fn, VMAP_RULE_EDITS, *VMAP_RULE)
    new_forward = _patching.rewritten(forward_sm.__func__, MOD_INDEX_FORWARD_EDITS,
                                      *MOD_INDEX_FORWARD)
    with _patching.all_or_nothing() as reverts:
        reverts.append(_patching.replace_attribute(mod_index, "forward", staticmethod(new_forward),
                                                   *MOD_INDEX_FORWARD))
        reverts.append(_patching.replace_attribute(op, "_vmap_fn", new_vmap, *VMAP_RULE))
        reverts.append(_patching.replace_attribute(op, "_init_fn", new_init, *ZEROS_AND_SCATTER))
        # The dispatcher's kernel calls _backend_fns[None], which closes over
        # the function it was made from: a copy of the table, whose entry
        # register_kernel makes for the new function, replaces the table.
        reverts.append(_patching._install(op, "_backend_fns", backend_fns, dict(backend_fns),
                                          _patching.REPLACED))
        op.register_kernel(None)(new_init)
    return reverts


def apply(flex_attention: ModuleType, release: Release) -> Revert:
    """Put a stand-in in place of create_fw_bw_graph that, at its first
    call, patches the rest (_trace_wrapped_higher_order_op at once, inductor's
    two functions now or when their modules are imported) and then runs
    the edited create_fw_bw_graph; return the undo of all of it."""
    later = _patching.recorded_later()
    original, _ = _patching.own_attribute(flex_attention, "create_fw_bw_graph")
    lock = threading.RLock()
    done: List[bool] = []
    reverted: List[bool] = []
    others: List[Revert] = []  # the undo of each change made at the first call or later
    undo_others = _patching.undo_all(others)

    def patch_inductor(plan: tuple) -> Callable[[ModuleType], None]:
        def hook(module: ModuleType) -> None:
            with lock:
                if not reverted:
                    others.append(later(lambda: _patch_inductor(module, *plan)))
        return hook

    def the_rest() -> None:
        # create_fw_bw_graph's partner check: run at its first call (or by
        # status), before its own; it checks every function first.
        with lock:
            if done or reverted:
                return
            _patching.check(original, "create_fw_bw_graph", *CREATE_FW_BW_GRAPH)
            plan = _inductor_plan()
            import importlib

            trace = importlib.import_module(TRACE)
            unloaded = []
            try:
                others.extend(later(lambda: _patch_trace(trace)))
                for module_name, *rest in plan:
                    loaded = sys.modules.get(module_name)
                    if loaded is not None:
                        others.append(later(lambda: _patch_inductor(loaded, *rest)))
                    else:
                        unloaded.append((module_name, tuple(rest)))
            except BaseException:
                undo_others()
                del others[:]
                raise
            done.append(True)
        # Their files passed the check above: the hook (at once, if the
        # module has been loaded since) compiles the same text.
        for module_name, rest in unloaded:
            _hooks.register(module_name, patch_inductor(rest))

    undo_graph = _patching.rewritten_on_first_call(
        flex_attention, "create_fw_bw_graph", CREATE_FW_BW_GRAPH_EDITS, *CREATE_FW_BW_GRAPH,
        partner=the_rest)

    def revert() -> None:
        with lock:
            reverted.append(True)
        undo_graph()
        undo_others()

    revert.check = undo_graph.check  # type: ignore[attr-defined]
    return revert


# The program, compiled with inductor for the GPU: the eager output
# and gradients are those of a dense softmax with the same score_mod.
REPRODUCER = r"""
import os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
import torch
from torch.nn.attention.flex_attention import flex_attention

if not torch.cuda.is_available():
    print("skipped: needs a CUDA GPU")
    sys.exit(77)

torch.manual_seed(0)
B, H, S, D = 1, 2, 128, 16
q, k, v = [torch.randn(B, H, S, D, device="cuda", requires_grad=True) for _ in range(3)]
grad = torch.randn(B, H, S, D, device="cuda")


def run(attend):
    temp = torch.tensor(0.7, device="cuda", requires_grad=True)
    for t in (q, k, v):
        t.grad = None

    def score_mod(score, b, h, q_idx, kv_idx):
        return score * temp + temp

    out = attend(q, k, v, score_mod)
    out.backward(grad)
    return [out.detach(), q.grad, k.grad, v.grad, temp.grad]


def dense(q, k, v, score_mod):
    scores = (q @ k.transpose(-2, -1)) / D ** 0.5
    return torch.softmax(score_mod(scores, None, None, None, None), dim=-1) @ v


compiled = torch.compile(lambda q, k, v, score_mod: flex_attention(q, k, v, score_mod=score_mod))
got = run(compiled)
want = run(dense)
for name, a, b in zip(("out", "q", "k", "v", "temp"), got, want):
    if a is None:
        sys.exit("no gradient for " + name)
    torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2, msg=name)
print("temp.grad %.5f, as the dense reference" % got[-1].item())
"""

# On the CPU: the higher-order-op half (hunks 1 and 2), eager and aot_eager;
# then inductor's half (hunks 3 and 4): the backward compiled by inductor
# with the Triton flex backward template for CPU tensors (cpu_backend =
# "triton"), its kernel's source recorded and compiled for sm_90, no GPU.
CPU_CHECK = r"""
import os, sys, tempfile, traceback
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # kernels made in this process
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(_cache.name, "triton"))
import importlib.util
import torch
from torch.nn.attention.flex_attention import flex_attention

torch.manual_seed(0)
failed = []


def fail(how, exc):
    traceback.print_exception(type(exc), exc, exc.__traceback__, limit=2)
    lines = [line.strip() for line in str(exc).strip().splitlines()] or [""]
    where = [line for line in lines if line.startswith("target: ")][:1]
    print("%s: %s: %s%s" % (how, type(exc).__name__, lines[0],
                            " (%s)" % where[0] if where else ""))
    failed.append(how)


# 1. Eager and aot_eager against a dense softmax: hunks 1 and 2.
B, H, S, D = 1, 2, 16, 8
q, k, v = [torch.randn(B, H, S, D, dtype=torch.float64) for _ in range(3)]


def reference():
    temp = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    scores = (q @ k.transpose(-2, -1)) / D ** 0.5
    out = torch.softmax(scores * temp + temp, dim=-1) @ v
    (out * out).sum().backward()
    return out.detach(), temp.grad


def run(attend):
    temp = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score * temp + temp

    out = attend(q, k, v, score_mod=score_mod)
    (out * out).sum().backward()
    return out.detach(), temp.grad


want_out, want_grad = reference()
for how, attend in (("eager", flex_attention),
                    ("aot_eager", torch.compile(flex_attention, backend="aot_eager",
                                                fullgraph=True))):
    try:
        out, grad = run(attend)
        torch.testing.assert_close(out, want_out)
        if grad is None:
            raise AssertionError("no gradient for the captured 0-dim tensor")
        torch.testing.assert_close(grad, want_grad)
    except Exception as exc:
        fail(how, exc)
    else:
        print("%s: d/dtemp %.6f, as the dense reference" % (how, grad.item()))


# 2. Inductor: the backward compiled with the Triton flex backward template
# (hunks 3 and 4), on CPU tensors, its kernel compiled for sm_90.
def inductor():
    from functorch.compile import make_boxed_func
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    from torch_backports import _triton_cpu

    # A driver that says sm_90, which inductor only hashes: nothing runs.
    # Each kernel's source is kept, and none is compiled for (or run on) the
    # CPU: the compiled backward stops when it launches its first kernel.
    _triton_cpu.use_sm90_stub_driver()
    sources = _triton_cpu.record_kernel_sources(compile=False)

    # Inductor's CPU flex_attention forward is inference-only (lower_cpu
    # refuses OUTPUT_LOGSUMEXP): the forward graph runs as traced, the
    # backward graph is inductor's, whose flex_attention_backward lowering
    # takes the Triton template whatever the device.
    def inner_compile(gm, example_inputs, **kwargs):
        if kwargs.get("is_backward"):
            return compile_fx_inner(gm, example_inputs, **kwargs)
        return make_boxed_func(gm)

    def backend(gm, example_inputs):
        return compile_fx(gm, example_inputs, inner_compile=inner_compile)

    B, H, S, D = 1, 2, 128, 16  # tl.dot wants a head dim of 16 or more
    q, k, v = [torch.randn(B, H, S, D) for _ in range(3)]
    temp = torch.tensor(0.7, requires_grad=True)

    def score_mod(score, b, h, q_idx, kv_idx):
        return score * temp + temp

    attend = torch.compile(lambda q, k, v: flex_attention(q, k, v, score_mod=score_mod),
                           backend=backend, fullgraph=True)
    out = attend(q, k, v)
    try:
        (out * out).sum().backward()
    except Exception as exc:
        stopped = exc
    else:
        raise AssertionError("the compiled backward ran kernels it was not given")
    templates = [(name, src) for name, src in sources.items()
                 if name.startswith("triton_tem_") and "bwd_dkdv_inner" in src]
    if len(templates) != 1:
        raise stopped  # the backward did not lower (stock: its LoweringException)
    name, source = templates[0]
    scatter = [line.strip() for line in source.splitlines()
               if "tl.atomic_add(" in line and "tl.full(" in line and ", 0, INDEX_DTYPE)" in line]
    if not scatter:
        raise AssertionError("no scatter of d/dtemp at the constant index 0 in " + name)
    print("inductor: " + scatter[0])

    # The kernel alone, without inductor's launcher, compiled for sm_90;
    # the 0-dim capture goes to the GPU kernel as a pointer.
    ttir = _triton_cpu.compile_for_sm90(source, name, pointers=True)
    if "tt.atomic_rmw fadd" not in ttir:
        raise AssertionError("the flex backward kernel compiles to no atomic add:\n" + ttir[-600:])
    print("inductor: the flex backward kernel compiles for sm_90, with tt.atomic_rmw fadd")


if importlib.util.find_spec("triton") is None:
    print("inductor: not run, needs triton (this torch's wheel has none)")
else:
    try:
        inductor()
    except Exception as exc:
        fail("inductor", exc)
if failed:
    sys.exit("failed: " + ", ".join(failed))
"""

BACKPORT = Backport(
    name=NAME,
    summary="flex_attention's backward gives the gradient of a 0-dim tensor that score_mod "
    "captures (a learned temperature), eager and compiled (was: vmap BatchedTensor error; "
    "inductor LoweringException)",
    headline="flex_attention backward fails for a 0-dim tensor that `score_mod` captures",
    upstream=("https://github.com/pytorch/pytorch/pull/188869",
              "https://github.com/pytorch/pytorch/issues/145208"),
    first_affected=(2, 9, 0),
    first_fixed=(2, 14, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="LoweringException",
    cpu_check=CPU_CHECK,
    cpu_check_symptom="can not return a BatchedTensor when out_dim is None",
    readme_symptom=(
        "**crash**: the backward of `flex_attention` whose `score_mod` captures a 0-dim "
        "tensor that requires grad (a learned temperature or slope) fails: eager and "
        "`aot_eager` with `ValueError: vmap(...) can not return a BatchedTensor when out_dim "
        "is None`, inductor with `LoweringException: AssertionError`"
    ),
    readme_fix=(
        "2.14's change ([#188869](https://github.com/pytorch/pytorch/pull/188869)): "
        "`create_fw_bw_graph` routes such a capture through `mod_index(buffer, [])`, so its "
        "gradient comes out of `zeros_and_scatter` with no indices, which `ModIndex`, the "
        "operator's kernel and vmap rule, its inductor lowering and the Triton template's "
        "store now handle. A stand-in for `create_fw_bw_graph` patches the rest at its first "
        "call (dynamo's and inductor's modules are not loaded before). Checked on the CPU "
        "eager, with `aot_eager`, and by compiling the backward with inductor's Triton "
        "flex template (Triton CPU backend, a stub sm_90 driver) and its kernel for sm_90. "
        "Carried less: the hunks were told apart in the 2.13 → 2.14 diff by the PR's "
        "description, its own diff not being at hand; not carried are other PRs' changes "
        "2.14 has in these functions: captured-grad buffers allocated from the joint "
        "graph's outputs ([pytorch#188860], for a capture that requires grad but is "
        "unused), a clearer error for a `score_mod` that ignores `score`, and cosmetic "
        "edits."
    ),
)
