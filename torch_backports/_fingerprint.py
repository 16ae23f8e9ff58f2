"""Fingerprints: recognising the exact code a patch replaces.

A backport that replaces a function copied from torch applies only over code
it has been verified against. The fingerprint is a hash of the function's
source text, dedented and with trailing blanks dropped, so it is the same on
every Python version (bytecode is not) and for every build of one source
(2.10.0+cu128 and 2.10.0+cpu alike). A vendor build that cherry-picked the
fix, or changed the function any other way, gives another fingerprint and is
left alone. A build without .py files gives none, and is left alone too.
"""

import ast
import hashlib
import inspect
import textwrap
from typing import Callable, List


def of_source(source: str) -> str:
    """The fingerprint of one function's source text, as inspect gives it."""
    lines = [line.rstrip() for line in textwrap.dedent(source).splitlines()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def of_function(function: Callable) -> str:
    """The fingerprint of a live function; OSError if its source is missing."""
    return of_source(inspect.getsource(inspect.unwrap(function)))


def of_file(text: str, qualname: str) -> str:
    """The fingerprint of `qualname` (e.g. 'Class.method') defined in the
    module source `text`, read without importing it: the same block of lines
    inspect.getsource returns for the live function."""
    lines = text.splitlines(keepends=True)
    return of_source("".join(inspect.getblock(lines[_first_line(text, qualname) - 1:])))


def _first_line(text: str, qualname: str) -> int:
    body: List[ast.stmt] = ast.parse(text).body
    node = None
    for part in qualname.split("."):
        matches = [n for n in body if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part]
        if not matches:
            raise LookupError("%s is not defined at the top of its scope" % qualname)
        node = matches[-1]  # the last definition wins, as at run time
        body = node.body
    decorators = [d.lineno for d in getattr(node, "decorator_list", [])]
    return min(decorators + [node.lineno])
