"""Inductor no longer removes a copy (aten.clone, aten.copy) of a tensor that
the graph mutates, so the copy's users read the value it had when copied.

Upstream:
  https://github.com/pytorch/pytorch/issues/198131   dst[:] = src[:]; src.add_(1)
  https://github.com/pytorch/pytorch/issues/198031   y = x.clone(); op(y, x)
  The fix is in torch 2.15.0 (read from its wheel). Neither pull request
  proposed for these issues is what 2.15.0 has: #198132 (keep the copy only
  when one of its users runs after the input's first copy_) and #198260
  (keep the clone in reinplacing when another argument of the node overlaps
  what it writes) are both unlike 2.15.0's remove_noop_ops, and 2.15.0's
  reinplace.py has no part of #198260. No pull request is known for the
  code 2.15.0 has, so the issues are the reference.

Silent wrong results, on the CPU and on CUDA:

  >>> def f(dst, src):
  ...     dst[0:, :] = src[0:, :]
  ...     src.add_(1)
  >>> torch.compile(f)(dst, src)    # stock 2.7 - 2.14: dst gets src + 1

  >>> @torch.library.custom_op("mylib::reverse_into", mutates_args=("dst",))
  ... def reverse_into(src: torch.Tensor, dst: torch.Tensor) -> None: ...
  >>> def g(x):
  ...     y = x.clone()
  ...     reverse_into(y, x)        # stock 2.7 - 2.14: reverse_into(x, x)

and the same for a user-defined Triton kernel that mutates x (a race between
program instances, seen once x is large enough).

Cause: inductor's post-grad pass remove_noop_ops (also run on the joint
graph, joint_graph_passes) replaces every clone and copy whose result equals
its source (noop_registry) by the source itself, on the grounds that the
graph is functional. It is, except for the input mutations AOTAutograd
leaves in it: copy_ of the new value into a mutated input (and set_ /
inductor.resize_storage_bytes_ for FSDP). A copy of such an input taken
before the mutation was replaced by the input, so its users read it after
the write-back: `copy_(src, add); copy_(dst, src)` copied the updated src;
`auto_functionalized(reverse_into, src=x, dst=x); copy_(x, ...)` then
reinplaced into reverse_into(x, x), which reads what it writes.

2.15.0's remove_noop_ops collects the storages that the graph's copy_,
set_.source_Tensor and inductor.resize_storage_bytes_ nodes mutate (their
first argument) and keeps every non-view noop whose source is in that set.
Views (alias, full slices) are still removed, and so are copies of anything
the graph does not mutate. The backport makes exactly those two insertions,
upstream's text and comments, in the installed function
(torch_backports._patching.rewritten) and sets it on post_grad. The
function's other differences between releases (2.10's pin_memory copy
check, 2.13's assert, 2.15's clone kept for AOT's runtime epilogue in the
joint graph and src_index(node)) belong to other changes and are left as
each release has them; the two anchors the edits insert before are the same
text in every claimed release, so one list of edits serves them all.

Read from each release's torch/_inductor/fx_passes/post_grad.py:

  release                     remove_noop_ops
  2.7.0, 2.8.0, 2.9.0, 2.9.1  a3270e42cd2eb098
  2.10.0 - 2.12.1             3466951d6e895a7d   plus the pin_memory copy check
  2.13.0                      1dda0ed03b5c5e5d   assert -> raise AssertionError
  2.14.0, 2.14.1              b38caf627082b9e1   (unrelated edits)
  2.15.0                      d5b8fc0cacf11cd0   keeps copies of mutated storages

Every other holder of remove_noop_ops looks it up when it runs: post_grad's
own post_grad_passes through the module's globals, and joint_graph_passes
and pattern_matcher (the pattern-replacement helpers) through `from
.post_grad import remove_noop_ops` inside the function. So setting the
module attribute reaches them all; there is no other reference to patch.

The reproducer (both issues' programs, on the CPU) failed on stock 2.7.0,
2.10.0, 2.13.0 and 2.14.1, both programs wrong on each, and passed with the
patch on all four (torch-backports verify, 2026-12-06): one release of each
fingerprint above. It passes on stock 2.15.0. The other releases are
claimed by their fingerprints, read from their wheels. The user-defined
Triton kernel case of #198031 needs a GPU and is not in the reproducer (nor
was it run); it is functionalized the same way (a clone of x passed beside
x to triton_kernel_wrapper_functional, x written back by copy_), so the
same check keeps its clone.

Graphs compiled by stock torch and stored in inductor's caches hold the
removed copies under keys that hash torch's files, which the patch leaves
as they are. So the backport declares changes_codegen: while it is applied
those keys name it (torch_backports._cache_key), and a graph stock torch
cached is compiled anew.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "inductor-noop-copy-of-mutated-input"

VERIFIED = {
    "a3270e42cd2eb098": "2.7.0, 2.8.0, 2.9.0, 2.9.1",
    "3466951d6e895a7d": "2.10.0, 2.11.0, 2.12.0, 2.12.1",
    "1dda0ed03b5c5e5d": "2.13.0",
    "b38caf627082b9e1": "2.14.0, 2.14.1",
}
FIXED = {"d5b8fc0cacf11cd0": "2.15.0"}

# 2.15.0's two insertions, in the dedented source of remove_noop_ops (its
# body at 4 spaces, the loop's at 12), before text that every verified
# release has once.
EDITS = [
    (
        "    for node in graph.nodes:\n"
        "        if node.target in noop_registry:\n",
        "    # Storages mutated in this graph. At this point the graph is functional except for\n"
        "    # the input mutations AOT emits (copy_, plus set_ / resize_storage_bytes_"
        " for FSDP).\n"
        "    # A non-view noop (aten.copy / aten.clone) of a mutated storage"
        " must stay a real copy,\n"
        "    # otherwise its users can observe the mutated value instead of the"
        " snapshot, e.g.\n"
        "    #   dst[0:, :] = src[0:, :]; src.add_(1)\n"
        "    # became `copy_(src, add); copy_(dst, src)` and copied the *updated* src into dst.\n"
        "    # Views and chained noops resolve to the same storage, and this does not depend on\n"
        "    # node order, so it also holds for the joint graph.\n"
        "    # (torch-backports: as torch 2.15.0, pytorch/pytorch#198131, #198031.)\n"
        "    mutation_targets = (\n"
        "        aten.copy_.default,\n"
        "        aten.set_.source_Tensor,\n"
        "        torch.ops.inductor.resize_storage_bytes_.default,\n"
        "    )\n"
        "    mutated_storages = OrderedSet(\n"
        "        get_node_storage(n.args[0])\n"
        "        for target in mutation_targets\n"
        "        for n in graph.find_nodes(op=\"call_function\", target=target)\n"
        "    )\n"
        "\n"
        "    for node in graph.nodes:\n"
        "        if node.target in noop_registry:\n",
    ),
    (
        "            is_valid, args, kwargs = get_fake_args_kwargs(node)\n",
        "            # Keep a real copy of a storage that is mutated in this graph.\n"
        "            if not node_is_view and src_storage in mutated_storages:\n"
        "                continue\n"
        "\n"
        "            is_valid, args, kwargs = get_fake_args_kwargs(node)\n",
    ),
]


def apply(post_grad: ModuleType, release: Release) -> Revert:
    """Replace post_grad.remove_noop_ops by the installed one keeping copies
    of mutated storages; return the undo."""
    function, _ = _patching.own_attribute(post_grad, "remove_noop_ops")
    fixed = _patching.rewritten(function, EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(post_grad, "remove_noop_ops", fixed, VERIFIED, FIXED)


# The two issues' programs: a copy of an input that is then mutated in
# place (pytorch/pytorch#198131), and a clone of x passed with x to a custom
# op that writes x while reading the clone (#198031; the op).
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
def copy_then_add(dst, src):
    dst[0:, :] = src[0:, :]
    src.add_(1)
    return src

@torch.library.custom_op("backport_repro::reverse_into", mutates_args=("dst",))
def reverse_into(src: torch.Tensor, dst: torch.Tensor) -> None:
    n = src.shape[0]
    for k in range(n):  # reads src while it writes dst: they must not alias
        dst[n - 1 - k] = src[k]

def clone_into_op(x):
    y = x.clone()
    reverse_into(y, x)
    return x * 2.0

wrong = []
for f, args in ((copy_then_add, (torch.zeros(3, 4), torch.arange(12.0).view(3, 4))),
                (clone_into_op, (torch.arange(8.0),))):
    eager_args = [a.clone() for a in args]
    compiled_args = [a.clone() for a in args]
    want = f(*eager_args)
    got = torch.compile(f, backend="inductor", fullgraph=True)(*compiled_args)
    pairs = [("its result", want, got)] + [("argument %d" % i, a, b) for i, (a, b)
                                           in enumerate(zip(eager_args, compiled_args))]
    for what, a, b in pairs:
        if not torch.equal(a, b):
            wrong.append("%s: %s is %s, eager %s" % (f.__name__, what, b.tolist(), a.tolist()))
if wrong:
    raise AssertionError("compiled copy of a tensor read after the tensor was mutated:\n  "
                         + "\n  ".join(wrong))
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor keeps a clone/copy of a tensor that the graph mutates, instead of "
    "reading the mutated tensor in its place (dst[:] = src[:]; src.add_(1), and "
    "y = x.clone(); op(y, x) for custom ops and Triton kernels; silent wrong result)",
    headline="**silent wrong result**: a copy of a tensor mutated later is dropped as a no-op",
    upstream=(
        "https://github.com/pytorch/pytorch/issues/198131",
        "https://github.com/pytorch/pytorch/issues/198031",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="compiled copy of a tensor read after the tensor was mutated",
    changes_codegen=True,
    readme_symptom=(
        "**silent wrong result**: a copy of a tensor the graph later mutates is dropped "
        "as a no-op, so `dst[:] = src[:]; src.add_(1)` copies the updated `src`, and "
        "`op(x.clone(), x)` becomes `op(x, x)` for a custom op that mutates its first "
        "argument"
    ),
    readme_fix=(
        "2.15's two insertions in `remove_noop_ops`: it collects the storages that "
        "`copy_`, `set_` and `resize_storage_bytes_` nodes mutate and never removes a "
        "non-view copy of one. It changes generated code, so the cache keys name it "
        "(tested warm-stock-then-fixed on 2.13.0, in the full runs). The other 2.15 edits "
        "of that function belong to other fixes and are not carried. Neither proposed PR (#198132, #198260) is what 2.15 "
        "ships and the PR that landed was not identified, so the issues are the "
        "references. User Triton kernels need a GPU and are not in the reproducer; they "
        "go through the same write-back."
    ),
)
