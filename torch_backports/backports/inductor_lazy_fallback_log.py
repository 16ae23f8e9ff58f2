"""Inductor renders the "Creating implicit fallback for" INFO message only when
that log record is emitted, not for every op without a lowering.

Upstream:
  https://github.com/pytorch/pytorch/pull/185951   the fix (first in 2.13.0)
  https://github.com/pytorch/pytorch/issues/185937 the report
  https://github.com/vllm-project/vllm/pull/43111  vLLM's own workaround (bounds
                                                   operator_str; not what upstream did)

When GraphLowering.call_function meets an op with no lowering (a custom op,
typically) and config.implicit_fallbacks is on (the default), it logs

  log.info("Creating implicit fallback for:\\n%s",
           error.operator_str(target, args, kwargs))

The second argument is computed before log.info looks at the level, so
OperatorIssue.operator_str renders every argument's IR (IRNode.__str__,
which prints whole loop bodies and recurses through their inputs) even
though torch._inductor.graph's INFO is off, as it is by default. Once per
op without a lowering per process, as the fallback it creates is then
registered; on graphs of many custom ops over deep pointwise chains this
formatting takes minutes of compile time (pytorch#185937, vLLM).

Read from each release's torch/_inductor/graph.py:

  release          GraphLowering.call_function   the log argument
  2.7.0            e9244411f0d79037              error.operator_str(...)
  2.8.0            c4394bfa4dd211e9              error.operator_str(...)
  2.9.1            6f5bc6522b8e1cc5              error.operator_str(...)
  2.10.0           2851958f90f00baa              error.operator_str(...)
  2.11.0           90f24f99ebf2f847              error.operator_str(...)
  2.12.0, 2.12.1   93fd5a19fa137552              error.operator_str(...)
  2.13.0           b9c3acc0b0a607f3              LazyString(error.operator_str, ...)
  2.14.1, 2.15.0   650b2c8ed6e7e247              LazyString(error.operator_str, ...)

Every one of those graph.py files imports LazyString from torch._logging at
module level (torch._logging.LazyString: str() calls func(*args, **kwargs)),
so the edited method finds it in its own globals. The releases in between
whose wheels were not read (2.7.1, 2.9.0, ...) are patched only where their
call_function has one of these fingerprints.

The patch recompiles the installed call_function from its own source with
exactly upstream's one-argument edit (torch_backports._patching.rewritten),
after checking it is one of the verified versions, and sets it on the
class. With the logger at INFO the message is the same text, rendered when
the record is formatted, as on 2.13+. The 2.12.1 -> 2.13.0 diff of
call_function also adds a `fallback_to_eager` custom node meta check: that
is another PR (a feature), not carried.
"""

from __future__ import annotations

from types import ModuleType

from .. import _patching
from .._backport import Backport, Release, Revert

NAME = "inductor-lazy-fallback-log"

VERIFIED = {
    "e9244411f0d79037": "2.7.0",
    "c4394bfa4dd211e9": "2.8.0",
    "6f5bc6522b8e1cc5": "2.9.1",
    "2851958f90f00baa": "2.10.0",
    "90f24f99ebf2f847": "2.11.0",
    "93fd5a19fa137552": "2.12.0 - 2.12.1",
}
FIXED = {
    "b9c3acc0b0a607f3": "2.13.0",
    "650b2c8ed6e7e247": "2.14.1 - 2.15.0",
}

# pytorch/pytorch#185951, in the dedented source of call_function (the
# log.info's arguments at 16 spaces); the message line makes it occur once.
EDITS = [
    (
        '                "Creating implicit fallback for:\\n%s",\n'
        "                error.operator_str(target, args, kwargs),\n",
        '                "Creating implicit fallback for:\\n%s",\n'
        "                LazyString(error.operator_str, target, args, kwargs),\n",
    ),
]


def apply(graph: ModuleType, release: Release) -> Revert:
    """Replace graph.GraphLowering.call_function by the installed one with
    the fallback message made lazy; return the undo."""
    owner = _patching.own_class(graph, "GraphLowering")
    # The edit names LazyString, which the method reads from graph's globals.
    if not callable(vars(graph).get("LazyString")):
        raise _patching.Unrecognised("%s does not import LazyString" % graph.__name__)
    method = vars(owner).get("call_function")
    if method is None:
        raise _patching.Unrecognised("GraphLowering has no call_function")
    fixed = _patching.rewritten(method, EDITS, VERIFIED, FIXED)
    return _patching.replace_attribute(owner, "call_function", fixed, VERIFIED, FIXED)


# pytorch/pytorch#185951's test (test_missing_op_info_log_is_lazy): with the
# log at its default level, a custom op without a lowering falls back without
# OperatorIssue.operator_str being called; with torch._inductor.graph at
# INFO, the message is still there, rendered. A fresh inductor cache, so
# that the graphs are lowered rather than loaded.
REPRODUCER = r"""
import logging, os, sys, tempfile
_cache = tempfile.TemporaryDirectory(prefix="inductor-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache.name
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
import torch
import torch._inductor.exc as exc
from torch._inductor import cpp_builder

try:
    cpp_builder.get_cpp_compiler()
except Exception as e:
    print("skipped: needs a C++ compiler for inductor's CPU backend (%s)" % e)
    sys.exit(77)

original = exc.OperatorIssue.__dict__["operator_str"].__func__
calls = []

def counted(target, args, kwargs):
    calls.append(str(target))
    return original(target, args, kwargs)

exc.OperatorIssue.operator_str = staticmethod(counted)

def make_op(name):
    @torch.library.custom_op("lazy_fallback_repro::" + name, mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @op.register_fake
    def _(x):
        return torch.empty_like(x)

    return getattr(torch.ops.lazy_fallback_repro, name).default

def compile_and_check(op):
    torch._dynamo.reset()
    f = lambda x: op(x.sin() + 1).cos()
    x = torch.randn(8)
    torch.testing.assert_close(torch.compile(f, backend="inductor", fullgraph=True)(x), f(x))

graph_log = logging.getLogger("torch._inductor.graph")
if graph_log.isEnabledFor(logging.INFO):
    print("skipped: needs torch._inductor.graph's INFO off, its default (TORCH_LOGS?)")
    sys.exit(77)
compile_and_check(make_op("quiet"))
if calls:
    raise AssertionError("OperatorIssue.operator_str rendered %d time(s) (%s) for an INFO log "
                         "that is off" % (len(calls), ", ".join(calls)))

messages = []

class Keep(logging.Handler):
    def emit(self, record):
        messages.append(record.getMessage())

handler = Keep(logging.INFO)
graph_log.addHandler(handler)
level, propagate = graph_log.level, graph_log.propagate
graph_log.setLevel(logging.INFO)
graph_log.propagate = False  # kept here, not printed by torch's handlers
try:
    compile_and_check(make_op("loud"))
finally:
    graph_log.setLevel(level)
    graph_log.propagate = propagate
    graph_log.removeHandler(handler)
fallback = [m for m in messages if m.startswith("Creating implicit fallback for:")]
assert len(fallback) == 1, messages
assert "target: lazy_fallback_repro.loud.default" in fallback[0], fallback
assert "args[0]: " in fallback[0], fallback
assert calls == ["lazy_fallback_repro.loud.default"], calls
"""

BACKPORT = Backport(
    name=NAME,
    summary="inductor no longer renders every argument's IR for the INFO log "
    "'Creating implicit fallback for' when INFO is off (minutes on custom-op-heavy graphs)",
    headline="compile time: IR rendered for an INFO log that is off (minutes on custom-op graphs)",
    upstream=(
        "https://github.com/pytorch/pytorch/pull/185951",
        "https://github.com/pytorch/pytorch/issues/185937",
    ),
    first_affected=(2, 7, 0),
    first_fixed=(2, 13, 0),
    apply=apply,
    reproducer=REPRODUCER,
    symptom="for an INFO log that is off",
    readme_symptom=(
        "compile time: for every op without a lowering (custom ops), inductor renders "
        "each argument's IR for an INFO log that is off; minutes on custom-op-heavy "
        "graphs"
    ),
    readme_fix=(
        "upstream's one-argument edit in `GraphLowering.call_function`: the log's text is "
        "a `LazyString`, rendered only when the INFO log is shown (the same message "
        "then). Not carried: 2.13's `fallback_to_eager` node-meta check, a separate "
        "feature."
    ),
)
