"""Which real-torch run CI makes where: shared by the reproducer tests and
tools/readme.py's compatibility table, so that the table says what CI runs.

CI installs the releases in tox.ini's default env list. On each release a
backport claims there, CI runs its reproducer with torch-backports (the
"fixed" run). The stock run, which shows the upstream symptom, is made on
one claimed CI release per backport (`stock_release`): 2.13.0 where it is
claimed (vLLM's pin, and a fast local wheel), otherwise the newest claimed
one. Every claimed release shares a verified fingerprint with it, so the
stock code is the same; `tox -e matrix` and TORCH_BACKPORTS_STOCK_RUNS=all
make the stock run on every release. A fix of GPU code is proven by its
CPU check, which CI runs stock and fixed on every claimed CI release (a
few seconds each; rule 3 of docs/gpu.md rests on them). See docs/ci.md.
"""

import configparser
import os
import re
from pathlib import Path
from typing import Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
PREFERRED = (2, 13, 0)
# The newest torch release CI installs (tox.ini's torch2150 env).
NEWEST = (2, 15, 0)

Release = Tuple[int, int, int]


def _release(version: str) -> Release:
    return tuple(int(part) for part in version.split(".")[:3])  # type: ignore[return-value]


def ci_releases() -> Set[Release]:
    """The torch releases tox's default env list installs."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    envs = re.findall(r"\b(notorch|torch\d+)\b", tox["tox"]["env_list"])
    deps = tox["testenv:{%s}" % ",".join(envs)]["deps"]
    return {_release(v) for v in re.findall(r"torch==([\d.]+)", deps)}


def stock_release(backport, ci: Optional[Set[Release]] = None) -> Optional[Release]:
    """The CI release on which `backport`'s stock run is made, or None if it
    claims none of CI's releases."""
    claimed = sorted(r for r in (ci if ci is not None else ci_releases())
                     if backport.needed_by(r))
    if not claimed:
        return None
    return PREFERRED if PREFERRED in claimed else claimed[-1]


def stock_in_ci(backport, release: Release, cpu_check: bool = False,
                ci: Optional[Set[Release]] = None) -> bool:
    """Whether CI's env of `release` makes `backport`'s stock run (of its
    CPU check, with `cpu_check`): on every claimed CI release for a CPU
    check, on stock_release() for a reproducer."""
    if cpu_check:
        return backport.needed_by(release) and release in (ci if ci is not None
                                                           else ci_releases())
    return stock_release(backport, ci) == release


def everything() -> bool:
    """Whether this run makes every run, not CI's selection: under
    TORCH_BACKPORTS_STOCK_RUNS=all and in `tox -e matrix`."""
    return bool(os.environ.get("TORCH_BACKPORTS_STOCK_RUNS") == "all"
                or os.environ.get("TORCH_BACKPORTS_RESULTS_DIR"))


def skip_outside_full_runs(what: str) -> None:
    """Skip the calling test, which CI leaves to the full runs, unless this
    is one (everything()); `what` says what CI runs instead."""
    if not everything():
        import pytest  # only tests call this; tools/ import this module too

        pytest.skip("%s; TORCH_BACKPORTS_STOCK_RUNS=all or tox -e matrix runs this case" % what)


def together() -> bool:
    """Whether the fixed runs of the reproducers are made in shared
    interpreters (tests/integration/together.py): yes, unless
    TORCH_BACKPORTS_TOGETHER=0 asks for one interpreter a run."""
    return os.environ.get("TORCH_BACKPORTS_TOGETHER", "1") != "0"


def stock_run_here(backport, release: Release, cpu_check: bool = False) -> bool:
    """Whether the env of `release` makes `backport`'s stock run."""
    return everything() or stock_in_ci(backport, release, cpu_check)


def fixed_run_here(backport, release: Release) -> bool:
    """Whether the env of `release` runs `backport`'s reproducer with
    torch-backports: every claimed release, and past the fix the first fixed
    release and the newest (to show torch left as shipped; a run on each
    release in between proves nothing more)."""
    if backport.needed_by(release):
        return True
    return release >= backport.first_fixed and (
        release[:2] == backport.first_fixed[:2] or release[:2] == NEWEST[:2])
