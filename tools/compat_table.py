"""Print the README's compatibility table from the registry, tox.ini's CI
releases and tests/matrix-results.json, so that the table says only what
was run.

usage: python tools/compat_table.py
"""

import configparser
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torch_backports import _registry  # noqa: E402
from torch_backports._versions import release_of  # noqa: E402

COLUMNS = ["2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0",
           "2.12.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]


def ci_releases():
    """The torch releases tox's default env list installs."""
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    deps = tox["testenv:{%s}" % ",".join(
        name for name in re.findall(r"\b(notorch|torch\d+)\b", tox["tox"]["env_list"]))]["deps"]
    return set(re.findall(r"torch==([\d.]+)", deps))


def cell(backport, version, ci, matrix):
    release = release_of(version)
    if release < backport.first_affected:
        return "–"
    run = matrix.get(version, {}).get("reproducers", {}).get(backport.name, {})
    if not backport.needed_by(release):
        # CI runs a fixed release's reproducer on the first fixed release and
        # the newest only (tests/integration/test_reproducers.py).
        if version in ci and (release[:2] == backport.first_fixed[:2]
                              or release == max(map(release_of, ci))):
            return "fixed CI"
        return "fixed m" if run.get("with_torch_backports") == "ok" else "fixed"
    if version in ci:
        return "✔ CI"
    if run.get("stock", "").startswith("crashed") and run.get("with_torch_backports") == "ok":
        return "✔ m"
    return "fp"


def main():
    ci = ci_releases()
    results = ROOT / "tests" / "matrix-results.json"
    matrix = json.loads(results.read_text())["results"] if results.exists() else {}
    print("| backport | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    for name in _registry.names():
        backport = _registry.load(name)
        print("| `%s` | " % name + " | ".join(cell(backport, v, ci, matrix) for v in COLUMNS)
              + " |")


if __name__ == "__main__":
    main()
