"""Run reproducers one after another in this one interpreter, with every
backport on, as a user's long-lived process has them.

    python -c "import together_program; together_program.main('PLAN.json')"

(imported, not run as a script: each program runs in `__main__`, which
must not be this module.)

PLAN.json maps each backport name to its reproducer's source. The parent
(tests/integration/together.py) writes a name on stdin for each program to
run, and reads one JSON line back on this process's original stdout:
{"name", "returncode", "stdout", "stderr", "seconds"}, what `python -c
PROGRAM` would have given it. An empty line ends the run.

Each program runs in a fresh namespace of the one `__main__` module (torch
keeps references to modules by name: dynamo's guards look `__main__` up
again, so a second `__main__` object would hide the program's globals from
them), in its own working and
temporary folder (under this process's), with this process's environment,
working folder, torch configs and dynamo caches put back afterwards: what one program sets must not
decide how the next one runs. torch's config modules are imported before
the first program, so that a config the first program sets is put back too
(one imported during a program has no earlier state to go back to). Torch stays imported, and so does every patch
the .pth applied: that is the point. This script never imports
torch_backports.
"""

import builtins
import contextlib
import io
import json
import os
import sys
import tempfile
import time
import traceback


def _config_modules():
    """torch's config modules loaded so far (dynamo, inductor, functorch ...)."""
    if "torch" not in sys.modules:
        return []
    try:
        from torch.utils._config_module import ConfigModule
    except ImportError:
        return []
    return [m for m in list(sys.modules.values()) if isinstance(m, ConfigModule)]


# The config modules the reproducers set. Imported before the first program:
# inductor's post_grad_custom_post_pass, set by one program in the config's
# first import, otherwise stayed in every later cache key.
CONFIG_MODULES = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config",
                  "torch.fx.experimental._config", "torch.compiler.config", "torch._export.config")


def _import_configs():
    import importlib
    for name in CONFIG_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:  # not in this release
            pass


def _snapshot():
    return {
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "argv": list(sys.argv),
        "tempdir": tempfile.tempdir,
        "configs": [(m, m.get_config_copy()) for m in _config_modules()],
    }


def _restore(saved):
    os.chdir(saved["cwd"])
    os.environ.clear()
    os.environ.update(saved["environ"])
    sys.argv[:] = saved["argv"]
    tempfile.tempdir = saved["tempdir"]
    for module, config in saved["configs"]:
        module.load_config(config)
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


# Every program's namespace, kept to the end: a program's temporary folders
# (an inductor cache made with tempfile.TemporaryDirectory, say) must outlive
# it, because inductor keeps paths into the first cache folder it used (the
# C++ prefix header) for the life of the process, as it may in any process
# whose cache folder never moves. The parent removes them all afterwards.
_FINISHED = []


def run(name, program):
    """Run `program` as `python -c` would, in this process; what it gave."""
    scratch = tempfile.mkdtemp(prefix="torch-backports-together-")
    saved = _snapshot()
    out, err = io.StringIO(), io.StringIO()
    main = sys.modules["__main__"]
    own = dict(main.__dict__)
    main.__dict__.clear()
    main.__dict__.update(__name__="__main__", __doc__=None, __package__=None, __spec__=None,
                         __loader__=own.get("__loader__"), __builtins__=builtins)
    returncode = 0
    started = time.monotonic()
    try:
        os.chdir(scratch)
        os.environ["TMPDIR"] = tempfile.tempdir = scratch
        sys.argv[:] = ["-c"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                exec(compile(program, "<%s>" % name, "exec"), main.__dict__)
            except SystemExit as leaving:
                code = leaving.code
                if code is None or isinstance(code, int):
                    returncode = code or 0
                else:
                    print(code, file=sys.stderr)
                    returncode = 1
            except BaseException:  # noqa: B902 - a program's failure is its result
                traceback.print_exc()
                returncode = 1
    finally:
        seconds = time.monotonic() - started
        _restore(saved)
        _FINISHED.append(dict(main.__dict__))
        main.__dict__.clear()
        main.__dict__.update(own)
    return {"name": name, "returncode": returncode, "stdout": out.getvalue(),
            "stderr": err.getvalue(), "seconds": round(seconds, 1)}


def main(plan_path):
    with open(plan_path) as plan_file:
        plan = json.load(plan_file)
    # The protocol gets the original stdout to itself; output written to
    # file descriptor 1 below Python (C++ warnings, a child that inherits
    # it) goes to stderr instead of into the protocol.
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    _import_configs()
    for line in sys.stdin:
        name = line.strip()
        if not name:
            break
        protocol.write(json.dumps(run(name, plan[name])) + "\n")
        protocol.flush()
