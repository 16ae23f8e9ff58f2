"""torch_backports.require(): a library demands that named fixes are in effect.

vLLM, SGLang, NeMo and others carry private copies of torch fixes. They can
delete a copy once they can ask torch-backports, at their own import, whether
the fix is in effect in this process, and get a yes or an exception that says
why not. `require` is that question; `BackportNotInEffect` is the answer no.

A fix is in effect when this torch ships it (its release is at or past the
backport's first fixed release, or the fingerprint check found the fixed code,
a vendor cherry-pick: state "not needed"), or when the backport is applied.
Every other state is a no, in `status`'s words.

To know, require imports torch and each named backport's target module, as
the library's own code would soon do: that import runs the post-import hook,
which applies the patch or records why not. So a library pays for importing
what its fixes patch (inductor, for an inductor fix), and no more.
"""

from __future__ import annotations

import importlib
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from . import _records, _registry, _versions
from ._backport import Release

# States of a record that mean the fix is in effect. "not covered" is not
# one: the release predates the releases the backport was verified on, and
# several catalogue entries note that older releases have the same code but
# were not proven (cpp-vec-indirect-assert-mask, dtensor-alias-strategy), so
# torch-backports cannot vouch for them there.
IN_EFFECT = (_records.APPLIED, _records.NOT_NEEDED)

# Two states of require's own, besides the records' states.
UNKNOWN = "unknown"
"""The name is no backport of this torch-backports (a typo, or a fix newer
than the installed torch-backports)."""
NOT_INSTALLED = "not installed"
"""torch-backports' startup hook did not run in this process, so nothing of
it is patched here."""

_NOT_INSTALLED_REASON = (
    "torch-backports' startup hook did not run in this process (no torch_backports.pth was "
    "processed: `python -S`, an embedded interpreter, or the package only on sys.path) and "
    "torch was imported before require() could arm it; call torch_backports.install() before "
    "importing torch")


class BackportNotInEffect(RuntimeError):
    """Raised by torch_backports.require() for fixes that are not in effect.

    `missing` maps each such name, as it was asked for (its registry
    spelling when it is one), to (state, reason): a state of `status`
    (pending, not covered, disabled, off, unrecognised, failed) or one of
    require's own, "unknown" (no such backport here) and "not installed"
    (the startup hook did not run in this process), and the reason in
    `status`'s words. The message lists them all, one line each.
    """

    # Its public name, in tracebacks and for pickle (the package's
    # __getattr__ gives it).
    __module__ = "torch_backports"

    def __init__(self, missing: Mapping[str, Tuple[str, str]], message: Optional[str] = None):
        self.missing: Dict[str, Tuple[str, str]] = dict(missing)
        super().__init__(message if message is not None else _message(self.missing))

    def __reduce__(self) -> "tuple":
        # Picklable as raised, with its data, for a library that sends it
        # from a worker process to its parent.
        return (type(self), (self.missing, self.args[0] if self.args else None))


def _message(missing: Mapping[str, Tuple[str, str]]) -> str:
    package = sys.modules[__package__]
    torch = getattr(sys.modules.get("torch"), "__version__", None)
    lines = ["%d required torch fix%s not in effect in this process (torch %s, torch-backports %s):"
             % (len(missing), " is" if len(missing) == 1 else "es are",
                torch if isinstance(torch, str) else "not imported", package.__version__)]
    lines += ["  %s: %s: %s" % (name, state, reason) for name, (state, reason) in missing.items()]
    return "\n".join(lines)


def _resolve(names: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The registry names among `names`, in order and once each, and the
    names that match no backport, as given."""
    known: List[str] = []
    unknown: List[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError("require() takes backport names as str, not %s" % type(name).__name__)
        found = _registry.canonical(name)
        if found is None:
            if name not in unknown:
                unknown.append(name)
        elif found not in known:
            known.append(found)
    return known, unknown


def _unknown_reason(name: str) -> str:
    hint = _registry.did_you_mean(name)
    return ("torch-backports %s has no backport of that name (a newer torch-backports may have "
            "it; `torch-backports status` lists these)%s"
            % (sys.modules[__package__].__version__, hint))


def require(*names: str) -> None:
    """Return if every named fix is in effect in this process; else raise
    BackportNotInEffect naming each one that is not, and why.

    See torch_backports.require, whose docstring is the documentation.
    """
    if not names:
        raise TypeError("require() needs at least one backport name")
    known, unknown = _resolve(names)
    package = sys.modules[__package__]
    failures: Dict[str, str] = {}  # name -> why importing its target failed
    if known:
        if package._startup_state == "idle" and "torch" not in sys.modules:
            # Arm as the .pth would have: torch is not imported yet, so
            # every patch is made as its target imports, exactly as in a
            # process that processed torch_backports.pth. Once torch is
            # imported, arming late would patch code already in use, which
            # the program's owner did not ask for; that case reads "not
            # installed" instead.
            package.install()
        # Importing the targets runs their hooks; where torch-backports is
        # off ("disabled") or did not arm ("idle", "failed"), nothing would
        # run, and an inductor fix would import inductor for nothing.
        if package._startup_state in ("watching", "armed"):
            failures = _import_targets(known)
    version = getattr(sys.modules.get("torch"), "__version__", None)
    try:
        release: Optional[Release] = _versions.release_of(version)
    except _versions.UnknownRelease:
        release = None  # judged by the records alone, which say why
    missing: Dict[str, Tuple[str, str]] = {}
    for name in names:  # in the order asked for
        if name in unknown:
            missing[name] = (UNKNOWN, _unknown_reason(name))
            continue
        name = _registry.canonical(name)
        if name in missing:
            continue
        state, reason = _state(name, failures.get(name), package, version, release)
        if state not in IN_EFFECT:
            missing[name] = (state, reason)
    if missing:
        raise BackportNotInEffect(missing)


def _import_targets(known: Sequence[str]) -> Dict[str, str]:
    """Import torch and each backport's target, which runs its hook;
    return why an import failed, by backport name."""
    failures: Dict[str, str] = {}
    version: Optional[str] = None
    try:
        import torch
        version = torch.__version__
        release: Optional[Release] = _versions.release_of(version)
    except Exception:  # judged by each target's hook, as before
        release = None
    for name in known:
        target = _registry.target(name)
        if target in sys.modules:
            continue
        if _records.ships_fix(name, release, version):
            # This torch ships the fix: the answer needs no hook, and an
            # inductor target would cost a second for nothing.
            continue
        try:
            importlib.import_module(target)
        except Exception as exc:  # torch's own error: reported, not raised
            failures[name] = "importing its target %s raised %s: %s" % (
                target, type(exc).__name__, exc)
    return failures


def _state(name: str, failure: Optional[str], package: object, version: Optional[str],
           release: Optional[Release]) -> Tuple[str, str]:
    """(state, reason) of backport `name` in this process, for require, on
    torch `version` (its `release`, if it reads as one)."""
    first_fixed = _registry.releases(name)[1]
    if _records.ships_fix(name, release, version):
        # The fix is torch's own here, whatever torch-backports did: even
        # disabled, or not installed, the program has it.
        return (_records.NOT_NEEDED, "torch %s ships the fix (since %d.%d.%d)"
                % ((version,) + first_fixed))
    activate = sys.modules.get(__package__ + "._activate")
    if activate is not None:
        activate.settle(name)  # runs a fingerprint check put off to a first call
    state, reason, _ = _records.get(name)
    if state != _records.PENDING:
        return state, reason
    startup = getattr(package, "_startup_state")
    if startup == "idle":
        return NOT_INSTALLED, _NOT_INSTALLED_REASON
    if startup == "failed":
        return (_records.FAILED, "torch-backports failed to arm when torch was imported (%s); "
                "torch left untouched" % getattr(package, "_startup_error"))
    if failure is not None:
        return state, failure
    if startup == "watching":
        return (NOT_INSTALLED, "torch-backports is still waiting for torch to import in this "
                "process (torch_backports.install() found another copy's watcher, or torch is "
                "still being imported)")
    return state, reason
