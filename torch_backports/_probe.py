"""What torch-backports does in a new process of this environment.

The CLI itself never imports torch: it starts a child interpreter with the
same executable and environment, which imports every backport's target
module as a user program would and reports the records. The child's own output (torch's
warnings, for instance) is captured and never shown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

_MARKER = "torch-backports-probe:"

# Runs in the child, with the target modules as argv. It imports them first,
# so that the startup hook (if site ran it) is what applies the patches,
# exactly as in a user's program; torch_backports' own modules are imported
# only afterwards, to read out.
_CHILD = """
import importlib, json, sys
errors = []
for target in sys.argv[1:]:
    try:
        importlib.import_module(target)
    except BaseException as exc:
        errors.append("%s: %s: %s" % (target, type(exc).__name__, exc))
error = "; ".join(errors) or None
import torch_backports, torch_backports._activate as a, torch_backports._records as r
for name in torch_backports._registry.names():
    a.settle(name)
try:
    import torch_backports._diff as d
    changes, changes_error = d.in_this_process(), None
except Exception as exc:
    changes, changes_error = {}, "%s: %s" % (type(exc).__name__, exc)
try:
    import torch_backports._stale as s
    stale = s.find(a._changes)
except Exception as exc:
    stale = {"": ["the audit failed: %s: %s" % (type(exc).__name__, exc)]}
print(MARKER + json.dumps({
    "changes": changes,
    "stale": stale,
    "changes_error": changes_error,
    "import_error": error,
    "torch_version": a.running_torch_version(),
    "startup_state": torch_backports._startup_state,
    "startup_error": torch_backports._startup_error,
    "records": torch_backports.status(),
    "notes": r.notes(),
}))
""".replace("MARKER", repr(_MARKER))


@dataclass
class ProbeResult:
    """The child's report, or why there is none."""

    ok: bool
    import_error: Optional[str] = None
    torch_version: Optional[str] = None
    startup_state: Optional[str] = None
    startup_error: Optional[str] = None
    records: List[dict] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    failure: Optional[str] = None
    # What each applied backport changed (torch_backports._diff.describe),
    # by name; why that could not be read, if so.
    changes: Dict[str, List[dict]] = field(default_factory=dict)
    changes_error: Optional[str] = None
    # Per applied backport, the modules that still hold what it replaced
    # (torch_backports._stale), as "module.attribute".
    stale: Dict[str, List[str]] = field(default_factory=dict)


def probe_new_process(targets: List[str], timeout: float = 300.0) -> ProbeResult:
    """Start `python -c ...` in this environment, importing `targets`, and
    collect its records."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, *targets],
            stdin=subprocess.DEVNULL,
            # so that the child also finds what a patch set by hand
            # (torch_backports._activate.ENV_AUDIT)
            env=dict(os.environ, TORCH_BACKPORTS_AUDIT="1"),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return ProbeResult(ok=False, failure="could not start a new process: %s" % exc)
    for line in done.stdout.splitlines():
        if line.startswith(_MARKER):
            data = json.loads(line[len(_MARKER):])
            return ProbeResult(ok=True, **data)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return ProbeResult(
        ok=False, failure="the new process exited with %s: %s" % (done.returncode, tail)
    )
