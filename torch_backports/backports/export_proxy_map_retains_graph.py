"""torch.export.export no longer keeps the last exported program's graph
alive after the program is dropped.

Upstream:
  torch 2.15.0, torch/fx/experimental/proxy_tensor.py, _ModuleStackTracer.trace
  (the fix PR was not identified: the public search index has no thread for
  it, and the pytorch repository is too large to fetch here)
  https://github.com/pytorch/pytorch/pull/160456   introduced the map (2.9.0)
  https://github.com/pytorch/pytorch/pull/163516   moved its reader under
                                                   detect_non_strict_fake_tensor_leaks (2.10.0)

Non-strict export traces with _ModuleStackTracer, whose trace() ends by
clearing the module-level dict _FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT and
filling it with id(fake tensor) -> fx.Node for every tensor it traced. Its one
reader is the non-strict fake tensor leak detector at the end of
torch/export/_trace.py, which runs only when asked for (2.9: the environment
variable NONSTRICT_EXPORT_SANITIZE_TRACE=1; 2.10 on:
torch._export.config.detect_non_strict_fake_tensor_leaks, default False). The
dict is filled regardless, so after `ep = torch.export.export(m, args)` and
`del ep` its nodes keep their graph and the program's graph module (with the
graph's fake tensors and their fake mode and ShapeEnv) alive until the next
export replaces them: there is no exception, only memory that is not freed.
The reproducer's symptom:

  export kept the exported program's graph module alive after del and gc.collect()

2.15 fills the dict only when the leak detector will read it. Its readers did
not change (the reader block of export/_trace.py is the same in 2.14.1 and
2.15.0; nothing else in torch names the dict).

_ModuleStackTracer.trace, read from each release's
torch/fx/experimental/proxy_tensor.py (tools/fingerprint.py on the wheels):

  release          fingerprint       lines  the leak detector is on when
  2.7.0 - 2.8.0    8b8265206cf4ad3d   -     (no map: not affected)
  2.9.1            f93206eef0880dcc  68     NONSTRICT_EXPORT_SANITIZE_TRACE=1
  2.10.0           b53a98dc40204dd5  66     torch._export.config.detect_non_strict_fake_tensor_leaks
  2.11.0           072bd35f9083797b  68     the same
  2.12.0 - 2.14.1  cb3548d57a1bfe32  68     the same
  2.15.0           39981fc6188fb402  80     fixed

The patch makes the installed trace() fill the dict only when the leak
detector of that release is on, by upstream's edit of its own source (on 2.9
with 2.9's switch, the environment variable, read as export reads it). The
edit keeps the line count, so torch's line numbers in the rest of trace()
stay right in tracebacks. With the detector on, the dict is filled exactly as
on stock and on 2.15, and so it still retains the last graph, as on 2.15.

Cost: proxy_tensor is imported by `import torch`, and trace() uses
zero-argument super(), so its rewrite goes through ast: 11 M instructions
(callgrind, torch 2.13.0, Python 3.11, 2026-12-04), half the budget of all
of torch-backports inside `import torch`, and reading its source for the
fingerprint, 2,494 lines into the file, ~1 M. So apply() puts a stand-in in
place (_patching.rewritten_on_first_call), which checks the fingerprint and
compiles the fix at the first call of trace(): the first non-strict export,
or make_fx with this tracer. The edit for each verified release is looked
up by the fingerprint then.

Not carried: 2.15's comment explaining the gate, and the import style (a
separate `import` and `if`, which would shift the lines below).
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "export-proxy-map-retains-graph"

VERIFIED = {
    "f93206eef0880dcc": "2.9.1",
    "b53a98dc40204dd5": "2.10.0",
    "072bd35f9083797b": "2.11.0",
    "cb3548d57a1bfe32": "2.12.0 - 2.14.1",
}
FIXED = {"39981fc6188fb402": "2.15.0"}

# The fill loop in the dedented source of trace(), with the lines before it:
# the same text in every verified release.
_OLD = (
    "    _FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT.clear()\n"
    "\n"
    "    for key, val in self.tensor_tracker.items():\n"
)
# 2.15's gate. Imported inside, as upstream does: at proxy_tensor's own
# import, torch._export.config is not loadable yet (torch/_export imports
# make_fx from proxy_tensor). `import ... as` binds no `torch` local, which
# would shadow the module global that trace() uses.
_CONFIG_GATE = (
    "    _FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT.clear()\n"
    "    import torch._export.config as _export_config\n"
    "    for key, val in (self.tensor_tracker.items()"
    " if _export_config.detect_non_strict_fake_tensor_leaks else ()):\n"
)
# 2.9's switch, the test of torch/export/_trace.py 2.9.1 (its constant
# NONSTRICT_EXPORT_SANITIZE_TRACE is this name): proxy_tensor does not import os.
_ENVIRON_GATE = (
    "    _FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT.clear()\n"
    "    import os\n"
    "    for key, val in (self.tensor_tracker.items()"
    ' if os.environ.get("NONSTRICT_EXPORT_SANITIZE_TRACE", "0") == "1" else ()):\n'
)
EDITS = {
    "f93206eef0880dcc": [(_OLD, _ENVIRON_GATE)],
    "b53a98dc40204dd5": [(_OLD, _CONFIG_GATE)],
    "072bd35f9083797b": [(_OLD, _CONFIG_GATE)],
    "cb3548d57a1bfe32": [(_OLD, _CONFIG_GATE)],
}


def apply(proxy_tensor: ModuleType, release: Release) -> Revert:
    """Make proxy_tensor._ModuleStackTracer.trace fill
    _FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT only for the leak detector;
    return the undo."""
    owner = _patching.own_class(proxy_tensor, "_ModuleStackTracer")
    # Checked and compiled at the first export, not in every `import torch`.
    return _patching.rewritten_on_first_call(owner, "trace", EDITS, VERIFIED, FIXED)


# Export a module, drop the program: it must be freed (the fix). Then, with
# the leak detector on, the warning for a fake tensor that escaped the trace
# must still name the traced node that made it, which it reads from the dict:
# the dict is still filled when asked for (as on 2.15).
REPRODUCER = r'''
import gc
import os
import warnings
import weakref

import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(256, 256)

    def forward(self, x):
        return self.lin(x).relu()


def export_and_drop():
    model = Model()
    x = torch.randn(2, 256)
    ep = torch.export.export(model, (x,), strict=False)
    torch.testing.assert_close(ep.module()(x), model(x))
    refs = {"program": weakref.ref(ep), "program's graph module": weakref.ref(ep.graph_module),
            "module": weakref.ref(model), "parameter": weakref.ref(model.lin.weight)}
    del ep, model
    return refs


refs = export_and_drop()
gc.collect()
alive = [name for name, ref in refs.items() if ref() is not None]
if alive:
    raise SystemExit("export kept the exported %s alive after del and gc.collect()"
                     % ", ".join(alive))

escaped = []


class Leaky(torch.nn.Module):
    def forward(self, x):
        y = x.sin()
        escaped.append(y)
        return y + 1


try:
    import torch._export.config as export_config  # 2.10 on
except ImportError:  # 2.9: an environment variable, read by export
    os.environ["NONSTRICT_EXPORT_SANITIZE_TRACE"] = "1"
else:
    export_config.detect_non_strict_fake_tensor_leaks = True
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ep = torch.export.export(Leaky(), (torch.randn(3),), strict=False)
torch.testing.assert_close(ep.module()(torch.zeros(3)), torch.ones(3))
said = "\n".join(str(w.message) for w in caught
                 if "fake tensors that are still alive" in str(w.message))
assert said, "export with leak detection on did not report the escaped fake tensor"
# Mapped, it is listed by shape (2.11 on: "from node 'sin'"); unmapped,
# 2.9 - 2.10 leave it out and 2.11 on say "<no proxy mapping found>".
assert "FakeTensor(shape=torch.Size([3])" in said and "<no proxy mapping found>" not in said, (
    "the leak warning does not say which traced node made the escaped fake tensor:\n" + said)
'''

BACKPORT = Backport(
    name=NAME,
    summary="torch.export.export no longer keeps the last exported program's graph "
    "module alive after the program is dropped (a module-level map of traced tensors "
    "to nodes is filled only for the non-strict leak detector)",
    headline="leak: `torch.export` keeps the last exported graph module alive",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/160456",
        "https://github.com/pytorch/pytorch/pull/163516",
    ),
    first_affected=(2, 9, 0),
    first_fixed=(2, 15, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="export kept the exported program's graph module alive",
    readme_symptom=(
        "leak: after `torch.export.export`, a module-level map keeps the last exported "
        "program's graph module (graph and fake tensors) alive after `del ep`"
    ),
    readme_fix=(
        "2.15's gate in `_ModuleStackTracer.trace`: the map that only the fake-tensor "
        "leak detector reads is filled only when the detector is on "
        "(`torch._export.config.detect_non_strict_fake_tensor_leaks`; on 2.9 the "
        "`NONSTRICT_EXPORT_SANITIZE_TRACE` variable). Checked at `import torch`, compiled "
        "at the first export (`_patching.rewritten_on_first_call`). The upstream PR was "
        "not identified; the change is read from 2.15.0's wheel."
    ),
)
