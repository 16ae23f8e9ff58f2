"""The fixed runs of many reproducers in a few shared interpreters.

A user's process has every backport on at once and compiles many graphs in
one interpreter. The fixed runs do the same: `run_together` hands the
reproducers, one at a time, to `workers` interpreters of
together_program.py, each with every backport on (the ones off by default
turned on too), one `import torch` and one warm inductor for them all. This
proves that the backports work beside one another, and it saves each run
its own start: `import torch`, loading dynamo and inductor, and compiling
inductor's C++ prelude.

A program that ends its interpreter, or whose fixed run turns other
backports off, runs alone (`runs_alone`), as `torch-backports verify` runs
every reproducer. So do the stock runs: each needs its own
TORCH_BACKPORTS_DISABLE.
"""

import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from torch_backports import _verify
from torch_backports._backport import Backport

PROGRAM = Path(__file__).with_name("together_program.py")


def runs_alone(backport: Backport) -> Optional[str]:
    """Why `backport`'s fixed run needs an interpreter of its own, or None."""
    if backport.verify_without:
        return "its fixed run turns off %s" % ", ".join(backport.verify_without)
    if "os._exit" in backport.reproducer:
        return "its reproducer ends its interpreter (os._exit)"
    return None


def run_together(backports: Sequence[Backport], workers: int = 2, timeout: float = 1800.0,
                 env: Optional[Dict[str, str]] = None,
                 before: Optional[Dict[str, List[str]]] = None) -> Dict[str, _verify.Run]:
    """The fixed run of each of `backports`, made in `workers` shared
    interpreters that take the next reproducer as they come free. A run
    that ends its interpreter (a segfault, an exit below Python) is
    CRASHED, with what the interpreter printed last, and a new interpreter
    takes the runs still to do. `env` adds to the interpreters' environment.
    `before`, if given, gets for each run the names of the programs its
    interpreter ran earlier: where to look when a run fails only here."""
    scratch = tempfile.mkdtemp(prefix="torch-backports-together-")
    try:
        plan = Path(scratch) / "plan.json"
        plan.write_text(json.dumps({b.name: b.reproducer for b in backports}))
        env = dict(_verify.run_env(scratch, enable=[b.name for b in backports
                                                    if b.off_by_default]), **(env or {}))
        todo: "queue.Queue[Backport]" = queue.Queue()
        for backport in backports:
            todo.put(backport)
        runs: Dict[str, _verify.Run] = {}
        before = {} if before is None else before
        threads = [threading.Thread(target=_worker, args=(todo, runs, before, plan, env, scratch,
                                                          i, timeout))
                   for i in range(max(1, min(workers, len(backports))))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return runs
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _worker(todo: "queue.Queue[Backport]", runs: Dict[str, _verify.Run],
            before: Dict[str, List[str]], plan: Path, env: Dict[str, str], scratch: str,
            index: int, timeout: float) -> None:
    interpreter: Optional[_Interpreter] = None
    started = 0
    earlier: List[str] = []
    try:
        while True:
            try:
                backport = todo.get_nowait()
            except queue.Empty:
                return
            if interpreter is None:
                started += 1
                interpreter = _Interpreter(plan, env, Path(scratch) / (
                    "interpreter-%d-%d.log" % (index, started)))
                earlier = []
            before[backport.name] = list(earlier)
            earlier.append(backport.name)
            answer = interpreter.ask(backport.name, timeout)
            if answer is None:
                runs[backport.name] = interpreter.ended(timeout)
                interpreter = None
                continue
            runs[backport.name] = _verify.outcome_of(
                answer["returncode"], answer["stdout"], answer["stderr"], answer["seconds"],
                backport.symptom)
    finally:
        if interpreter is not None:
            interpreter.close()


class _Interpreter:
    """One together_program.py process."""

    def __init__(self, plan: Path, env: Dict[str, str], log: Path) -> None:
        self.log = log
        self.timed_out = False
        with open(log, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", "import sys; sys.path.insert(0, %r); import %s; %s.main(%r)"
                 % (str(PROGRAM.parent), PROGRAM.stem, PROGRAM.stem, str(plan))],
                env=env, cwd=str(plan.parent),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)

    def ask(self, name: str, timeout: float) -> Optional[dict]:
        """Run `name`'s reproducer; its answer, or None if the process ended."""
        watchdog = threading.Timer(timeout, self._kill)
        watchdog.start()
        try:
            self.process.stdin.write(name + "\n")
            self.process.stdin.flush()
            line = self.process.stdout.readline()
        except OSError:
            line = ""
        finally:
            watchdog.cancel()
        return json.loads(line) if line else None

    def _kill(self) -> None:
        self.timed_out = True
        self.process.kill()

    def ended(self, timeout: float) -> _verify.Run:
        """The Run of the program during which this interpreter ended."""
        self.process.kill()
        status = self.process.wait()
        if self.timed_out:
            return _verify.Run(_verify.TIMED_OUT, "after %.0f s" % timeout, timeout, False)
        said = self.log.read_text(errors="replace")
        line = _verify.last_said(said)
        return _verify.Run(_verify.CRASHED, "the shared interpreter ended (exit status %d)"
                           % status, 0.0, False, line)

    def close(self) -> None:
        try:
            self.process.stdin.write("\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()

