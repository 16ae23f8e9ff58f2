"""`torch-backports verify`'s reading of a reproducer's output and its verdicts."""

import pytest

from torch_backports import _verify

TRACEBACK = """W1203 some log line
Traceback (most recent call last):
  File "<string>", line 3, in <module>
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
CppCompileError: C++ compile error
"""


@pytest.mark.parametrize("stderr, expected", [
    (TRACEBACK, "BackendCompilerFailed"),
    ("Traceback (most recent call last):\n  File \"x\", line 1\nAssertionError\n", "AssertionError"),
    ("just a message\n", "just a message"),
    ("", "no output"),
])
def test_exception_line(stderr, expected):
    assert _verify.exception_line(stderr) == expected


def test_rank_prefixed_traceback():
    prefixed = "\n".join("[rank0]: " + line for line in TRACEBACK.splitlines())
    assert _verify.exception_line(prefixed) == "BackendCompilerFailed"


def run(outcome, symptom=False, detail=""):
    return _verify.Run(outcome, detail, 1.0, symptom)


@pytest.mark.parametrize("stock, fixed, verdict, ok", [
    (run("crashed", True), run("ok"), "fixed", True),
    (run("crashed", False), run("ok"), "passes; stock torch failed without", True),
    (run("ok"), run("ok"), "not reproduced", True),
    (run("crashed", True), run("crashed", True), "FAILED", False),
    (run("crashed", True), run("timed out"), "FAILED", False),
    (run("skipped", detail="a C++ compiler"), run("skipped", detail="a C++ compiler"),
     "skipped: needs a C++ compiler", True),
])
def test_verdicts(stock, fixed, verdict, ok):
    result = _verify.judge("x", stock, fixed)
    assert result.verdict.startswith(verdict) and result.ok is ok
