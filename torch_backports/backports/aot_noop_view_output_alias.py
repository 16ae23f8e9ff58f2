"""AOTAutograd regenerates an output that is a no-grad no-op view of another
output, so that the two stay distinct tensors sharing storage, as in eager.

Upstream:
  https://github.com/pytorch/pytorch/pull/191844   the fix (first in 2.15.0)
  https://github.com/pytorch/pytorch/issues/191449 the report (open upstream
                                                   for the shapes not fixed)

A silent wrong result, on the CPU and on CUDA:

  >>> def f(x):
  ...     base = x + 1
  ...     alias = base.view(-1)
  ...     alias.resize_(12)          # dynamo graph-breaks here (gb0126)
  ...     return base + 1
  >>> f(torch.zeros(1))
  tensor([2.])
  >>> torch.compile(f)(torch.zeros(1))   # stock 2.7 - 2.14.1, inductor
  tensor([2., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.])

The first graph returns `base` and `alias`, a view of it with the same size,
stride and offset. run_functionalized_fw_and_collect_metadata
(_aot_autograd/collect_metadata_analysis.py) calls an output an alias of
another output only where both require grad (or for `out, out.detach()`
with the first requiring grad); a no-grad no-op view was `non_alias`, so
the runtime wrapper left it to the backend, and inductor's remove_noop_ops /
pointless_view collapse the view and return one object twice. The eager
resize_() of `alias` after the graph break then resizes `base` as well:
12 elements, 11 of them never written, come back instead of 1. aot_eager
keeps the view and is not affected.

PR #191844 changes three places (its review names the two readers of
base_idx), all carried here:

  * run_functionalized_fw_and_collect_metadata: a new arm, before the
    final `non_alias`, for an output `o` whose `_base` is another user
    output, `o` not a traceable wrapper subclass and has_same_metadata(o,
    o._base): alias_of_intermediate_base_is_user_output with base_idx =
    that output's index, so the runtime wrapper regenerates the view from
    the base at runtime (its view_meta_sequence is recorded as for that
    type already). The edit is 2.15.0's arm (its condition and two
    assignments; its comment is shortened), inserted at the same place.
    The module does not import has_same_metadata before 2.15, so the copy
    reads it from functional_utils, where 2.15 imports it from.
  * input_output_analysis.remove_dupe_metadata: that base_idx is an index
    of the outputs, no longer only of inputs in a no-grad graph, and
    deduplicating inputs renumbered every base_idx through add_dupe_map;
    2.15.0 renumbers only those of alias_of_input and is_input
    (input_output_analysis.INPUT_ALIAS_TYPES, new in 2.15, which the copy
    spells out as the two OutputType members).
  * torch/_inductor/freezing.replace_params_with_constants: likewise keeps
    as inputs (does not fold to constants) only the parameters that an
    output of those two types aliases, where it took every base_idx for an
    input index. The copy compares output_type.name with the two names,
    as freezing.py does not import OutputType before 2.15.

2.15.0 makes the same change, with the same INPUT_ALIAS_TYPES, in
input_output_analysis.create_synthetic_base_metadata (in #191844 or a
follow-up: the PR's full diff could not be read here, only the review and
the wheels): an output whose type
is not one of those two keeps its base_idx and type, where the old code
mapped it through the synthetic-base table of inputs (a wrong base, or an
IndexError, for an output-space index). It is carried too, since the new
arm makes it reachable in no-grad graphs; the copy appends such an output
unchanged (2.15 builds an equal OutputAliasInfo from all of its fields)
before the release's own remapping of the rest, which is left as it is
(2.13 and older remap is_input outputs differently; that is another fix).

Not carried, as upstream does not fix them either (#191449 stays open for
them): `base.detach()` (no _base) and traceable wrapper subclasses such as
DTensor still return one object.

Read from each release's files (tools/fingerprint.py):

  release          run_functionalized_fw_  remove_dupe_     create_synthetic_  replace_params_
                   and_collect_metadata    metadata         base_metadata      with_constants
  2.7.0            507b6b044e119d51        84b511be6e2197b6 7e5ed1c85f759345   083325e54c872935
  2.8.0            507b6b044e119d51        162d1a8202930c8a 7e5ed1c85f759345   9ad2d1a4787b5142
  2.9.0, 2.9.1     3417f10b176228a1        e0af6d1795af954d 0eef22fdb9eb97a2   9ad2d1a4787b5142
  2.10.0           efcfd959d8b6d336        e0af6d1795af954d 0eef22fdb9eb97a2   9ad2d1a4787b5142
  2.11.0           3297cf460d8affef        0c10d17a0a91eafe ab07e0376ce69809   9ad2d1a4787b5142
  2.12.0, 2.12.1   7341738ea1690b91        e430b69bb5e33853 3522aa650c3e20c3   9ad2d1a4787b5142
  2.13.0           e8aea27747a14af2        e430b69bb5e33853 50a90bdaf96444d4   9ad2d1a4787b5142
  2.14.0, 2.14.1   42eebb3b7acb13d7        e430b69bb5e33853 1e5e2fea61933a61   9ad2d1a4787b5142
  2.15.0 (fixed)   9f596fd098ae22b2        cb7fb2fe3a13ac9d 3511e9da8f4591a5   e5b3dab2be2d63fb

Every release from 2.7.0 has the `non_alias` fallthrough and the base_idx
readers above, and each edit's text occurs once in each of them (checked on
the extracted wheels). The reproducer failed on stock 2.7.0, 2.10.0,
2.12.1, 2.13.0 and 2.14.1 (12 elements instead of 1) and passed with the
patch on each, and passed on stock 2.15.0 (2026-12-06). 2.8 and 2.9 were
not run (no such torch could be installed here); their fingerprints are
accepted on the code alone, which has the same fallthrough and readers.
Further checks, patched, against eager (2.7.0, 2.13.0): the base and its
view came back distinct (stock: one object), with the right values, with
duplicated inputs, several outputs, aliased inputs with a mutation
(synthetic bases) and freezing; without the create_synthetic_base_metadata
edit the synthetic-base case regenerated the view from the wrong output
(wrong values, 2.13.0).

The target is torch._functorch.aot_autograd, which imports
collect_metadata_analysis and input_output_analysis (through
runtime_wrappers, which dynamo's compiled_autograd imports as torch.compile
starts), and before them torch._inductor.codecache, whose
FxGraphHashDetails the cache keys need (see below): a hook on
input_output_analysis itself runs while codecache is mid-import, and making
the key there failed with a circular import (2.13.0, 2026-12-06). `import
torch` imports none of them. runtime_wrappers, graph_capture_wrappers
(traced_function_transforms on 2.7/2.8) and aot_autograd bind
run_functionalized_fw_and_collect_metadata, remove_dupe_metadata and
create_synthetic_base_metadata by `from ... import` (nothing else in torch
names them: grep of each release), so where one of them holds the original
it gets the copy too. torch._inductor.freezing is not imported for the
patch: it is patched when it is imported (a post-import hook,
torch_backports._hooks; inductor imports it inside compile_fx's functions,
long after aot_autograd), or at once if it is loaded already. Should it be
mid-import (it imports aot_autograd itself, so a program whose first such
import is `import torch._inductor.freezing` reaches the target from inside
it) its function does not exist yet and the hook cannot fire for a module
already importing; freezing is then left as shipped. That costs at most a
parameter kept as a graph input instead of a constant (it can only add an
index to those kept), not a wrong result.

What AOTAutograd's cache stores (the output alias metadata) and the graph
inductor compiles (the view is now regenerated outside it) both change, and
stock torch's entries hold the collapsed outputs under keys that hash
torch's unchanged files. So the backport declares changes_codegen: while it
is applied the FX graph and AOTAutograd cache keys name it
(torch_backports._cache_key), and a graph stock torch cached is compiled
anew.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any, List

from .. import _hooks, _patching
from .._backport import INDUCTOR_CPU_PRELUDE, Backport, Release, Revert

NAME = "aot-noop-view-output-alias"

_PACKAGE = "torch._functorch._aot_autograd"
_COLLECT = _PACKAGE + ".collect_metadata_analysis"
_ANALYSIS = _PACKAGE + ".input_output_analysis"
_FREEZING = "torch._inductor.freezing"
# Modules that bind the patched functions by `from ... import` (grep of each
# release's torch/): traced_function_transforms on 2.7/2.8, which
# graph_capture_wrappers replaced.
_REEXPORTERS = (
    _PACKAGE + ".runtime_wrappers",
    _PACKAGE + ".graph_capture_wrappers",
    _PACKAGE + ".traced_function_transforms",
    "torch._functorch.aot_autograd",
)

VERIFIED_COLLECT = {
    "507b6b044e119d51": "2.7.0, 2.8.0",
    "3417f10b176228a1": "2.9.0, 2.9.1",
    "efcfd959d8b6d336": "2.10.0",
    "3297cf460d8affef": "2.11.0",
    "7341738ea1690b91": "2.12.0, 2.12.1",
    "e8aea27747a14af2": "2.13.0",
    "42eebb3b7acb13d7": "2.14.0, 2.14.1",
}
FIXED_COLLECT = {"9f596fd098ae22b2": "2.15.0"}

VERIFIED_DEDUP = {
    "84b511be6e2197b6": "2.7.0",
    "162d1a8202930c8a": "2.8.0",
    "e0af6d1795af954d": "2.9.0, 2.9.1, 2.10.0",
    "0c10d17a0a91eafe": "2.11.0",
    "e430b69bb5e33853": "2.12.0 - 2.14.1",
}
FIXED_DEDUP = {"cb7fb2fe3a13ac9d": "2.15.0"}

VERIFIED_SYNTHETIC = {
    "7e5ed1c85f759345": "2.7.0, 2.8.0",
    "0eef22fdb9eb97a2": "2.9.0, 2.9.1, 2.10.0",
    "ab07e0376ce69809": "2.11.0",
    "3522aa650c3e20c3": "2.12.0, 2.12.1",
    "50a90bdaf96444d4": "2.13.0",
    "1e5e2fea61933a61": "2.14.0, 2.14.1",
}
FIXED_SYNTHETIC = {"3511e9da8f4591a5": "2.15.0"}

VERIFIED_FREEZING = {
    "083325e54c872935": "2.7.0",
    "9ad2d1a4787b5142": "2.8.0 - 2.14.1",
}
FIXED_FREEZING = {"e5b3dab2be2d63fb": "2.15.0"}

# 2.15.0's new arm, before the final `else` of the output classification in
# the dedented source of run_functionalized_fw_and_collect_metadata (a
# top-level function: the same indentation as in the file).
COLLECT_EDITS = [
    (
        "                base_idx = existing_out_idx\n"
        "            else:\n"
        "                output_type = OutputType.non_alias\n"
        "                base_idx = None\n",
        "                base_idx = existing_out_idx\n"
        "            elif (\n"
        "                o._base is not None\n"
        "                and not is_traceable_wrapper_subclass(o)\n"
        "                and __import__(\n"
        '                    "torch._functorch._aot_autograd.functional_utils",\n'
        '                    fromlist=["has_same_metadata"],\n'
        "                ).has_same_metadata(o, o._base)\n"
        "                and id(o._base) in out_tensor_ids\n"
        "            ):\n"
        "                # torch-backports: pytorch/pytorch#191844 (torch 2.15.0). o is a\n"
        "                # no-op view of another user output, but not differentiable; left\n"
        "                # non_alias, the backend may return one object for both outputs.\n"
        "                # Regenerate the view at runtime instead.\n"
        "                output_type = OutputType.alias_of_intermediate_base_is_user_output\n"
        "                base_idx = out_tensor_ids[id(o._base)]\n"
        "            else:\n"
        "                output_type = OutputType.non_alias\n"
        "                base_idx = None\n",
    ),
]

# 2.15.0: dedup renumbers inputs only, so only input-space base_idx.
DEDUP_EDITS = [
    (
        "base_idx=None if o.base_idx is None else add_dupe_map[o.base_idx],",
        "base_idx=(\n"
        "                    add_dupe_map[o.base_idx]\n"
        "                    if o.base_idx is not None\n"
        "                    and o.output_type\n"
        "                    in (OutputType.alias_of_input, OutputType.is_input)\n"
        "                    else o.base_idx\n"
        "                ),",
    ),
]

# 2.15.0: synthetic bases leave a base_idx that is not an input index alone.
SYNTHETIC_EDITS = [
    (
        "    existing_output_infos = []\n"
        "    for o in m.output_info:\n",
        "    existing_output_infos = []\n"
        "    for o in m.output_info:\n"
        "        if o.base_idx is not None and o.output_type not in (\n"
        "            OutputType.alias_of_input,\n"
        "            OutputType.is_input,\n"
        "        ):\n"
        "            # torch-backports: pytorch/pytorch#191844 (torch 2.15.0)\n"
        "            existing_output_infos.append(o)\n"
        "            continue\n",
    ),
]

# 2.15.0: only outputs of those two types alias a parameter.
FREEZING_EDITS = [
    (
        "if out_info.base_idx is not None\n",
        "if out_info.base_idx is not None\n"
        '        and out_info.output_type.name in ("alias_of_input", "is_input")\n',
    ),
]


def _patch_freezing(freezing: ModuleType) -> Revert:
    original, _ = _patching.own_attribute(freezing, "replace_params_with_constants")
    fixed = _patching.rewritten(original, FREEZING_EDITS, VERIFIED_FREEZING, FIXED_FREEZING)
    return _patching.replace_attribute(freezing, "replace_params_with_constants", fixed,
                                       VERIFIED_FREEZING, FIXED_FREEZING)


def apply(aot_autograd: ModuleType, release: Release) -> Revert:
    """Replace collect_metadata_analysis.run_functionalized_fw_and_collect_metadata,
    input_output_analysis.remove_dupe_metadata and create_synthetic_base_metadata
    (and their `from` imports) by copies with 2.15.0's edits, and freezing's
    replace_params_with_constants now or when it is imported; return the undo."""
    collect, analysis = sys.modules.get(_COLLECT), sys.modules.get(_ANALYSIS)
    if collect is None or analysis is None:
        raise _patching.Unrecognised("%s is loaded without %s or %s"
                                     % (aot_autograd.__name__, _COLLECT, _ANALYSIS))
    # Everything checked and compiled before anything is set.
    patches: List[Any] = []
    for owner, name, edits, verified, fixed in (
        (collect, "run_functionalized_fw_and_collect_metadata", COLLECT_EDITS,
         VERIFIED_COLLECT, FIXED_COLLECT),
        (analysis, "remove_dupe_metadata", DEDUP_EDITS, VERIFIED_DEDUP, FIXED_DEDUP),
        (analysis, "create_synthetic_base_metadata", SYNTHETIC_EDITS, VERIFIED_SYNTHETIC,
         FIXED_SYNTHETIC),
    ):
        original, _ = _patching.own_attribute(owner, name)
        patches.append((owner, name, original, _patching.rewritten(original, edits, verified,
                                                                   fixed), verified, fixed))
    freezing = sys.modules.get(_FREEZING)
    loaded = freezing is not None and "replace_params_with_constants" in vars(freezing)
    fixed_freezing = None
    if loaded:
        original, _ = _patching.own_attribute(freezing, "replace_params_with_constants")
        fixed_freezing = _patching.rewritten(original, FREEZING_EDITS, VERIFIED_FREEZING,
                                             FIXED_FREEZING)

    active = [True]
    # collect_metadata_analysis and the re-exports are outside the snapshot.
    with _patching.all_or_nothing() as reverts:
        for owner, name, original, new, verified, fixed in patches:
            reverts.append(_patching.replace_attribute(owner, name, new, verified, fixed))
            reverts.append(_patching.rebind(_REEXPORTERS, name, original, new))
        if loaded:
            reverts.append(_patching.replace_attribute(
                freezing, "replace_params_with_constants", fixed_freezing,
                VERIFIED_FREEZING, FIXED_FREEZING))
        elif freezing is None:
            def hook(module: ModuleType) -> None:
                if not active[0]:  # reverted meanwhile
                    return
                try:
                    reverts.append(_patch_freezing(module))
                except Exception as exc:  # freezing left as shipped (see the docstring)
                    import logging

                    logging.getLogger("torch_backports").debug(
                        "%s: %s left as shipped: %s: %s", NAME, _FREEZING, type(exc).__name__, exc)

            _hooks.register(_FREEZING, hook)
            reverts.append(lambda: active.__setitem__(0, False))
    return _patching.undo_all(reverts)


# The program, and the same without the graph break, where stock
# inductor returns the base and its view as one object.
REPRODUCER = INDUCTOR_CPU_PRELUDE + r"""
def resized(x):
    base = x + 1
    alias = base.view(-1)
    alias.resize_(12)  # a graph break: resize_ runs eagerly on the first graph's output
    return base + 1

def both(x):
    base = x + 1
    return base, base.view(-1)

x = torch.zeros(1)
want = resized(x.clone())
got = torch.compile(resized, backend="inductor")(x.clone())
if got.shape != want.shape or not torch.equal(got, want):
    raise AssertionError("resize_ of a returned view resized its base: %d elements came back "
                         "instead of %d" % (got.numel(), want.numel()))
base, alias = torch.compile(both, backend="inductor", fullgraph=True)(x.clone())
if base is alias:
    raise AssertionError("resize_ of a returned view resized its base: the base and its view "
                         "came back as one tensor")
if alias.data_ptr() != base.data_ptr() or alias.shape != (1,):
    raise AssertionError("the returned view is not a view of its base")
"""

BACKPORT = Backport(
    name=NAME,
    summary="torch.compile returns a no-grad no-op view of another output as its own tensor, "
    "so resize_ of it after a graph break no longer resizes the base (silent wrong result)",
    headline="**silent wrong result**: a no-op view output is its base, so `resize_` changes both",
    upstream=("https://github.com/pytorch/pytorch/pull/191844",
              "https://github.com/pytorch/pytorch/issues/191449"),
    first_affected=(2, 7, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="resize_ of a returned view resized its base",
    changes_codegen=True,
    readme_symptom=(
        "**silent wrong result**: a compiled function that returns a tensor and a no-grad "
        "no-op view of it (`base, base.view(-1)`) returns one object twice, so `resize_` "
        "of the view after a graph break resizes the base (12 garbage elements instead of 1)"
    ),
    readme_fix=(
        "2.15's branch in `run_functionalized_fw_and_collect_metadata`: such a view is "
        "marked as an alias of the output it views, and the runtime rebuilds it from that "
        "output. That index counts outputs, so, as in 2.15, the readers that took every "
        "`base_idx` for an input index skip it: `remove_dupe_metadata`, "
        "`create_synthetic_base_metadata` and freezing's `replace_params_with_constants` "
        "(patched when `torch._inductor.freezing` is imported; where freezing is what "
        "imports AOTAutograd first it stays stock, which can keep a parameter as a graph "
        "input, never a wrong result). Each is a text edit of the installed function "
        "after a fingerprint check, and the `from … import` copies are patched too. It "
        "changes what the AOTAutograd cache stores, so the cache keys name it. Not "
        "carried, as upstream leaves them open: `base.detach()` and tensor subclasses."
    ),
)
