"""The Python examples in README.md and docs/*.md are whole programs a
reader can paste: each parses, and pyflakes finds no undefined name in it
(a block marked `<!-- fragment -->` may use names defined elsewhere). The
blocks marked `<!-- runs -->` exit 0 when run with torch; the unit envs
have none, so there they skip, and tests/integration/test_doc_examples_run.py
runs them on real torch. The blocks are read from the files at test time
(tests/doc_blocks.py), so a new or edited example is checked as written.
"""

import ast
import functools

import pytest
from pyflakes import checker, messages

import doc_blocks
from conftest import run_python

UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)
BLOCKS = doc_blocks.blocks()
RUNS = doc_blocks.blocks("runs")


def problems(block):
    """`file:line: message` for each reason `block` is not complete Python:
    a syntax error, or (unless a fragment) a name pyflakes finds undefined.
    Unused imports and the like are allowed: an example may import a name
    only to show where it lives."""
    try:
        tree = ast.parse(block.code, filename=block.where)
    except SyntaxError as error:
        return ["%s:%d: syntax error: %s"
                % (block.file, block.file_line(error.lineno or 1), error.msg)]
    if block.marker == "fragment":
        return []
    return ["%s:%d: %s" % (block.file, block.file_line(found.lineno),
                           found.message % found.message_args)
            for found in sorted(checker.Checker(tree, filename=block.where).messages,
                                key=lambda message: message.lineno)
            if isinstance(found, UNDEFINED)]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_each_python_block_defines_what_it_uses(block):
    """A reader who pastes the block gets no NameError from a name the
    example forgot to import or define."""
    found = problems(block)
    assert not found, "\n".join(found)


def test_every_marker_is_where_it_takes_effect():
    """A marker a blank line or a typo separates from its fence would
    silently leave its block unrun or unchecked."""
    assert not doc_blocks.stray_markers(), "\n".join(doc_blocks.stray_markers())


@functools.lru_cache(maxsize=None)
def torch_imports() -> bool:
    # In a child: importing torch here would apply the backports to the
    # test process and cost seconds for each worker.
    return run_python("import torch").returncode == 0


@pytest.mark.parametrize("block", RUNS, ids=[b.where for b in RUNS])
def test_blocks_marked_runs_exit_0(block, installed, tmp_path):
    """The example works with the installed package, as a reader would run
    it: from an empty folder, so the checkout's torch_backports is not the
    one imported."""
    if not torch_imports():
        pytest.skip("import torch fails here: the torch envs run this "
                    "(tests/integration/test_doc_examples_run.py)")
    done = run_python(block.code, cwd=str(tmp_path))
    assert done.returncode == 0, "%s exited %d:\n%s" % (block.where, done.returncode,
                                                        done.stderr[-3000:])


# The checks above are only as good as the extraction and the filter.

SAMPLE = """\
Text.

<!-- runs -->
```python
import torch
print(torch.ones(1))
```

````markdown
```python
not python at all (
```
````

- a list item:

  <!-- fragment -->
  ```py
  if ready:
      go()
  ```

```python
print(undefined_thing)
```

<!-- runs -->

```python
x = 1
```

<!-- run -->
```python
y = 2
```
"""


def sample():
    return doc_blocks.parse(SAMPLE, doc_blocks.ROOT / "SAMPLE.md")


def test_parse_finds_each_block_its_marker_and_its_line():
    blocks, _ = sample()
    assert [(b.line, b.marker) for b in blocks] == [
        (4, "runs"), (18, "fragment"), (23, None), (29, None), (34, None)]
    assert blocks[0].code == "import torch\nprint(torch.ones(1))\n"
    assert blocks[1].code == "if ready:\n    go()\n"


def test_parse_reports_a_separated_and_a_misspelt_marker():
    _, stray = sample()
    assert [s.split(":")[0] for s in stray] == ["27", "33"]


def test_an_undefined_name_fails_at_its_file_line():
    blocks, _ = sample()
    assert problems(blocks[2]) == ["SAMPLE.md:24: undefined name 'undefined_thing'"]
    assert problems(blocks[1]) == []  # a fragment
    assert problems(blocks[0]) == []


def test_a_syntax_error_fails_even_in_a_fragment():
    block = doc_blocks.Block(doc_blocks.ROOT / "SAMPLE.md", 10, "ok = 1\nnot python (\n",
                             "fragment")
    (found,) = problems(block)
    assert found.startswith("SAMPLE.md:12: syntax error"), found


def test_every_document_is_read():
    """A wrong ROOT or glob would leave every check above with nothing to
    check, and passing."""
    found = doc_blocks.documents()
    assert found[0] == doc_blocks.ROOT / "README.md"
    assert len(found) > 1 and all(path.is_file() for path in found)
