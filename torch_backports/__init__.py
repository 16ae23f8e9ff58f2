"""Fixes from newer PyTorch releases, applied to the torch that is installed.

torch_backports.pth (and torch_backports.start on Python 3.15+) calls
install() at interpreter start. Nothing is patched then: install() only
puts this module on sys.meta_path as a watcher. When torch's package
executes, the watcher arms post-import hooks (_hooks), one per backport's
target module, and each patch is made when its target is imported.
require() lets a library demand that named fixes are in effect
(docs/require.md).
"""

# Cost contract. This module is imported at the start of every interpreter
# in an environment where torch-backports is installed, including the ones
# that never touch torch: pip, test runners, one-line scripts. It therefore
# imports nothing at module level, and install() imports only sys and
# _thread, which the interpreter has loaded before site runs. logging and
# our other modules cost 50-70 ms together (measured against 8.5 ms for
# `python -c pass`), so they are imported only when torch is imported,
# which itself costs ~1.5 s and loads logging anyway.
# Everything else lives in other modules, because each line here is paid
# by every process (benchmarks/run.py counts this module's instructions).
#
# Safety contract. Nothing raised here may reach site or the importer: an
# exception in install() or in the watcher is kept in _startup_error, shown
# by `torch-backports status`, and torch is left as it is.

__version__ = "2.0.0.dev0"

__all__ = ["BackportNotInEffect", "__version__", "install", "require", "status"]

# Arming waits until torch's package actually executes. `find_spec("torch")`
# alone proves nothing: transformers, datasets, accelerate and many others
# call importlib.util.find_spec("torch") at import to see whether torch is
# available, and arming there cost them wrapt, logging and nine of our
# modules (~60 ms) for nothing. A submodule is only ever looked up once its
# package is in sys.modules (importlib imports the parent first, even for
# find_spec("torch.x")), so the first "torch." lookup is torch's __init__
# importing its own submodules: the earliest moment torch is certainly being
# imported, and still before any backport's target (all lie under
# "torch.", which a unit test checks). The check is one slice and one
# comparison, which is all that every other import pays for us.
_TRIGGER = "torch."

# TORCH_BACKPORTS_DISABLE's words for "every backport off", read here so
# that a process with everything off loads nothing more when torch imports.
# _config (the full parser) uses the same tuple.
_ENV_DISABLE = "TORCH_BACKPORTS_DISABLE"
_ALL_WORDS = ("1", "true", "yes", "y", "on", "all")

# "idle": install() not called; "watching": waiting for torch to import;
# "armed": the post-import hooks are registered; "disabled": torch was imported with
# TORCH_BACKPORTS_DISABLE turning everything off, so nothing was armed;
# "failed": see _startup_error.
_startup_state = "idle"
_startup_error = None  # type: str | None, as text
_lock = None
_watcher = None  # this module, once install() has put it on sys.meta_path

# What we catch from our own code and from modules imported on our behalf
# (wrapt, by a backport that wraps): SystemExit too, since a broken or shadowed module can
# raise it on import, and it must not end the host's import of torch. A
# KeyboardInterrupt is the user's, so it propagates.
_CONTAINED = (Exception, SystemExit)

# The watcher on sys.meta_path is this module itself: the import system
# asks any object on it for find_spec(), and a module is an object. A
# watcher class costs more at every start than it is worth (callgrind,
# Python 3.11, `python -c pass`, 2026-12-03: 39.02 M instructions with a
# class, 38.95 M with this module, 38.01 M without torch-backports;
# docs/performance.md has the table).
#
# The marker lets install() in any copy of this package see that a watcher
# is in place already, so a .pth processed twice still arms once.
torch_backports_watcher = True


def find_spec(fullname: str, path: object = None, target: object = None) -> None:
    """Meta path finder hook: find nothing, but arm once torch executes.

    Returning None sends the import system on to the real finders.
    """
    if fullname[:6] == _TRIGGER:
        _triggered()
    return None


def _triggered() -> None:
    global _startup_state, _startup_error
    try:
        import sys

        with _lock:
            if _watcher not in sys.meta_path:
                return  # another thread armed already
            # Removed before arming, so that the imports arming makes
            # (logging, our modules) do not come back through this watcher.
            sys.meta_path.remove(_watcher)
        _arm()
    except _CONTAINED as exc:  # never let our failure fail torch's import
        _startup_state = "failed"
        _startup_error = "%s: %s" % (type(exc).__name__, exc)


def _arm() -> None:
    global _startup_state
    import os  # loaded by the interpreter before site runs

    # Read once, as torch imports: with everything off, nothing of wrapt or
    # of our other modules is loaded, and the process keeps stock torch for
    # its whole life even if it changes the variable later. A list of names
    # is read by _activate when each target is imported.
    if os.environ.get(_ENV_DISABLE, "").strip().lower() in _ALL_WORDS:
        _startup_state = "disabled"
        return
    from . import _activate

    _activate.arm()
    _startup_state = "armed"


def install() -> None:
    """Arm torch-backports in this interpreter; safe to call any number of times.

    The .pth file calls this at start-up. Call it yourself where site does not
    process site-packages: under `python -S`, in embedded interpreters, or for
    a `pip install --target` directory added to sys.path. Patches whose
    target is already imported are applied at once; the others the moment
    their target is imported. This never raises.
    """
    global _startup_state, _startup_error, _lock, _watcher
    try:
        import sys
        import _thread

        if _lock is None:
            _lock = _thread.allocate_lock()
        with _lock:
            if _startup_state in ("watching", "armed", "disabled"):
                return
            for finder in sys.meta_path:
                if getattr(finder, "torch_backports_watcher", False):
                    _startup_state = "watching"  # armed by another copy of us
                    return
            if "torch" not in sys.modules:
                _watcher = sys.modules[__name__]
                sys.meta_path.insert(0, _watcher)
                _startup_state = "watching"
                return
        _arm()  # torch is imported already
    except _CONTAINED as exc:
        _startup_state = "failed"
        _startup_error = "%s: %s" % (type(exc).__name__, exc)


def status() -> "list[dict]":
    """Return one record per backport for this interpreter, as plain dicts.

    Each has the keys name, summary, upstream, affects, target, torch, state
    and reason. Unlike the CLI, this does not start a new process. The
    fingerprint checks a patch puts off until its first call are run now.
    """
    import sys

    from . import _records

    if __name__ + "._activate" in sys.modules:
        sys.modules[__name__ + "._activate"].finish_checks()
    return _records.snapshot()


def require(*names: str) -> None:
    """Return if each named fix is in effect in this process; else raise
    BackportNotInEffect, which names each fix that is not, and why.

    For libraries that carry a private copy of a torch fix: call it at
    import, and drop the copy where it returns. A fix is in effect when
    this torch ships it (a release at or past the backport's first fixed
    one, or a build whose fingerprint is the fixed code: status's "not
    needed"), or when the backport is applied. Names are the backports'
    (`torch-backports status` lists them; case and '_'/'-' do not matter).

    It imports torch and each named backport's target module, if they are
    not imported yet, so that the target's post-import hook applies the
    patch or records why not: asking for an inductor fix imports inductor,
    asking for a torch.library fix does not. If the startup hook did not
    run (`python -S`, the package only on sys.path) and torch is not
    imported yet, it arms torch-backports first, as the .pth would have;
    if torch is imported already, those fixes read "not installed".

    BackportNotInEffect (a RuntimeError) is raised for every other state,
    in status's words: disabled (by TORCH_BACKPORTS_DISABLE), unrecognised
    (a vendor build changed the code), not covered (torch older than the
    releases the backport claims), failed, pending, not installed, and
    unknown (no backport of that name here, with near names). Its
    `missing` maps each name to (state, reason). Errors importing torch
    or a target are reported there too, never raised as they are. No
    names, or a name that is not a str, is a TypeError: a caller's bug.

    Cost, once in effect: 4.2 us a call for one applied fix, 3.0 us for
    one torch ships (timeit, torch 2.13.0, Python 3.11, 2026-12-06:
    docs/require.md), cheap enough for every import of a library.
    """
    from . import _require

    _require.require(*names)


def __getattr__(name: str) -> object:
    # BackportNotInEffect lives in _require, loaded when it is first asked
    # for (`except torch_backports.BackportNotInEffect` asks only while an
    # exception propagates): a class statement here would be paid by every
    # interpreter start. PEP 562.
    if name == "BackportNotInEffect":
        from ._require import BackportNotInEffect

        return BackportNotInEffect
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
