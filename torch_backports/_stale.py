"""Stale references: loaded torch modules that still hold what a patch replaced.

A backport replaces `module.f`. A module that ran `from module import f`
before the patch (in torch, typically one imported while `module` itself
was being imported) still calls the shipped `f` under its own name, and
the fix does not reach its callers. `find` looks for such bindings in the
namespace of every loaded torch module, for every function or class an
applied backport replaced or wrapped, so that `status` and `check` report
them: a backport whose target has them must rebind them too
(_patching.rebind). It runs in the status probe only, never at import.
"""

from __future__ import annotations

import sys
import types
from typing import Any, Dict, List, Tuple

from . import _patching


def find(changes: "Dict[str, list]") -> Dict[str, List[str]]:
    """For each backport in `changes` (name -> its recorded changes, as
    _activate keeps them), the names, "module.attribute", under which a
    loaded torch module still holds an object that backport replaced."""
    originals: Dict[int, Tuple[str, Any, str, Any]] = {}
    for backport, recorded in changes.items():
        for owner, name, old, new, how in recorded:
            if how in (_patching.REPLACED, _patching.WRAPPED, _patching.STAND_IN) and (
                    old is not new) and (
                    isinstance(old, (types.FunctionType, type))):
                originals[id(old)] = (backport, owner, name, old)
    found: Dict[str, List[str]] = {}
    if not originals:
        return found
    for module_name, module in list(sys.modules.items()):
        if not (module_name == "torch" or module_name.startswith("torch.")):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attribute, value in list(namespace.items()):
            hit = originals.get(id(value))
            if hit is None or hit[3] is not value:
                continue
            backport, owner, name, _ = hit
            if owner is module and attribute == name:
                continue  # the patched binding itself (set back by a revert)
            found.setdefault(backport, []).append("%s.%s" % (module_name, attribute))
    return {backport: sorted(names) for backport, names in found.items()}
