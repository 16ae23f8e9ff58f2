"""`tox -e matrix`: the real-torch integration tests on older releases, one
at a time, each in a new venv that is deleted afterwards (a CUDA wheel with
its nvidia packages is ~4 GB). Not run in CI. Prints one line per release
and records each in tests/matrix-results.json, with its date, keeping the
releases it did not run this time.

usage: python tests/matrix.py [VERSION ...]   (default: 2.6.0 2.7.0 2.7.1 2.8.0 2.9.0 2.12.0)
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


def main(versions):
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
            install = sh(python, "-m", "pip", "install", "-q", "torch==" + version, wheel, "pytest",
                         "pytest-xdist", "einops==0.8.2")
            if install.returncode:
                results[version] = {"ok": False, "summary": "install failed: "
                                    + install.stderr.strip().splitlines()[-1]}
                continue
            env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_BACKPORTS_")}
            env["TORCH_BACKPORTS_REAL_TORCH"] = version
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
            results[version]["minutes"] = round((time.time() - started) / 60, 1)
            results[version]["date"] = time.strftime("%Y-%m-%d")
            print(version, json.dumps(results[version]), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "tests" / "matrix-results.json"
    recorded = json.loads(out.read_text()) if out.exists() else {}
    kept = recorded.get("results", {})
    for version, result in kept.items():  # results from before per-release dates
        result.setdefault("date", recorded.get("date"))
    kept.update(results)
    out.write_text(json.dumps({"results": dict(sorted(
        kept.items(), key=lambda item: tuple(int(p) for p in item[0].split(".")))),
    }, indent=2))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or DEFAULT))
