"""`torch-backports verify`: each backport's reproducer, stock and fixed, on this torch.

Every reproducer runs in a new interpreter of this environment, twice: once
with TORCH_BACKPORTS_DISABLE naming its backport (stock torch) and once
without (torch-backports as installed). The program never imports
torch_backports; the .pth does whatever is done, as for a user's program.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import _config, _records, _registry, _versions
from ._backport import Backport, format_release

SKIP_EXIT = 77
"""A reproducer exits with this after printing "skipped: <what it needs>"."""

# verify's exit statuses: a run that checked nothing (every reproducer
# skipped, e.g. for want of a C++ compiler) must not read as a pass in CI.
PASSED, FAILED, NOTHING_CHECKED = 0, 1, 3

# Table cells are cut to this many characters (--json keeps them whole): a
# skip reason can carry a compiler's whole error message.
CELL = 60

OK, CRASHED, SKIPPED, TIMED_OUT = "ok", "crashed", "skipped", "timed out"


class Run(NamedTuple):
    """One run of a reproducer."""

    outcome: str
    detail: str
    seconds: float
    symptom: bool  # the backport's symptom is in the output
    # The line that tells what happened, whole (to PRINTED characters): the
    # exception with its message, or the last line the program printed.
    printed: str = ""

    def describe(self) -> str:
        return self.outcome + (": " + self.detail if self.detail else "")


class Verdict(NamedTuple):
    name: str
    stock: Optional[Run]
    fixed: Optional[Run]
    verdict: str
    ok: bool

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "stock": self.stock._asdict() if self.stock else None,
            "with_torch_backports": self.fixed._asdict() if self.fixed else None,
            "verdict": self.verdict,
            "ok": self.ok,
        }


# A run's `printed` line is cut to this many characters.
PRINTED = 400

# verify prints a line at least this often (seconds) while a run goes on.
HEARTBEAT = 30.0


def _said(output: str) -> Tuple[str, bool]:
    """The exception line of the last traceback in `output`, whole, and
    True; else its last non-blank line (or '') and False."""
    # torch.distributed prefixes each line a rank prints with "[rankN]: ".
    lines = [re.sub(r"^\[rank\d+\]: ", "", line) for line in output.splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    for line in lines[starts[-1] + 1:] if starts else []:
        if line and not line[0].isspace():
            return line, True
    tail = [line for line in lines if line.strip()]
    return (tail[-1] if tail else ""), False


def _exception_type(line: str, traced: bool) -> str:
    if traced:
        match = re.match(r"([A-Za-z_][\w.]*)(:|$)", line)
        return match.group(1).rsplit(".", 1)[-1] if match else line[:PRINTED]
    # A line a program printed of its own failure is kept whole (to
    # PRINTED): its end often says what happened ("... exit status -11").
    return line[:PRINTED] or "no output"


def last_said(output: str) -> str:
    """The exception line of the last traceback in `output` ('torch._dynamo.
    exc.BackendCompilerFailed: backend=...'), else its last line; '' if none."""
    return _said(output)[0][:PRINTED]


def exception_line(stderr: str) -> str:
    """The type of the exception of the last traceback in `stderr`, e.g.
    'BackendCompilerFailed'; else the last line of output."""
    return _exception_type(*_said(stderr))


_headers: List[str] = []  # the folder of precompiled headers the runs share, once made


def _share_headers(scratch: str) -> None:
    """Point inductor's folder of precompiled C++ headers under the run's
    temporary folder `scratch` (<TMPDIR>/torchinductor_<user>/
    precompiled_headers, which TORCHINDUCTOR_CACHE_DIR does not move) at
    one folder that every run of this process shares. A precompiled header
    is torch's own headers compiled with the run's compiler and flags, which
    its file name hashes; no patch changes it, so stock and fixed runs can
    share it. Building it anew cost each run of a reproducer that compiles
    C++ about 12 s of CPU (2.13.0, 2026-12-07: 41 s against 29 s without).
    Where the user name cannot be read, each run builds its own."""
    import atexit
    import getpass

    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except Exception:  # no passwd entry and no USER: torch names the folder otherwise
        return
    if not _headers:
        _headers.append(tempfile.mkdtemp(prefix="torch-backports-headers-"))
        atexit.register(shutil.rmtree, _headers[0], True)
    inductor = os.path.join(scratch, "torchinductor_" + user)
    try:
        os.makedirs(inductor, exist_ok=True)
        os.symlink(_headers[0], os.path.join(inductor, "precompiled_headers"))
    except OSError:
        pass  # the run builds its own


def run_env(scratch: str, disable: str = "", enable: Sequence[str] = ()) -> Dict[str, str]:
    """This process's environment for a reproducer run in the folder
    `scratch`: it is the run's TMPDIR and holds its inductor and triton
    caches; TORCH_BACKPORTS_DISABLE is `disable` (unset if empty), and
    TORCH_BACKPORTS_ENABLE adds the backports in `enable`: verify proves a
    backport that is off by default with it on."""
    _share_headers(scratch)
    env = {k: v for k, v in os.environ.items() if k != _config.ENV_DISABLE}
    env.update(TMPDIR=scratch, TORCHINDUCTOR_CACHE_DIR=os.path.join(scratch, "inductor"),
               TRITON_CACHE_DIR=os.path.join(scratch, "triton"))
    if disable:
        env[_config.ENV_DISABLE] = disable
    if enable:
        env[_config.ENV_ENABLE] = ",".join(
            part for part in (env.get(_config.ENV_ENABLE, ""), *enable) if part)
    return env


def run_reproducer(backport: Backport, stock: bool, timeout: float = 1800.0,
                   cpu_check: bool = False) -> Run:
    """Run `backport`'s reproducer (or, with `cpu_check`, its CPU check) in
    a new interpreter, stock or fixed.

    Each run gets its own temporary folder, removed afterwards, as TMPDIR
    and as inductor's and triton's cache: the reproducers leave nothing in
    the user's temporary folder or caches, and no entry the user's own
    programs compiled can hide a bug from them.
    """
    scratch = tempfile.mkdtemp(prefix="torch-backports-verify-")
    env = run_env(scratch, disable=backport.disabled_when_verified(stock),
                  enable=[backport.name] if backport.off_by_default and not stock else [])
    started = time.monotonic()
    try:
        program = backport.cpu_check if cpu_check else backport.reproducer
        done = subprocess.run([sys.executable, "-c", program], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, cwd=scratch)
    except subprocess.TimeoutExpired:
        return Run(TIMED_OUT, "after %.0f s" % timeout, time.monotonic() - started, False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return outcome_of(done.returncode, done.stdout, done.stderr,
                      round(time.monotonic() - started, 1),
                      backport.cpu_check_symptom if cpu_check else backport.symptom)


def outcome_of(returncode: int, stdout: str, stderr: str, seconds: float, wanted: str) -> Run:
    """The Run of a program that exited with `returncode` after printing
    `stdout` and `stderr`; `wanted` is the symptom looked for in both."""
    symptom = wanted in stderr or wanted in stdout
    if returncode == 0:
        return Run(OK, "", seconds, symptom, last_said(stdout))
    if returncode == SKIP_EXIT:
        said = [line for line in stdout.splitlines() if line.startswith("skipped:")]
        return Run(SKIPPED, said[-1][len("skipped:"):].strip() if said else "", seconds, symptom,
                   said[-1][:PRINTED] if said else "")
    line, traced = _said(stderr)
    return Run(CRASHED, _exception_type(line, traced), seconds, symptom,
               line[:PRINTED] or last_said(stdout))


def judge(name: str, stock: Run, fixed: Run) -> Verdict:
    if SKIPPED in (stock.outcome, fixed.outcome):
        run = stock if stock.outcome == SKIPPED else fixed
        # The reproducer says what it needs ("needs einops"), in its own words.
        return Verdict(name, stock, fixed, "skipped: " + (run.detail or "a prerequisite is missing"),
                       True)
    if fixed.outcome != OK:
        return Verdict(name, stock, fixed, "FAILED: the reproducer fails with torch-backports",
                       False)
    if stock.outcome == OK:
        return Verdict(name, stock, fixed, "not reproduced: stock torch passes too "
                       "(this build may carry the fix)", True)
    if not stock.symptom:
        return Verdict(name, stock, fixed, "passes; stock torch failed without the upstream "
                       "symptom", True)
    return Verdict(name, stock, fixed, "fixed", True)


class UnknownBackport(ValueError):
    """verify was asked for a name that is no backport's."""


def selected(names: Sequence[str], torch_version: Optional[str]) -> List[str]:
    """The backports to run: `names`, or those this torch needs (all of
    them if its release cannot be read)."""
    if names:
        unknown = [n for n in names if _registry.canonical(n) is None]
        if unknown:
            raise UnknownBackport(_registry.unknown_names(unknown))
        return [_registry.canonical(n) for n in names]
    try:
        release = _versions.release_of(torch_version)
    except _versions.UnknownRelease:
        return list(_registry.names())
    # Needed, or a pre-release of its fix's release, whose code decides.
    return [n for n in _registry.names() if _records.outside(n, release, torch_version) is None]


def default_jobs() -> int:
    """One run per usable core: a reproducer spends its time in one Python
    thread or one compiler process (its inductor compiles with one worker)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def verify(names: Sequence[str], torch_version: Optional[str],
           progress: Callable[[str], None], jobs: Optional[int] = None,
           chosen: Optional[Sequence[str]] = None) -> List[Verdict]:
    """Run the stock and the fixed run of each chosen reproducer, `jobs` at
    a time (default: one per core). Each run has its own interpreter,
    temporary folder and inductor and triton caches (run_reproducer), so
    runs in parallel share nothing; progress lines come as runs finish.

    A backport of GPU code whose reproducer skipped (no CUDA GPU here) is
    then proven by its CPU check (Backport.cpu_check), if it has one, and
    its verdict says so."""
    if chosen is None:
        chosen = selected(names, torch_version)
    backports = {name: _registry.load(name) for name in chosen}
    runs = _run_all(backports, [(name, stock, False) for name in chosen for stock in (True, False)],
                    jobs, progress)
    on_cpu = [name for name in chosen if backports[name].cpu_check
              and SKIPPED in (runs[(name, True, False)].outcome, runs[(name, False, False)].outcome)]
    if on_cpu:
        runs.update(_run_all(backports, [(name, stock, True) for name in on_cpu
                                         for stock in (True, False)], jobs, progress))
    verdicts = []
    for name in chosen:
        if name in on_cpu:
            verdict = judge(name, runs[(name, True, True)], runs[(name, False, True)])
            verdicts.append(verdict._replace(verdict="CPU check: " + verdict.verdict))
        else:
            verdicts.append(judge(name, runs[(name, True, False)], runs[(name, False, False)]))
    return verdicts


_Task = Tuple[str, bool, bool]  # (backport, stock, CPU check)


def _run_all(backports: Dict[str, Backport], tasks: List[_Task], jobs: Optional[int],
             progress: Callable[[str], None]) -> Dict[_Task, Run]:
    """Run `tasks`, `jobs` at a time; report each as it finishes."""
    results: Dict[_Task, Run] = {}
    lock = threading.Lock()
    total = len(tasks)

    def describe(task: _Task) -> str:
        name, stock, cpu_check = task
        return "%s%s, %s" % (name, " (CPU check)" if cpu_check else "",
                             "stock torch (%s=%s)" % (_config.ENV_DISABLE, name)
                             if stock else "with torch-backports")

    running: Dict[_Task, float] = {}  # task -> when it started
    last_said = [time.monotonic()]

    def say(line: str) -> None:  # with `lock` held
        last_said[0] = time.monotonic()
        progress(line)

    def one(task: _Task) -> None:
        name, stock, cpu_check = task
        with lock:
            running[task] = time.monotonic()
        run = run_reproducer(backports[name], stock, cpu_check=cpu_check)
        with lock:
            del running[task]
            results[task] = run
            say("[%d/%d] %s: %s (%.1f s)" % (len(results), total, describe(task),
                                              run.describe(), run.seconds))

    done = threading.Event()

    def heartbeat() -> None:
        """A line at least every HEARTBEAT seconds while runs go on: a
        compile can take minutes on a busy machine."""
        while not done.wait(HEARTBEAT / 5):
            with lock:
                now = time.monotonic()
                if running and now - last_said[0] >= HEARTBEAT:
                    say("  still running: " + "; ".join(
                        "%s (%.0f s)" % (describe(task), now - began)
                        for task, began in sorted(running.items(), key=lambda item: item[1])))

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        workers = max(1, min(jobs or default_jobs(), total or 1))
        if workers == 1:
            for task in tasks:
                with lock:
                    say("[%d/%d] %s ..." % (len(results) + 1, total, describe(task)))
                one(task)
        else:
            with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(one, tasks))
    finally:
        done.set()
        ticker.join()
    return results


def not_needed(names: Sequence[str], torch_version: Optional[str]) -> List[Tuple[str, str]]:
    """The named backports whose reproducers this torch does not need run,
    each with why: it ships the fix, or it predates the bug. Nothing when
    the release cannot be read."""
    try:
        release = _versions.release_of(torch_version)
    except _versions.UnknownRelease:
        return []
    reasons = []
    for name in names:
        backport = _registry.load(name)
        if _records.outside(name, release, torch_version) is None:
            continue
        if release >= backport.first_fixed:
            reasons.append((name, "torch %s ships this fix (since %s)"
                            % (torch_version, format_release(backport.first_fixed))))
        elif release < backport.first_affected:
            reasons.append((name, "torch %s predates the bug (%s affects %s)"
                            % (torch_version, name, backport.affects())))
    return reasons


class Outcome(NamedTuple):
    """A whole verify run: its exit status, how many reproducers really ran
    (neither skipped), and a line saying so."""

    status: int
    checked: int
    message: str


def summarise(verdicts: Sequence[Verdict], named: bool = False) -> Outcome:
    """`named`: the user named the backports to verify (then an empty run
    means none of those is needed here, not that this torch needs none)."""
    checked = sum(1 for v in verdicts if not v.verdict.startswith(SKIPPED))
    skipped = len(verdicts) - checked
    if not all(v.ok for v in verdicts):
        return Outcome(FAILED, checked, "FAILED")
    if not checked:
        return Outcome(NOTHING_CHECKED, 0, "checked nothing: %s" % (
            "every reproducer was skipped (see why above)" if verdicts
            else "this torch needs none of the backports named (see why above)" if named
            else "this torch needs no backport"))
    return Outcome(PASSED, checked, "passed (%d checked%s)" % (
        checked, ", %d skipped" % skipped if skipped else ""))


def _cut(text: str) -> str:
    return text if len(text) <= CELL else text[:CELL - 1] + "\u2026"


def table(verdicts: Sequence[Verdict], not_run: Sequence["tuple[str, str]"]) -> str:
    header = ("backport", "stock torch", "with torch-backports", "verdict")
    rows = [(v.name, _cut(v.stock.describe()), _cut(v.fixed.describe()), _cut(v.verdict))
            for v in verdicts]
    rows += [(name, "-", "-", reason) for name, reason in not_run]
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3]
                     for row in [header] + rows)
