"""Fingerprints: recognising the exact code a patch replaces.

A backport that replaces a function copied from torch applies only over code
it has been verified against. The fingerprint is a hash of the function's
source text, dedented and with trailing blanks dropped, so it is the same on
every Python version (bytecode is not) and for every build of one source
(2.10.0+cu128 and 2.10.0+cpu alike). A vendor build that cherry-picked the
fix, or changed the function any other way, gives another fingerprint and is
left alone. A build without .py files gives none, and is left alone too.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import io
import textwrap
from collections import deque
from itertools import islice, repeat
from operator import itemgetter
from types import CodeType
from typing import Callable, Collection, Dict, List, Optional, Tuple


def of_source(source: str) -> str:
    """The fingerprint of one function's source text, as inspect gives it."""
    lines = _plain_lines(source)
    if lines is None:
        lines = [line.rstrip() for line in dedent(source).splitlines()]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


# The characters besides "\n" that str.splitlines() splits at, and tabs,
# after which textwrap.dedent's idea of a line and of its margin differ
# from the plain one.
_AWKWARD = ("\t", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e")


def _plain_lines(source: str) -> "Optional[List[str]]":
    """The lines of dedent(source), right-stripped, where that is plain (see
    dedent), made by C-level map()s: a Python loop over a 130-line method
    cost 0.5 M instructions (callgrind, 2026-12-04), and `import torch`
    checks five such functions. None where it is not plain."""
    if not source.isascii() or any(c in source for c in _AWKWARD):
        return None
    lines = list(map(str.rstrip, source.splitlines()))
    if not lines or not lines[0]:
        return None
    width = len(lines[0]) - len(lines[0].lstrip(" "))
    if not width:
        return lines
    # Every line that is not blank must start with the first line's margin.
    if sum(map(str.startswith, lines, repeat(lines[0][:width]))) + lines.count("") != len(lines):
        return None
    return list(map(itemgetter(slice(width, None)), lines))


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
    its def line and its last line of code, up to the last line of code (or
    of a comment indented as the body) before one indented no deeper than
    that first line; lines that start with a closing bracket, as a
    signature's last line does, do not end it."""
    # Costs, for the five functions `import torch` checks on 2.13 (callgrind,
    # 2026-12-04): bytes.split costs ~430 instructions a line, 1.8 M for the
    # 4,100 lines before them (iterating a BytesIO: 1.1 M), and more for the
    # lines after them; a Python loop over a function's lines costs ~3,000 a
    # line. So the lines before are skipped by a C-level iterator, only the
    # function's lines and a few after it are decoded, and the loop visits
    # only the header, the body's first line and the lines after the last
    # line the code object names. (linecache would also keep every line of
    # the module in every process that imports torch.)
    first = code.co_firstlineno - 1
    ends = _last_code_line(code)
    try:
        with open(code.co_filename, "rb") as file:
            stream = io.BytesIO(file.read())
        deque(islice(stream, first), maxlen=0)
        if ends is None:
            lines = stream.read().decode("utf-8").splitlines(keepends=True)
        else:
            lines = b"".join(islice(stream, ends - first + _SLACK)).decode(
                "utf-8").splitlines(keepends=True)
        if not lines:
            return None
        code_ends = 0 if ends is None else ends - 1 - first  # an index into lines
        last, ended = _block_end(lines, code_ends)
        if not ended:  # still inside comments, which may go on for long
            lines += stream.read().decode("utf-8").splitlines(keepends=True)
            last, ended = _block_end(lines, code_ends)
    except (OSError, UnicodeDecodeError, TypeError, ValueError):
        return None
    return "".join(lines[:last + 1])


# Lines read beyond a function's last line of code (see _indented_block).
_SLACK = 40


def _last_code_line(code: CodeType) -> Optional[int]:
    """The last line (1-based) that holds some of `code`'s own instructions
    (a nested function's body may go beyond it); None before Python 3.10,
    whose code objects have no co_lines()."""
    lines = getattr(code, "co_lines", None)
    if lines is None:
        return None
    # map and filter stay in C: a long function has hundreds of entries
    return max(max(filter(None, map(itemgetter(2), lines())), default=0),
               code.co_firstlineno)


def _block_end(lines: List[str], code_ends: int) -> Tuple[int, bool]:
    """The index of the block's last line among `lines`, which start at its
    first line, and whether a line after it ended the block (rather than
    the end of `lines`). Lines up to index `code_ends`, the last that holds
    code, belong to it without being looked at, once the body has begun."""
    indent = len(lines[0]) - len(lines[0].lstrip())
    header = True  # until the def line: decorators, which may span lines
    body = None  # the body's indentation, once seen
    last = number = 0
    while number < len(lines):
        line = lines[number]
        text = line.strip()
        number += 1
        if not text:
            continue
        depth = len(line) - len(line.lstrip())
        if header:
            header = not text.startswith(("def ", "async def "))
            last = number - 1
            continue
        if text.startswith("#"):
            # as inspect: a comment belongs to the block if indented as its body
            if body is not None and depth >= body:
                last = number - 1
            continue
        if depth <= indent and text[0] not in ")]}":
            return last, True
        if body is None and depth > indent and lines[last].rstrip().endswith(":"):
            body = depth
        last = number - 1
        if body is not None and number <= code_ends:
            last = number = code_ends
            number += 1
    return last, False


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
