"""`tox -e matrix`: the real-torch integration tests on older releases, one
at a time, each in a new venv that is deleted afterwards (a CUDA wheel with
its nvidia packages is ~4 GB). Not run in CI. Prints one line per release
and records each in tests/matrix-results.json, with its date, keeping the
releases it did not run this time.

usage: python tests/matrix.py [--status-only] [VERSION ...]
       (default: 2.6.0 2.7.0 2.7.1 2.8.0 2.9.0 2.12.0)

--status-only installs each release with torch-backports and records only
what `torch-backports status --json` says of each backport there ("status"
in its entry; the tests it ran before are kept): the fingerprint checks of
every patch, settled on that wheel's code, with the backports that are off
by default turned on so that theirs are checked too. The README's
compatibility table marks `fp` only the claimed releases recorded applied
this way, or by a run (tools/readme.py).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The releases a backport claims that CI does not install.
DEFAULT = ["2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.12.0"]


def sh(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def status_of(python: Path, env: dict) -> dict:
    """backport -> its state in a new process of `python`'s venv."""
    sys.path.insert(0, str(ROOT))
    from torch_backports import _registry
    off = [n for n in _registry.names() if _registry.load(n).off_by_default]
    env = dict(env, TORCH_BACKPORTS_ENABLE=",".join(off))
    done = sh(python, "-m", "torch_backports", "status", "--json", env=env, cwd=tempfile.gettempdir())
    return {row["name"]: row["state"] for row in json.loads(done.stdout)["backports"]}


def main(versions, status_only=False):
    work = Path(tempfile.mkdtemp(prefix="tb-matrix-"))
    built = sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work, ROOT)
    if built.returncode:
        raise SystemExit(built.stderr)
    wheel = next(work.glob("torch_backports-*.whl"))
    results = {}
    for version in versions:
        venv = work / ("torch-" + version)
        started = time.time()
        try:
            sh(sys.executable, "-m", "venv", venv, check=True)
            python = venv / "bin" / "python"
            extra = [] if status_only else ["pytest", "pytest-xdist", "einops==0.8.2"]
            install = sh(python, "-m", "pip", "install", "-q", "torch==" + version, wheel, *extra)
            if install.returncode:
                results[version] = {"ok": False, "summary": "install failed: "
                                    + install.stderr.strip().splitlines()[-1]}
                continue
            env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BACKPORTS_")}
            env["TORCH_BACKPORTS_REAL_TORCH"] = version
            if status_only:
                states = status_of(python, env)
                results[version] = {"status": states, "status_date": time.strftime("%Y-%m-%d"),
                                    "ok": "unrecognised" not in states.values()
                                    and "failed" not in states.values()}
                continue
            cells = work / ("cells-" + version)
            cells.mkdir()
            env["TORCH_BACKPORTS_RESULTS_DIR"] = str(cells)
            tests = sh(python, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
                       ROOT / "tests" / "integration", env=env, cwd=ROOT)
            lines = tests.stdout.strip().splitlines()
            results[version] = {"ok": tests.returncode == 0, "summary": lines[-1] if lines else "",
                                "failures": [l for l in lines if l.startswith("FAILED")],
                                # backport -> what its reproducer printed, stock and fixed
                                "reproducers": {p.stem: json.loads(p.read_text())
                                                for p in sorted(cells.glob("*.json"))}}
        finally:
            shutil.rmtree(venv, ignore_errors=True)
            results.setdefault(version, {"ok": False, "summary": "interrupted"})
            if not status_only:
                results[version]["minutes"] = round((time.time() - started) / 60, 1)
                results[version]["date"] = time.strftime("%Y-%m-%d")
            print(version, json.dumps(results[version]), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "tests" / "matrix-results.json"
    recorded = json.loads(out.read_text()) if out.exists() else {}
    kept = recorded.get("results", {})
    for version, result in kept.items():  # results from before per-release dates
        result.setdefault("date", recorded.get("date"))
    for version, result in results.items():
        if status_only and "status" in result:
            kept.setdefault(version, {}).update(status=result["status"],
                                                status_date=result["status_date"])
        elif not status_only:
            kept[version] = dict(result, **{k: v for k, v in kept.get(version, {}).items()
                                            if k in ("status", "status_date")})
    out.write_text(json.dumps({"results": dict(sorted(
        kept.items(), key=lambda item: tuple(int(p) for p in item[0].split(".")))),
    }, indent=2))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    args = sys.argv[1:]
    only = "--status-only" in args
    sys.exit(main([a for a in args if a != "--status-only"] or DEFAULT, status_only=only))
