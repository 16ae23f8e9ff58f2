"""What runs instead of the installed torch code: for `torch-backports diff`
and the hashes in `status --json`.

Two halves. describe() runs where the patches are, in the child process the
CLI starts (torch_backports._probe): it turns the changes _patching recorded
while each backport was applied (owner, attribute, value before, value set,
how) into JSON-ready dicts holding the source text of both sides, with
file and first line. render() runs in the CLI and turns one such dict into
text: a unified diff for a source edit or a replacement, the wrapper's
source and what it wraps for a wrapper. Nothing here runs inside `import
torch`; reading source (inspect) is left until a report is asked for.

Hashes (installed_sha256, running_sha256) are the sha256 of the source
text exactly as the diff shows it: the installed function's lines as they
stand in its file (decorators included, inspect.getsource), and for a
rewritten copy the edited text re-indented to the same margin, so the two
are equal exactly where the text is. Where there is no source (a build
without .py files, a builtin) the hash is of the code object instead,
co_code and co_consts (code objects among the constants hashed the same
way), and "hash_of" says "code"; that hash differs between Python versions.
For a wrapper, running_sha256 is the wrapper's source: the installed
function still runs, inside it, with installed_sha256. A value that is no
function (an entry of a table a patch set by hand) is hashed by its repr,
each function it holds named with its own hash, without " at 0x..."
addresses, and "hash_of" says "repr".
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import re
import sys
import types
from typing import Any, Dict, List, Optional

from . import _patching

# The fields of a side (installed or running) of a change.
Side = Dict[str, Any]


def qualified_name(owner: Any, name: str) -> str:
    """module.Qual.name of attribute `name` of a module or a class;
    module.Qual(name) of a default argument of a function, which
    _patching.rebind_defaults records with `name` "parameter="."""
    if isinstance(owner, types.FunctionType):
        return "%s.%s(%s)" % (owner.__module__, owner.__qualname__, name)
    if isinstance(owner, types.ModuleType):
        return "%s.%s" % (owner.__name__, name)
    if isinstance(owner, type):
        return "%s.%s.%s" % (owner.__module__, owner.__qualname__, name)
    # An instance (a custom op's CustomOpDef): its class, and the instance's
    # own name where it has one, so that an audit can tell two apart.
    kind = type(owner)
    label = next((value for value in (getattr(owner, attr, None) for attr in
                                      ("_qualname", "__name__", "name"))
                  if isinstance(value, str)), None)
    return "%s.%s%s.%s" % (kind.__module__, kind.__qualname__,
                           "[%s]" % label if label else "", name)


def collect(changes: "Dict[str, list]") -> "Dict[str, List[dict]]":
    """describe() of every change of every backport in `changes` (as
    _activate._changes holds them)."""
    return {name: [describe(change) for change in recorded]
            for name, recorded in changes.items()}


def describe(change: "_patching.Change") -> dict:
    """One recorded change as a JSON-ready dict: target, how, installed and
    running sides (path, line, source) or a description where a side has no
    source, the wrapped function for a wrapper, and the hashes."""
    owner, name, old, new, how = change
    entry: dict = {"target": qualified_name(owner, name), "how": how}
    try:
        running = new
        if how == _patching.STAND_IN:
            # The copy the stand-in makes at its first call (made now if it
            # has not been: it is what runs from then on); the original, put
            # back, where the check or the rewrite failed.
            running = getattr(new, _patching.MAKE_COPY)()
            if running is old:
                entry["note"] = "the stand-in's check or rewrite failed: the installed code runs"
            through = getattr(new, _patching.CALLED_THROUGH, None)
            if through is not None:
                entry["through"] = _side(through)
        entry["installed"] = _side(old) if old is not None else None
        if getattr(running, _patching._WRAPPER_MARK, False):
            entry["kind"] = "wrapper"
            entry["running"] = _side(running._self_wrapper)
            entry["wraps"] = _side(running.__wrapped__)
        elif _edited(running) is not None:
            entry["kind"] = "source edit"
            entry["running"] = _edited_side(running, entry["installed"])
        elif running is None:
            entry["kind"] = "deleted"
            entry["running"] = None
        else:
            entry["kind"] = "replacement" if old is not None else "addition"
            entry["running"] = _side(running)
    except Exception as exc:  # a report must not fail on one odd object
        entry["error"] = "%s: %s" % (type(exc).__name__, exc)
    installed, running_side = entry.get("installed"), entry.get("running")
    kinds = [side.get("hash_of") for side in (installed, running_side) if side]
    entry["hash_of"] = "repr" if "repr" in kinds else "code" if "code" in kinds else "source"
    entry["installed_sha256"] = installed.get("sha256") if installed else None
    entry["running_sha256"] = running_side.get("sha256") if running_side else None
    return entry


def _unwrapped(value: Any) -> Any:
    """The function behind a staticmethod, classmethod, property or
    functools.wraps decorator (contextmanager, torch._disable_dynamo)."""
    for _ in range(20):
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        elif isinstance(value, property) and value.fget is not None:
            value = value.fget
        elif getattr(value, "__wrapped__", None) is not None and not getattr(
                value, _patching._WRAPPER_MARK, False):
            value = value.__wrapped__
        else:
            break
    return value


def _edited(value: Any) -> Optional[str]:
    """The edited source of rewritten()'s copy at or under `value` (a
    decorator over the copy carries it too: functools.wraps copies
    __dict__), or None."""
    for _ in range(20):
        source = getattr(value, _patching.EDITED_SOURCE, None)
        if isinstance(source, str):
            return source
        inner = value.__func__ if isinstance(value, (staticmethod, classmethod)) else getattr(
            value, "__wrapped__", None)
        if inner is None or inner is value:
            return None
        value = inner
    return None


def _where(value: Any) -> "tuple[Optional[str], Optional[int]]":
    code = getattr(_unwrapped(value), "__code__", None)
    if code is None:
        return None, None
    return code.co_filename, code.co_firstlineno


def _side(value: Any) -> Side:
    """Path, first line, name and source of `value` as inspect reads it
    from its file, with its hash; a repr where there is no source."""
    function = _unwrapped(value)
    side: Side = {"name": _name_of(function)}
    try:
        lines, first = inspect.getsourcelines(function)
        side["path"] = inspect.getsourcefile(function) or inspect.getfile(function)
        side["line"] = first or 1
        side["source"] = "".join(lines)
        side["sha256"] = _sha256(side["source"])
        side["hash_of"] = "source"
    except (OSError, TypeError):
        side["path"], side["line"] = _where(function)
        side["source"] = None
        side["repr"] = _short_repr(value)
        code = getattr(function, "__code__", None)
        if code is not None:
            side["sha256"] = code_sha256(code)
            side["hash_of"] = "code"
        else:
            side["sha256"] = _sha256(_value_text(value))
            side["hash_of"] = "repr"
    return side


def _value_text(value: Any) -> str:
    """What is hashed of a value that is no function (a table entry, a
    flag): its repr, or for an object with attributes or a list, each item
    in turn, a function by its name and the hash of its own source (a table
    entry that now holds the patched function differs from the one that
    held the installed one, though their reprs name the same function)."""
    if isinstance(value, (list, tuple)):
        return "%s[%s]" % (type(value).__qualname__, ", ".join(map(_item_text, value)))
    if isinstance(value, dict):
        return "%s{%s}" % (type(value).__qualname__, ", ".join(
            "%s: %s" % (_item_text(key), _item_text(item)) for key, item in value.items()))
    fields = getattr(value, "__dict__", None)
    if isinstance(fields, dict) and not callable(value):
        return "%s(%s)" % (type(value).__qualname__, ", ".join(
            "%s=%s" % (key, _item_text(item)) for key, item in sorted(fields.items())))
    return _item_text(value)


def _item_text(value: Any, depth: int = 0) -> str:
    function = _unwrapped(value)
    if getattr(function, "__code__", None) is not None:
        # a rewritten copy by its edited text: inspect would read the
        # installed text at its line numbers
        edited = _edited(value)
        digest = _sha256(edited) if edited is not None else _side(value)["sha256"]
        # A closure made from another function (a dispatcher's kernel made
        # from the op's implementation) has the same text whatever it was
        # made from: the functions it closes over are part of what it runs.
        inner = [cell.cell_contents for cell in (getattr(function, "__closure__", None) or ())
                 if _has_contents(cell)
                 and getattr(_unwrapped(cell.cell_contents), "__code__", None) is not None]
        if inner and depth < 2:
            digest = _sha256(digest + "".join(_item_text(f, depth + 1) for f in inner))
        return "<%s %s>" % (_name_of(function), digest)
    # without the addresses that differ from process to process
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _has_contents(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


def _edited_side(running: Any, installed: "Optional[Side]") -> Side:
    """The running side of a source edit: the edited text, at the margin and
    first line of the installed function it was compiled over."""
    text = _edited(running)
    function = _unwrapped(running)
    path, line = _where(function)
    margin = ""
    if installed and installed.get("source"):
        first = installed["source"].splitlines()[0]
        margin = first[:len(first) - len(first.lstrip())]
        path, line = installed["path"], installed["line"]
    source = "".join(margin + line_text if line_text.strip() else line_text
                     for line_text in text.splitlines(True))
    if not source.endswith("\n"):
        source += "\n"
    return {"name": _name_of(function), "path": path, "line": line, "source": source,
            "sha256": _sha256(source), "hash_of": "source", "compiled_from_text": True}


def _name_of(value: Any) -> str:
    module = getattr(value, "__module__", None)
    qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if qualname is None:
        return type(value).__qualname__
    return "%s.%s" % (module, qualname) if module else qualname


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def code_sha256(code: types.CodeType) -> str:
    """sha256 of `code`'s co_code and co_consts, nested code objects by
    their own such hash: for a function whose source cannot be read."""
    digest = hashlib.sha256(code.co_code)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            digest.update(b"code:" + code_sha256(const).encode())
        else:
            digest.update(b"const:" + repr(const).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


# ---- the CLI side: text from describe()'s dicts --------------------------


def render(entry: dict, context: int = 3) -> str:
    """The text `torch-backports diff` shows for one change."""
    how = "" if entry["how"] in (_patching.REPLACED, _patching.WRAPPED) else ", " + entry["how"]
    head = "%s (%s%s)" % (entry["target"], entry.get("kind", "?"), how)
    if entry.get("error"):
        return "%s\n  could not describe it: %s\n" % (head, entry["error"])
    lines = [head]
    if entry.get("note"):
        lines.append("  note: " + entry["note"])
    through = entry.get("through")
    if through:
        lines.append("  the stand-in calls it through %s at %s:" % (through["name"], _at(through)))
        lines.append(_numbered(through))
    installed, running = entry.get("installed"), entry.get("running")
    kind = entry.get("kind")
    if kind == "wrapper":
        wraps = entry["wraps"]
        lines.append("  wraps   %s at %s (installed, unchanged; sha256 %s)"
                     % (wraps["name"], _at(wraps), wraps["sha256"][:16]))
        lines.append("  runs    %s at %s, which calls the installed function:"
                     % (running["name"], _at(running)))
        lines.append(_numbered(running))
    elif kind in ("source edit", "replacement") and installed and running and (
            installed.get("source") and running.get("source")):
        if kind == "source edit":
            lines.append("  a copy compiled from the edited text below, with the installed "
                         "function's globals and line numbers")
        lines.append(unified_diff(installed, running, context, entry["target"]))
    else:
        for label, side in (("installed", installed), ("running", running)):
            if not side:
                lines.append("  %-9s  %s" % (label, "(no such attribute)" if label == "installed"
                                              else "(deleted)"))
            elif side.get("source"):
                lines.append("  %-9s  %s at %s" % (label, side["name"], _at(side)))
                if label == "running":
                    lines.append(_numbered(side))
            else:
                lines.append("  %-9s  %s" % (label, side.get("repr")))
    return "\n".join(line.rstrip("\n") for line in lines) + "\n"


def _at(side: Side) -> str:
    return "%s:%s" % (side.get("path"), side.get("line")) if side.get("path") else "(no file)"


def _numbered(side: Side) -> str:
    if not side.get("source"):
        return "    " + side.get("repr", "(no source)")
    first = side.get("line") or 1
    return "\n".join("  %5d | %s" % (first + i, text.rstrip("\n"))
                     for i, text in enumerate(side["source"].splitlines()))


def unified_diff(installed: Side, running: Side, context: int = 3,
                 heading: Optional[str] = None) -> str:
    """A unified diff from `installed` to `running`, each at its real path
    and line numbers: the ---/+++ headers name the files (the running side
    of a source edit is the installed file, as patched, marked after a
    tab), and each @@ header gives the lines in those files."""
    a = installed["source"].splitlines()
    b = running["source"].splitlines()
    a_first, b_first = installed["line"], running["line"]
    label = "\t(as torch-backports runs it)" if running.get("compiled_from_text") else ""
    out = ["--- %s" % installed["path"], "+++ %s%s" % (running["path"], label)]
    # Matched without each side's margin and trailing blanks: a method
    # replaced by a module-level function of ours, or a blank line that
    # dedent emptied, is not a change; the lines shown are the real ones.
    matcher = difflib.SequenceMatcher(None, _keys(a), _keys(b), autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append("@@ -%s +%s @@ %s" % (_range(a_first + i1, i2 - i1),
                                         _range(b_first + j1, j2 - j1),
                                         heading or running["name"]))
        for tag, k1, k2, m1, m2 in group:
            if tag == "equal":
                out.extend(" " + line for line in a[k1:k2])
                continue
            out.extend("-" + line for line in a[k1:k2])
            out.extend("+" + line for line in b[m1:m2])
    if len(out) == 2:
        out.append("(no difference in the text)")
    return "\n".join(out)


def _keys(lines: "List[str]") -> "List[str]":
    first = next((line for line in lines if line.strip()), "")
    margin = first[:len(first) - len(first.lstrip())]
    return [(line[len(margin):] if line.startswith(margin) else line.lstrip()).rstrip()
            for line in lines]


def _range(start: int, length: int) -> str:
    """A unified diff range: `start` is the file line of the first line;
    an empty range names the line before it, as diff -u does."""
    if length == 1:
        return "%d" % start
    if length == 0:
        return "%d,0" % (start - 1)
    return "%d,%d" % (start, length)


def hashes(entries: "List[dict]") -> "List[dict]":
    """The `patches` of one backport in status --json: target and hashes."""
    return [{"target": e["target"], "kind": e.get("kind"), "hash_of": e.get("hash_of"),
             "installed_sha256": e.get("installed_sha256"),
             "running_sha256": e.get("running_sha256")} for e in entries]


def in_this_process() -> "Dict[str, List[dict]]":
    """collect() of the backports applied in this process (the CLI's child)."""
    activate = sys.modules.get(__package__ + "._activate")
    if activate is None:
        return {}
    with activate._lock:
        changes = {name: list(recorded) for name, recorded in activate._changes.items()}
    return collect(changes)
