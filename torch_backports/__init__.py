"""Fixes from newer PyTorch releases, applied to the torch that is installed.

torch_backports.pth (and torch_backports.start on Python 3.15+) calls
install() at interpreter start. Nothing is patched then: install() only
leaves a watcher on sys.meta_path, and the patches are made by wrapt's
post-import hooks once torch's inductor is imported.
"""

# Cost contract. This module is imported at the start of every interpreter
# in an environment where torch-backports is installed, including the ones
# that never touch torch: pip, test runners, one-line scripts. It therefore
# imports nothing at module level, and install() imports only sys and
# _thread, which the interpreter has loaded before site runs. wrapt,
# packaging, logging and the backport modules cost 50-70 ms together
# (measured against 8.5 ms for `python -c pass`), so they are imported
# only when torch._inductor starts to import, which itself costs ~0.7 s.
#
# Safety contract. Nothing raised here may reach site or the importer: an
# exception in install() or in the watcher is kept in _startup_error, shown
# by `torch-backports status`, and torch is left as it is.

__version__ = "1.0.0"

__all__ = ["__version__", "install", "status"]

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only; typing costs an import at startup
    from typing import Any, List, Optional, Sequence

# The packages whose first import arms the wrapt hooks. Each backport's
# target module must lie inside one of these (a unit test checks the
# registry against it), so that wrapt's hook is in place before the target
# is imported. torch._inductor is not imported by `import torch`, so a
# program that only runs eager torch never loads wrapt.
_TRIGGERS = ("torch._inductor",)

# "idle": install() not called; "watching": waiting for a trigger import;
# "armed": wrapt's hooks are registered; "failed": see _startup_error.
_startup_state = "idle"
_startup_error = None  # type: Optional[str]
_lock = None

# What we catch from our own code and from modules imported on our behalf
# (wrapt, packaging): SystemExit too, since a broken or shadowed module can
# raise it on import, and it must not end the host's import of torch. A
# KeyboardInterrupt is the user's, so it propagates.
_CONTAINED = (Exception, SystemExit)


class _TriggerWatcher:
    """A meta path finder that finds nothing and notices trigger imports.

    It returns None for every name, so the import system goes on to the
    real finders; for a trigger name it first arms the hooks. The check is
    one tuple lookup, which is all that every other import in the process
    pays for torch-backports.
    """

    # Marks the watcher for install() in any copy of this package, so two
    # copies on sys.path or a .pth processed twice still arm once.
    torch_backports_watcher = True

    def find_spec(
        self, fullname: str, path: "Optional[Sequence[str]]" = None, target: "Any" = None
    ) -> None:
        if fullname in _TRIGGERS:
            _arm_from_watcher(self)
        return None

    def invalidate_caches(self) -> None:
        """Nothing is cached; present so importlib can call it on any finder."""


def _arm_from_watcher(watcher: _TriggerWatcher) -> None:
    import sys

    global _startup_state
    try:
        with _lock:
            if watcher not in sys.meta_path:
                return  # another thread armed already
            # Removed before arming, so that the imports arming makes
            # (wrapt, logging) do not come back through this watcher.
            sys.meta_path.remove(watcher)
        _arm()
    except _CONTAINED as exc:  # never let our failure fail torch's import
        _startup_state = "failed"
        _set_error(exc)


def _arm() -> None:
    global _startup_state
    from . import _activate

    _activate.arm()
    _startup_state = "armed"


def _set_error(exc: BaseException) -> None:
    global _startup_error
    _startup_error = "%s: %s" % (type(exc).__name__, exc)


def install() -> None:
    """Arm torch-backports in this interpreter; safe to call any number of times.

    The .pth file calls this at start-up. Call it yourself where site does not
    process site-packages: under `python -S`, in embedded interpreters, or for
    a `pip install --target` directory added to sys.path. If torch's inductor
    is already imported, the patches are applied at once; otherwise they are
    applied the moment it is imported. This never raises.
    """
    global _startup_state, _lock
    try:
        import sys
        import _thread

        if _lock is None:
            _lock = _thread.allocate_lock()
        with _lock:
            if _startup_state in ("watching", "armed"):
                return
            if any(getattr(f, "torch_backports_watcher", False) for f in sys.meta_path):
                _startup_state = "watching"  # armed by another copy of us
                return
            inductor_loaded = any(name in sys.modules for name in _TRIGGERS)
            if not inductor_loaded:
                sys.meta_path.insert(0, _TriggerWatcher())
                _startup_state = "watching"
        if inductor_loaded:
            _arm()
    except _CONTAINED as exc:
        _startup_state = "failed"
        _set_error(exc)


def status() -> "List[dict]":
    """Return one record per backport for this interpreter, as plain dicts.

    Each has the keys name, summary, upstream, affects, torch, state and
    reason. Unlike the CLI, this does not start a new process.
    """
    from . import _records

    return [record.as_dict() for record in _records.snapshot()]
