"""A user program: torch.compile with an unpicklable object in the FX graph
cache key. It never imports torch_backports; the .pth does whatever is done.

usage: python compile_kind.py KIND   (KIND: fine, PicklingError, ValueError, pybind11)

The object goes into the key through a public extension point: inductor
hashes the uuid() of the CustomGraphPass set as the inductor config's
post_grad_custom_post_pass, so whatever uuid() returns is pickled by
FxGraphCachePickler.dumps. The config is set directly, not through
torch.compile(options=...), which 2.6 does not apply to the cache key.
Prints one JSON line with the outcome and inductor's counters.
"""

import io
import json
import os
import pickle
import sys

import torch
import torch._inductor.config
from torch._dynamo.utils import counters
from torch._inductor.custom_graph_pass import CustomGraphPass

KIND = sys.argv[1]

# At module level its qualified name is '<lambda>', so pickling it by
# reference fails with pickle.PicklingError (a local lambda would fail
# with AttributeError, which every release catches).
UNNAMED = lambda: None  # noqa: E731


def key_part():
    if KIND == "fine":
        return "a-picklable-uuid-v1"
    if KIND == "PicklingError":
        return UNNAMED
    if KIND == "ValueError":
        # FxGraphCachePickler pickles with fast = True, which raises
        # ValueError on any cycle, as DeviceMesh's do (pytorch#179597).
        loop = []
        loop.append(loop)
        return loop
    if KIND == "pybind11":
        # An OpOverload's pybind11 function record, the object of
        # pytorch#164682: pickling it raises RuntimeError "... is not pickleable."
        return torch.ops.aten.sin.default._op
    raise SystemExit("unknown kind %r" % KIND)


def error_kind(obj):
    """Which kind of error pickling `obj` raises in fast mode, as dumps does
    (older pybind11 builds refuse some objects with TypeError instead)."""
    pickler = pickle.Pickler(io.BytesIO())
    pickler.fast = True
    try:
        pickler.dump(obj)
    except pickle.PicklingError:
        return "PicklingError"
    except RuntimeError as exc:
        text = str(exc)
        return "pybind11" if "pybind11" in text and "is not pickleable" in text else "RuntimeError"
    except Exception as exc:
        return type(exc).__name__
    return None


class KeyedPass(CustomGraphPass):
    def __call__(self, graph):
        return None

    def uuid(self):
        return key_part()


def model(x):
    return torch.sin(x) * 2 + 1


torch._inductor.config.post_grad_custom_post_pass = KeyedPass()
compiled = torch.compile(model)
x = torch.arange(8, dtype=torch.float32)
result = {"kind": KIND, "torch": torch.__version__, "rank": os.environ.get("RANK"),
          "raises": error_kind(key_part())}
try:
    out = compiled(x)
    result.update(outcome="compiled", correct=bool(torch.allclose(out, model(x))))
except Exception as exc:
    result.update(outcome="crashed", error=type(exc).__name__,
                  cause=type(exc.__cause__ or exc.__context__).__name__)
result["counters"] = {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")}
print(json.dumps(result))
