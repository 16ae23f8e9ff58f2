"""Dynamo traces .parameters(), .buffers(), .children(), .modules() and
ModuleDict.values() of an NNModuleVariable instead of raising NameError.

Upstream:
  https://github.com/pytorch/pytorch/pull/174399   the fix (2.11.0)
  https://github.com/pytorch/pytorch/issues/173924 the report
  https://github.com/pytorch/pytorch/issues/174133 duplicate report
  https://github.com/pytorch/pytorch/pull/167342   the typing refactor that introduced it

In torch 2.10.0, NNModuleVariable.call_method defines a helper closure,
wrap_values, that collects the wrapped submodules/parameters in a local list
`result` but returns ListIteratorVariable(named_children, ...): a refactor
renamed the enclosing method's lists and missed this one. `named_children` is
thus a free variable of wrap_values, bound to the enclosing method's local of
that name, which is only assigned in the `name == "named_children"` branch,
so every call of wrap_values raises

  torch._dynamo.exc.InternalTorchDynamoError: NameError: cannot access free
  variable 'named_children' where it is not associated with a value in
  enclosing scope

wrap_values serves the methods children, modules, parameters, buffers and
ModuleDict.values; the named_* methods, keys, items and __len__ do not use it.
NNModuleVariable is what dynamo builds for a module when
torch._dynamo.config.inline_inbuilt_nn_modules is False (2.10's default is
True, but tt-xla and others set it False), so e.g. Hugging Face's
`next(self.parameters()).dtype` (ModuleUtilsMixin.dtype) fails to compile.

Read from each release's torch/_dynamo/variables/nn_module.py:

  release        NNModuleVariable.call_method  wrap_values returns
  2.8.0 - 2.9.1  93879ae4fa7ab8d3              result (its own list)   not affected
  2.10.0         f8ab2085d2f5fd45              named_children          affected
  2.11.0         b47f83b3c5b37e61              named_children (its own list, fixed)
  2.12.0/2.12.1  72bb3d8a358cadb9              named_children (own list)
  2.13.0         4385953d7e04a47e              named_children (own list)
  2.15.0         4241f75faa6474aa              named_children (own list)

The 2.10.0 -> 2.11.0 diff of call_method is exactly these two lines of
wrap_values (2.11 names the list named_children, as the return already did);
no other closure in nn_module.py 2.10.0 has a free variable that its
enclosing scope binds only later (checked with symtable).

The patch recompiles the installed call_method from its own source with
exactly upstream's edit (torch_backports._patching.rewritten keeps its
globals, line numbers and the __class__ cell of its zero-argument super()),
after checking it is the 2.10.0 code, and sets it on the class.

Cost: call_method is 392 lines with zero-argument super(), so its copy is
compiled through ast, which cost ~60 M instructions (callgrind, torch
2.10.0, 2026-12-05), 0.7 % of `import torch._inductor.codecache`: dynamo is
imported by inductor whether or not anything is ever compiled. So the
fingerprint is checked and the copy compiled at the first call of
call_method (_patching.rewritten_on_first_call), inside the first compile
that traces a method of such a module.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "dynamo-nnmodule-wrap-values"

VERIFIED = {"f8ab2085d2f5fd45": "2.10.0"}
FIXED = {
    "b47f83b3c5b37e61": "2.11.0",
    "72bb3d8a358cadb9": "2.12.0 - 2.12.1",
    "4385953d7e04a47e": "2.13.0",
    "4241f75faa6474aa": "2.15.0",
}

# pytorch/pytorch#174399, in the dedented source of call_method. The context
# line (wrap_values' return annotation) makes the old text occur once: other
# branches of call_method also start a `result = []`.
EDITS = [
    (
        '    ) -> "variables.ListIteratorVariable":\n'
        "        result = []\n"
        "        for name, submod in items:\n"
        "            result.append(\n",
        '    ) -> "variables.ListIteratorVariable":\n'
        "        named_children: list[VariableTracker] = []\n"
        "        for name, submod in items:\n"
        "            named_children.append(\n",
    ),
]


def apply(nn_module: ModuleType, release: Release) -> Revert:
    """Replace nn_module.NNModuleVariable.call_method by the 2.10.0 one with
    wrap_values fixed; return the undo."""
    owner = _patching.own_class(nn_module, "NNModuleVariable")
    return _patching.rewritten_on_first_call(owner, "call_method", EDITS, VERIFIED, FIXED)


# HF's ModuleUtilsMixin.dtype idiom on a module dynamo wraps as an
# NNModuleVariable. From 2.12 inline_inbuilt_nn_modules is deprecated (always
# True; reading or setting it warns), so it is set only where it exists and
# with its FutureWarning silenced.
REPRODUCER = r"""
import warnings
import torch
import torch._dynamo

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    if hasattr(torch._dynamo.config, "inline_inbuilt_nn_modules"):
        torch._dynamo.config.inline_inbuilt_nn_modules = False

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x.to(next(self.parameters()).dtype))

model = Model()
x = torch.ones(2, 4, dtype=torch.float64)
torch.testing.assert_close(torch.compile(model, backend="eager", fullgraph=True)(x), model(x))
"""

BACKPORT = Backport(
    name=NAME,
    summary="dynamo traces .parameters(), .buffers(), .children(), .modules() and "
    "ModuleDict.values() of a module it does not inline, instead of raising "
    "NameError: cannot access free variable 'named_children'",
    headline=(
        "`NameError: … 'named_children'` from `.parameters()` of a module dynamo does "
        "not inline"
    ),
    upstream=(
        "https://github.com/pytorch/pytorch/pull/174399",
        "https://github.com/pytorch/pytorch/issues/173924",
    ),
    first_affected=(2, 10, 0),
    first_fixed=(2, 11, 0),
    apply=apply,
    reproducer=REPRODUCER,
    # 3.11+: "cannot access free variable 'named_children' where it is not
    # associated with a value in enclosing scope"; 3.10: "free variable
    # 'named_children' referenced before assignment in enclosing scope".
    symptom="free variable 'named_children'",
    readme_symptom=(
        "`InternalTorchDynamoError: NameError: cannot access free variable "
        "'named_children'` for `.parameters()`, `.buffers()`, `.children()`, "
        "`.modules()`, `ModuleDict.values()` on a module dynamo does not inline "
        "(`next(self.parameters()).dtype`)"
    ),
    readme_fix=(
        "upstream's two-line edit (the closure's list is named `named_children`, as its "
        "return already said) applied to the source of the installed "
        "`NNModuleVariable.call_method`, checked and compiled (392 lines) at its first "
        "call."
    ),
)

