"""The shared interpreters of the fixed runs (tests/integration/together.py),
on small programs that need no torch: each program's result is what `python
-c` would have given, what one program changes does not reach the next, and
a program that ends its interpreter fails alone while the rest still run."""

import os

from integration import together
from torch_backports import _verify
from torch_backports._backport import Backport


def backport(name, reproducer, symptom="the symptom", **extra):
    return Backport(name=name, summary="", upstream=(), first_affected=(2, 0, 0),
                    first_fixed=(2, 1, 0), apply=lambda module, release: None,
                    reproducer=reproducer, symptom=symptom, **extra)


PROGRAMS = [
    backport("passes", "print('first line')\nprint('all good')\n"),
    backport("raises", "raise RuntimeError('the symptom, raised')\n"),
    backport("skips", "import sys\nprint('skipped: needs a GPU')\nsys.exit(77)\n"),
    backport("sets-state", "import os, sys\nos.environ['LEAK'] = '1'\nos.chdir('/')\n"
             "sys.modules['__main__'].leaked = True\n"),
    backport("sees-state", "import os, sys\n"
             "assert 'LEAK' not in os.environ, 'environment leaked'\n"
             "assert os.getcwd() != '/', 'working folder leaked'\n"
             "assert not hasattr(sys.modules['__main__'], 'leaked'), 'module leaked'\n"
             "def f(): pass\nimport pickle; pickle.loads(pickle.dumps(f))\n"),
    backport("dies", "import os\nprint('going')\nos._exit(3)\n"),
    backport("exits-1", "import sys\nsys.exit('a message')\n"),
    backport("after-death", "print('still here')\n"),
]


def test_each_program_gets_what_python_c_gives_it():
    before = {}
    runs = together.run_together(PROGRAMS, workers=1, before=before)
    assert runs["passes"].outcome == _verify.OK and runs["passes"].printed == "all good"
    assert runs["raises"].outcome == _verify.CRASHED and runs["raises"].symptom
    assert runs["raises"].detail == "RuntimeError"
    assert runs["skips"].outcome == _verify.SKIPPED and runs["skips"].detail == "needs a GPU"
    assert runs["sets-state"].outcome == _verify.OK
    assert runs["sees-state"].outcome == _verify.OK, runs["sees-state"]
    assert runs["dies"].outcome == _verify.CRASHED
    assert "exit status 3" in runs["dies"].detail
    assert runs["exits-1"].outcome == _verify.CRASHED
    assert runs["exits-1"].printed == "a message"
    assert runs["after-death"].outcome == _verify.OK
    assert before["sees-state"] == ["passes", "raises", "skips", "sets-state"]
    assert before["exits-1"] == [] and before["after-death"] == ["exits-1"]


def test_two_interpreters_share_the_runs():
    many = [backport("pid-%d" % i, "import os, time\ntime.sleep(0.3)\nprint(os.getpid())\n")
            for i in range(6)]
    runs = together.run_together(many, workers=2)
    assert all(run.outcome == _verify.OK for run in runs.values()), runs
    interpreters = {run.printed for run in runs.values()}
    assert len(interpreters) == 2 and str(os.getpid()) not in interpreters


def test_runs_alone():
    assert together.runs_alone(backport("a", "print(1)")) is None
    assert "os._exit" in together.runs_alone(backport("b", "import os\nos._exit(0)"))
    assert "turns off c" in together.runs_alone(backport("d", "pass", verify_without=("c",)))
