"""The Python examples in the project's Markdown, read from the files at
test time: shared by the unit check that every block is complete Python
(tests/test_doc_examples.py) and by the real-torch runs of the blocks
marked to run (tests/integration/test_doc_examples_run.py), so that both
see the same blocks.

A block is a fenced code block whose info string's first word is python
(or py, python3). An HTML comment on the line just before its fence marks
it:

    <!-- runs -->      the block is a whole program that needs only torch
                       and torch_backports: the tests run it and expect exit 0
    <!-- fragment -->  the block is part of a program on purpose: names it
                       uses may be defined elsewhere (it must still parse)
"""

import re
from pathlib import Path
from typing import List, NamedTuple, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
PYTHON = ("python", "py", "python3")
MARKERS = ("runs", "fragment")
MARKER = re.compile(r"^\s*<!--\s*([a-z]+)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)[^`]*$")


class Block(NamedTuple):
    path: Path
    line: int  # 1-based line of the opening fence; the code starts on the next
    code: str
    marker: Optional[str]

    @property
    def file(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    @property
    def where(self) -> str:
        return "%s:%d" % (self.file, self.line)

    def file_line(self, lineno: int) -> int:
        """The file's line of line `lineno` (1-based) of the code."""
        return self.line + lineno


def documents() -> List[Path]:
    """Every Markdown file a reader is pointed at: a docs file added later
    is checked without anyone listing it."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    changelog = ROOT / "CHANGELOG.md"
    if changelog.is_file():
        found.append(changelog)
    return found


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (stripped.startswith(fence) and set(stripped) == {fence[0]})


def parse(text: str, path: Path) -> Tuple[List[Block], List[str]]:
    """The Python blocks of `text`, and a line for each marker that would
    be dropped unnoticed: one no Python fence directly follows, or a
    one-word comment before a Python fence that is no known marker (a
    misspelt `<!-- run -->` would leave its block unrun).

    Fences of any language are tracked, so that a ```python shown inside a
    ```markdown example is not taken for a block; an unclosed fence runs to
    the end of the file, as CommonMark reads it."""
    lines = text.splitlines()
    blocks, stray = [], []
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = MARKER.match(line)
        if marker:
            following = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
            python_next = bool(following) and following.group(3).lower() in PYTHON
            if marker.group(1) in MARKERS and not python_next:
                stray.append("%d: <!-- %s --> is not on the line just before a ```python fence"
                             % (index + 1, marker.group(1)))
            elif python_next and marker.group(1) not in MARKERS:
                stray.append("%d: <!-- %s --> is no marker (%s)"
                             % (index + 1, marker.group(1), ", ".join(MARKERS)))
        opening = FENCE.match(line)
        if not opening:
            index += 1
            continue
        indent, fence, language = opening.group(1), opening.group(2), opening.group(3).lower()
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if language in PYTHON:
            # A fence in a list item is indented; its code is, by as much.
            body = [text[len(indent):] if text.startswith(indent) else text.lstrip()
                    for text in lines[index + 1:end]]
            before = MARKER.match(lines[index - 1]) if index else None
            marked = before.group(1) if before and before.group(1) in MARKERS else None
            blocks.append(Block(path, index + 1, "\n".join(body) + "\n", marked))
        index = end + 1
    return blocks, stray


def blocks(marker: Optional[str] = None) -> List[Block]:
    """Every Python block of documents(), or only those marked `marker`."""
    found = []
    for path in documents():
        found += parse(path.read_text(encoding="utf-8"), path)[0]
    return [b for b in found if marker is None or b.marker == marker]


def stray_markers() -> List[str]:
    """file:line: why, for each marker parse() finds misplaced."""
    return ["%s:%s" % (path.relative_to(ROOT).as_posix(), problem)
            for path in documents()
            for problem in parse(path.read_text(encoding="utf-8"), path)[1]]
