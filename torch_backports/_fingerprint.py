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
from types import CodeType
from typing import Callable, Collection, Dict, List, Optional, Tuple


def of_source(source: str) -> str:
    """The fingerprint of one function's source text, as inspect gives it."""
    lines = [line.rstrip() for line in dedent(source).splitlines()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def dedent(text: str) -> str:
    """textwrap.dedent(text), without its regular expressions (2 M
    instructions for two of torch's long functions, inside `import torch`)
    where the answer is plain: the first line is indented with spaces only,
    and every other line that holds more than spaces starts with that
    indentation, as a function's block does. Then that indentation is the
    common margin dedent removes, and dedent empties lines of spaces."""
    first = text[:text.find("\n")] if "\n" in text else text
    width = len(first) - len(first.lstrip(" "))
    if "\t" in text or "\r" in text or not first.strip():
        return textwrap.dedent(text)
    margin = first[:width]
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line.strip(" "):
            lines[number] = ""
        elif line.startswith(margin):
            lines[number] = line[width:]
        else:
            return textwrap.dedent(text)
    return "\n".join(lines)


def of_function(function: Callable, known: Collection[str] = ()) -> str:
    """The fingerprint of a live function; OSError if its source is missing."""
    return source_of(function, known)[0]


# Code object -> (fingerprint, source): a patch checks the function it
# replaces more than once (before rewriting it, and before installing).
_seen: Dict[CodeType, Tuple[str, str]] = {}


def source_of(function: Callable, known: Collection[str] = ()) -> Tuple[str, str]:
    """The fingerprint and source text of a live function.

    inspect.getsource tokenizes the function to find where it ends, which
    for a backport whose target `import torch` loads (torch.library, say)
    is paid inside every `import torch`. So the block is first cut by
    indentation alone; where that block's fingerprint is one of `known`
    (the releases verified, or fixed), it is the function's. Otherwise, or
    where the cut is wrong (a string whose lines start at column 0), the
    exact inspect.getsource decides.
    """
    function = inspect.unwrap(function)
    code = getattr(function, "__code__", None)
    if code in _seen:
        return _seen[code]
    found = None
    block = _indented_block(code) if code is not None else None
    if block is not None:
        fingerprint = of_source(block)
        if fingerprint in known:
            found = (fingerprint, block)
    if found is None:
        source = inspect.getsource(function)
        found = (of_source(source), source)
    if code is not None:
        _seen[code] = found
    return found


def _indented_block(code: CodeType) -> Optional[str]:
    """The lines from the function's first (decorator or def) line, through
    its def line, up to the last line of code (or of a comment indented as the body) before one
    indented no deeper than that first line; lines that start with a
    closing bracket, as a signature's last line does, do not end it."""
    # Read as bytes and split once at the function's first line, and only
    # the rest decoded: reading a 3,000-line torch module into linecache's
    # lines costs more than the rest of a check, and linecache would keep
    # them in every process that imports torch.
    first = code.co_firstlineno - 1
    try:
        with open(code.co_filename, "rb") as file:
            parts = file.read().split(b"\n", first)
        lines = [""] * first + parts[first].decode("utf-8").splitlines(keepends=True)
    except (OSError, IndexError, UnicodeDecodeError, TypeError):
        return None
    if not 0 <= first < len(lines):
        return None
    indent = len(lines[first]) - len(lines[first].lstrip())
    header = True  # until the def line: decorators, which may span lines
    body = None  # the body's indentation, once seen
    last = first
    for number in range(first, len(lines)):
        text = lines[number].strip()
        if not text:
            continue
        depth = len(lines[number]) - len(lines[number].lstrip())
        if header:
            header = not text.startswith(("def ", "async def "))
            last = number
            continue
        if text.startswith("#"):
            # as inspect: a comment belongs to the block if indented as its body
            if body is not None and depth >= body:
                last = number
            continue
        if depth <= indent and text[0] not in ")]}":
            break
        if body is None and depth > indent and lines[last].rstrip().endswith(":"):
            body = depth
        last = number
    return "".join(lines[first:last + 1])


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
