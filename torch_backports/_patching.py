"""Replacing a function of torch's only where it is the code we verified."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterable, Iterator

from ._backport import Fingerprints, Revert

# _fingerprint is imported where a check runs, not here: `import torch`
# loads this module for the stand-ins of the functions it defines, whose
# checks wait for their first call, and the module cost 0.54 M instructions
# there (callgrind, torch 2.13.0, Python 3.11, 2026-12-07).


class Unrecognised(Exception):
    """The code to replace is not one of the verified versions; torch is left as it is."""


class CarriesFix(Exception):
    """The code to replace already is the fixed version (a vendor cherry-pick)."""


# Set on every replacement. A function made by rewritten() has the same
# fingerprint as the original, since inspect reads its source from torch's
# unchanged file, so the mark is what tells a second copy of
# torch-backports that the code is ours already.
_MARK = "_torch_backports_replacement"
# The same for a wrapt wrapper, which keeps attributes named _self_* on
# itself instead of passing them to the function it wraps.
_WRAPPER_MARK = "_self_torch_backports_wrapper"
# On rewritten()'s copy: the edited source it was compiled from (dedented),
# since the copy has no file of its own and inspect would read torch's
# unchanged text instead. `torch-backports diff` shows it.
EDITED_SOURCE = "_torch_backports_source"
# On rewritten_on_first_call()'s stand-in: the function that makes (once)
# and returns the copy, so that diff can show the copy before the first call.
MAKE_COPY = "_torch_backports_copy"
# On a stand-in made with `through`: that function, which diff shows too,
# since every call runs through it.
CALLED_THROUGH = "_torch_backports_through"

# How a recorded change was made (the last item of a Change).
REPLACED = "replaced"
WRAPPED = "wrapped"
STAND_IN = "rewritten on first call"
BY_HAND = "set by hand"

Change = "tuple[Any, str, Any, Any, str]"
"""(owner, attribute name, value before (None if none), value set, how)"""

# Where _install() and rewritten_on_first_call() append what they set, while
# _activate applies a backport (see recording); None otherwise. Appending
# a tuple is all a patch pays: everything that reads source (inspect,
# hashes, diffs) is left to torch_backports._diff, which only the CLI's
# child process runs.
_recording: "list | None" = None


def recording(changes: "list | None") -> "list | None":
    """Record the changes made from now on in `changes` (None: none) and
    return the list that recorded before, for the caller to put back: a
    backport's apply() may import a module whose hook applies another."""
    global _recording
    previous, _recording = _recording, changes
    return previous


def recorded_later() -> "Callable[[Callable[[], Any]], Any]":
    """For a patch that makes some of its changes after apply() has
    returned (at a first call, when another module is loaded): taken during
    apply(), a function that runs its argument with the changes it makes
    recorded where apply()'s are, with that backport's (for `diff` and
    status's hashes), as if they had been made during apply()."""
    changes = _recording

    def run(make: "Callable[[], Any]") -> Any:
        previous = recording(changes)
        try:
            return make()
        finally:
            recording(previous)

    return run


def _record(owner: Any, name: str, old: Any, new: Any, how: str) -> None:
    if _recording is not None:
        _recording.append((owner, name, old, new, how))


def check(function: Callable, where: str, verified: Fingerprints, fixed: Fingerprints) -> str:
    """Raise unless `function`'s source is one of the `verified`
    fingerprints; return that source."""
    from . import _fingerprint

    _refuse_ours(function, where)
    try:
        found, source = _fingerprint.source_of(function, {**verified, **fixed})
    except (OSError, TypeError) as exc:
        raise Unrecognised("%s: its source cannot be read (%s)" % (where, exc)) from None
    judge(found, where, verified, fixed)
    return source


def judge(found: str, where: str, verified: Fingerprints, fixed: Fingerprints) -> None:
    """Raise CarriesFix if fingerprint `found` (of the code at `where`) is a
    fixed release's, Unrecognised unless it is one of the `verified`."""
    if found in fixed:
        raise CarriesFix("%s already has the fix (fingerprint %s, as in torch %s)"
                         % (where, found, fixed[found]))
    if found not in verified:
        raise Unrecognised("%s has fingerprint %s, which matches no verified release (%s)"
                           % (where, found, ", ".join(sorted(set(verified.values()),
                                                             key=_by_release))))


def _by_release(text: str) -> "tuple":
    """Sort key of a fingerprint's releases ("2.9.1 - 2.10.0"): its first
    release as numbers, so that 2.10 comes after 2.9."""
    import re

    first = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return (tuple(int(part or 0) for part in first.groups()), text) if first else ((), text)


def _refuse_ours(function: Any, where: str) -> None:
    """Raise RuntimeError if `function` is a replacement or wrapper that
    torch-backports made (this copy or another)."""
    if getattr(function, _MARK, False) or getattr(function, _WRAPPER_MARK, False):
        raise RuntimeError("%s is already patched by torch-backports" % where)


def own_class(module: Any, name: str) -> type:
    """The class `name` in `module`'s own namespace (never an attribute that
    module-level __getattr__ makes up); Unrecognised if there is none."""
    found = vars(module).get(name)
    if not isinstance(found, type):
        raise Unrecognised("%s has no class %s" % (getattr(module, "__name__", module), name))
    return found


def own_attribute(owner: Any, name: str) -> "tuple[Any, str]":
    """The value of `name` in `owner`'s own __dict__ (a class's or a
    module's, never inherited), and its name for messages; Unrecognised if
    there is none."""
    where = "%s.%s" % (getattr(owner, "__qualname__", getattr(owner, "__name__", owner)), name)
    try:
        return vars(owner)[name], where
    except KeyError:
        raise Unrecognised("%s does not exist" % where) from None


def _install(owner: Any, name: str, old: Any, new: Any, how: str) -> Revert:
    setattr(owner, name, new)
    _record(owner, name, old, new, how)

    def revert() -> None:
        if vars(owner).get(name) is new:  # nobody has replaced ours since
            setattr(owner, name, old)

    return revert


def rebind(module_names: Iterable[str], name: str, original: Any, new: Any) -> Revert:
    """Set `name` to `new` in each loaded module of `module_names` that
    holds `original` (a `from ... import name` made before the patch);
    return the undo. A module imported later binds whatever its source
    module holds by then, so only those loaded now need it."""
    reverts = []
    for module_name in module_names:
        module = sys.modules.get(module_name)
        if module is not None and vars(module).get(name) is original:
            reverts.append(_install(module, name, original, new, REPLACED))
    return undo_all(reverts)


def rebind_defaults(functions: Iterable[Callable], original: Any, new: Any) -> Revert:
    """Set to `new` each default argument value of `functions` (positional
    or keyword-only) that is `original`, such as `inner_compile=
    compile_fx_inner`, which holds the function as it was when the `def`
    ran; return the undo. Each is recorded as the function's attribute
    "<parameter>=", for diff."""
    with all_or_nothing() as reverts:  # defaults are outside any snapshot
        for function in functions:
            for parameter, value in _defaults(function):
                if value is original:
                    reverts.append(_set_default(function, parameter, original, new))
    return undo_all(reverts)


def _defaults(function: Callable) -> "list[tuple[str, Any]]":
    """(parameter, default value) of each parameter of `function` that has one."""
    code = function.__code__
    defaults = function.__defaults__ or ()
    positional = code.co_varnames[:code.co_argcount]
    found = list(zip(positional[len(positional) - len(defaults):], defaults))
    return found + list((function.__kwdefaults__ or {}).items())


def _set_default(function: Any, parameter: str, old: Any, new: Any) -> Revert:
    def put(value: Any) -> None:
        if parameter in (function.__kwdefaults__ or {}):
            function.__kwdefaults__ = {**function.__kwdefaults__, parameter: value}
        else:
            names = [name for name, _ in _defaults(function)][:len(function.__defaults__)]
            values = list(function.__defaults__)
            values[names.index(parameter)] = value
            function.__defaults__ = tuple(values)

    put(new)
    _record(function, parameter + "=", old, new, REPLACED)

    def revert() -> None:
        if dict(_defaults(function)).get(parameter) is new:  # nobody has replaced ours since
            put(old)

    return revert


@contextlib.contextmanager
def all_or_nothing() -> "Iterator[list[Revert]]":
    """Collect the undo of each change of a patch made of several; should
    one raise, undo those already made, last first, and re-raise.

    For changes the caller's restore of its target module would not reach:
    other modules, function defaults, a class's dispatch table. Return
    undo_all() of the list when the block is done."""
    reverts: "list[Revert]" = []
    try:
        yield reverts
    except BaseException:
        undo_all(reverts)()
        raise


def undo_all(reverts: "list[Revert]") -> Revert:
    """One undo for a patch made of several: each of `reverts`, last first.
    The list is read when the undo runs, so a patch may build it as it goes
    and call the undo to back out halfway. Its check_put_off runs the put-off
    checks of every part: a patch that puts a stand-in in place and rebinds
    it elsewhere is refused as a whole, where the stand-in's check refuses."""

    def revert() -> None:
        for undo in reversed(reverts):
            undo()

    def checked() -> None:
        for undo in list(reverts):
            check_put_off(undo)

    revert.check = checked  # type: ignore[attr-defined]
    return revert


def replace_attribute(owner: Any, name: str, new: Any, verified: Fingerprints,
                      fixed: Fingerprints) -> Revert:
    """Set `owner.name` to `new` if the current value (found in the owner's own
    __dict__, a class's or a module's) is verified code; return the undo."""
    old, where = own_attribute(owner, name)
    check(old, where, verified, fixed)
    setattr(new, _MARK, True)
    return _install(owner, name, old, new, REPLACED)


def wrap_attribute(owner: Any, name: str, wrapper: Callable, verified: "Fingerprints | None",
                   fixed: Fingerprints) -> Revert:
    """Put a wrapt.FunctionWrapper calling `wrapper(wrapped, instance, args,
    kwargs)` around `owner.name`; return the undo. The wrapped function is
    checked against `verified` fingerprints, unless that is None because
    the backport checks the shape it needs itself. The wrapper keeps the
    function's name, docstring, signature and __wrapped__.
    """
    import wrapt

    old, where = own_attribute(owner, name)
    if getattr(old, _WRAPPER_MARK, False):
        raise RuntimeError("%s is already patched by torch-backports" % where)
    if verified is not None:
        check(old, where, verified, fixed)
    new = wrapt.FunctionWrapper(old, wrapper)
    setattr(new, _WRAPPER_MARK, True)
    return _install(owner, name, old, new, WRAPPED)


Edits = "list[tuple[str, str]] | Callable[[str], list[tuple[str, str]]]"


def rewritten(function: Callable, edits: Edits, verified: Fingerprints,
              fixed: Fingerprints) -> Callable:
    """A copy of `function` compiled from its own source with `edits` applied.

    For a fix that is a few words inside a long function: rather than carry
    a copy of the whole function, change exactly the text upstream changed,
    in the source of the very function installed, after its fingerprint has
    shown it is the code the edits were written against. Each `old` must
    occur exactly once, in the dedented source: a method's `def` at column
    0 and its body at 4 spaces, whatever its indentation in the file. The
    copy has the original's globals, defaults, name and line numbers
    (tracebacks point into torch's file), and its `__class__` cell where the
    original uses zero-argument super().

    `edits` may instead be a function of that dedented source giving the
    pairs, for a change such as putting lines in a try block, whose text
    (the lines, indented) differs between the verified releases.
    """
    import __future__
    import textwrap

    from . import _fingerprint

    where = getattr(function, "__qualname__", repr(function))
    source = _fingerprint.dedent(check(function, where, verified, fixed))
    if callable(edits):
        try:
            edits = edits(source)
        except ValueError as exc:  # str.index() found no place for an edit
            raise Unrecognised("%s: %s" % (where, exc)) from None
    for old, new in edits:
        if source.count(old) != 1:
            raise Unrecognised("%s: %r occurs %d times, not once" % (where, old, source.count(old)))
        source = source.replace(old, new)
    code = function.__code__
    if code.co_freevars not in ((), ("__class__",)):
        raise Unrecognised("%s is a closure over %s" % (where, ", ".join(code.co_freevars)))
    flags = 0
    for feature in __future__.all_feature_names:
        flag = getattr(__future__, feature).compiler_flag
        if code.co_flags & flag:
            flags |= flag
    namespace: dict = {}
    if not code.co_freevars:
        # Compiled as it stands, after blank lines that put it on its own
        # line numbers: cheaper than through ast, which counts where the
        # target is imported by `import torch` itself.
        exec(compile("\n" * (code.co_firstlineno - 1) + source, code.co_filename, "exec",
                     flags=flags, dont_inherit=True), function.__globals__, namespace)
        new = namespace[function.__name__]
    else:
        # Compiled inside a factory taking __class__, so that zero-argument
        # super() in a method finds its class exactly as in the original.
        import ast

        tree = ast.parse("def _factory(__class__):\n" + textwrap.indent(source, "    ")
                         + "\n    return %s\n" % function.__name__)
        ast.increment_lineno(tree, code.co_firstlineno - 2)
        exec(compile(tree, code.co_filename, "exec", flags=flags, dont_inherit=True),
             function.__globals__, namespace)
        new = namespace["_factory"](function.__closure__[0].cell_contents)
    new.__qualname__ = function.__qualname__
    new.__module__ = function.__module__
    new.__defaults__ = function.__defaults__
    new.__kwdefaults__ = function.__kwdefaults__
    new.__doc__ = function.__doc__
    new.__dict__.update(function.__dict__)
    setattr(new, EDITED_SOURCE, source)
    return new


def rewritten_on_first_call(owner: Any, name: str,
                            edits: "list[tuple[str, str]] | dict[str, list[tuple[str, str]]]",
                            verified: Fingerprints,
                            fixed: Fingerprints, when: "Callable[..., bool] | None" = None,
                            partner: "Callable[[], object] | None" = None,
                            through: "Callable[[Callable, tuple, dict], Any] | None" = None,
                            replacement: "Callable[[], Callable] | None" = None
                            ) -> Revert:
    """Put a stand-in in place of `owner.name` that checks it and makes
    rewritten()'s copy of it at its first call; return the undo.

    For a function that `import torch` itself loads but does not call. Both
    halves of a patch are dear there: the copy of a method with
    zero-argument super() is compiled through ast (11 M instructions for
    proxy_tensor's 68-line _ModuleStackTracer.trace, callgrind,
    2026-12-04), and reading a function's source to check its fingerprint
    ~0.8 M (the five functions `import torch` loads on 2.13, 2026-12-05).
    So until the first call a small marked function stands in its place;
    that call checks the fingerprint (and `partner()`, the check of
    another function this patch goes with, when given), compiles the copy,
    puts it in the stand-in's place and runs it. check_put_off(undo) runs
    the check at once, which torch-backports' status does
    (_activate.finish_checks), so that a report never shows a check still
    to come. Should the check refuse the code (Unrecognised, CarriesFix),
    or the rewrite fail (the file changed under a running process), the
    original is put back and runs, the reason is logged at debug level, and
    check_put_off raises it.

    `edits` may be a dict from fingerprints to edits, for a function whose
    verified releases differ where the fix goes. With `when`, a predicate of the
    call's arguments that is true exactly for the calls where the copy
    behaves differently from the original, the stand-in stays and sends only
    those calls to the copy (checked and compiled at the first of them),
    the others to the original: for a function that `import torch` itself
    calls, with arguments the fix does not concern.

    With `replacement`, the first call installs `replacement()` (a function
    written whole, not edited from the original's source) instead of a copy
    made with `edits`, once the check passes.

    With `through`, the stand-in makes the calls as `through(function, args,
    kwargs)`, from its own frame, so that the stand-in's caller is two frames
    up: for a function that reads its caller's frame, which the stand-in
    would otherwise be (see fx-wrap-frame-cycle).
    """
    original, where = own_attribute(owner, name)
    _refuse_ours(original, where)

    failure: "list[Exception]" = []  # why the original was put back, once it was
    passed: "list[bool]" = []  # [True] once the check has passed
    made: "list[Callable]" = []  # the copy (or the original, put back), once made

    def give_up(exc: Exception) -> None:
        failure.append(exc)
        revert()
        import logging

        logging.getLogger("torch_backports").debug(
            "%s left as shipped: %s: %s", where, type(exc).__name__, exc)

    def checked() -> None:
        # Two threads may race here: both check, with the same result.
        if not failure and not passed:
            try:
                if partner is not None:
                    partner()
                check(original, where, verified, fixed)
                passed.append(True)
            except Exception as exc:
                give_up(exc)
        if failure:
            raise failure[0]

    def copy() -> Callable:
        if not made:
            try:
                checked()
                new = replacement() if replacement is not None else rewritten(
                    original, _edits_for(original, edits, {**verified, **fixed}), verified, fixed)
                setattr(new, _MARK, True)
            except Exception as exc:
                if not failure:
                    give_up(exc)
                new = original
            made.append(new)
        return made[0]

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        if when is not None:
            # a method's self is args[0], as for any function
            new = copy() if when(*args, **kwargs) else original
        else:
            new = copy()
            if vars(owner).get(name) is stand_in:
                setattr(owner, name, new)
        if through is not None:
            return through(new, args, kwargs)
        return new(*args, **kwargs)

    for attribute in ("__module__", "__qualname__", "__doc__", "__name__"):
        setattr(stand_in, attribute, getattr(original, attribute))
    stand_in.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(stand_in, _MARK, True)
    setattr(stand_in, MAKE_COPY, copy)
    if through is not None:
        setattr(stand_in, CALLED_THROUGH, through)
    setattr(owner, name, stand_in)
    _record(owner, name, original, stand_in, STAND_IN)

    def revert() -> None:
        current = vars(owner).get(name)
        if current is stand_in or _made_from(current, original):
            setattr(owner, name, original)

    revert.check = checked  # type: ignore[attr-defined]
    return revert


def check_put_off(revert: Revert) -> None:
    """Run the check that the patch undone by `revert` put off until its
    first call (rewritten_on_first_call), if it has one and it has not run;
    where the check refused the code (Unrecognised, CarriesFix) or the
    rewrite failed, raise why, with the original put back."""
    checked = getattr(revert, "check", None)
    if checked is not None:
        checked()


def _edits_for(function: Callable, edits: "list[tuple[str, str]] | dict[str, list[tuple[str, str]]]",
               known: Fingerprints) -> "list[tuple[str, str]]":
    """`edits`, or where they are by fingerprint, those for `function`'s
    (found among `known` as its check found it)."""
    if isinstance(edits, dict):
        from . import _fingerprint

        return list(edits.get(_fingerprint.of_function(function, known), ()))
    return edits


def _made_from(function: Any, original: Callable) -> bool:
    """Whether `function` is rewritten()'s copy of `original`: marked, and
    compiled from the same file and line."""
    code = getattr(function, "__code__", None)
    return (getattr(function, _MARK, False) and code is not None
            and code.co_filename == original.__code__.co_filename
            and code.co_firstlineno == original.__code__.co_firstlineno)


_MISSING = object()


def snapshot(module: Any, containers: bool = False) -> Revert:
    """A restore point for `module` and the classes it defines.

    Taken before a backport's apply(); calling it puts back every attribute
    of those namespaces that apply() set, replaced or deleted, so a patch
    that raises halfway leaves its target exactly as shipped.
    """
    name = getattr(module, "__name__", None)
    owners = [module] + [value for value in vars(module).values()
                         if isinstance(value, type) and value.__module__ == name]
    saved = [(owner, dict(vars(owner))) for owner in owners]
    # With `containers` (the audit, see set_by_hand): a shallow copy of each
    # dict and list the module holds, such as a table of handlers a patch
    # may add to in place, and of the attributes of each instance of one of
    # its classes that it holds, such as an operator a patch marks.
    held = []
    for key, value in (saved[0][1].items() if containers else ()):
        try:
            if type(value) in (dict, list):
                held.append(("%s[%%s]" % key, value, type(value)(value)))
            elif type(value).__module__ == name and isinstance(
                    getattr(value, "__dict__", None), dict):
                held.append(("%s.%%s" % key, vars(value), dict(vars(value))))
        except Exception:  # an odd object: the audit must not fail the patch
            continue

    def restore() -> None:
        for owner, before in saved:
            now = vars(owner)
            for key in [key for key in now if key not in before]:
                delattr(owner, key)
            for key, value in before.items():
                if now.get(key, _MISSING) is not value:
                    setattr(owner, key, value)

    restore.saved = saved  # type: ignore[attr-defined]  # for set_by_hand
    restore.held = held  # type: ignore[attr-defined]
    return restore


def set_by_hand(restore: Revert, recorded: "list[Change]") -> "list[Change]":
    """The attributes of the namespaces snapshot() saved in `restore` that
    were set, replaced or deleted since, other than those in `recorded`
    (and modules, which an import inside a patch adds to a package): what a
    backport patched by hand, without the helpers above. A deleted one has
    `None` as the value set. For the audit of `torch-backports diff` and
    status only, not for every `import torch`: it compares every attribute
    of the target module and its classes."""
    import types

    seen = {(id(owner), name) for owner, name, _, _, _ in recorded}
    found = []
    for owner, before in getattr(restore, "saved", ()):
        now = vars(owner)
        for key in list(before) + [key for key in now if key not in before]:
            old, new = before.get(key, _MISSING), now.get(key, _MISSING)
            if old is new or (id(owner), key) in seen or isinstance(new, types.ModuleType):
                continue
            found.append((owner, key, None if old is _MISSING else old,
                          None if new is _MISSING else new, BY_HAND))
    saved = getattr(restore, "saved", None)
    for form, container, before in getattr(restore, "held", ()):
        if isinstance(container, list):
            if container != before:
                found.append((saved[0][0], form % "", before, list(container), BY_HAND))
            continue
        for item in list(before) + [item for item in container if item not in before]:
            old, new = before.get(item, _MISSING), container.get(item, _MISSING)
            if old is not new:
                label = item if form.endswith(".%s") else (
                    getattr(item, "__qualname__", None) or repr(item))
                found.append((saved[0][0], form % label, None if old is _MISSING else old,
                              None if new is _MISSING else new, BY_HAND))
    return found
