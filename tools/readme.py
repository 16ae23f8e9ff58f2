"""Write the README's catalogue sections from the registry, so that they
cannot drift from the code: the "What it fixes" table, the "how each is
fixed" list with its link definitions, and the compatibility table (from
the registry, tox.ini's CI releases, tests/ci_plan.py,
tests/matrix-results.json and tests/cells-results.json).

Each section lies between `<!-- begin generated: NAME -->` and `<!-- end
generated: NAME -->`; edit a backport module's `readme_symptom` or
`readme_fix`, not the README. tests/test_readme.py fails when the README
differs from what this writes, or when a count in its prose disagrees with
the registry.

usage: python tools/readme.py [--check]
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterable, List

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import cells  # noqa: E402
import ci_plan  # noqa: E402
from torch_backports import _registry  # noqa: E402
from torch_backports._backport import Backport, format_release  # noqa: E402
from torch_backports._versions import release_of  # noqa: E402

README = ROOT / "README.md"
COLUMNS = ["2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0",
           "2.12.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]
# Where a short reference such as [vllm#38205] points when no backport's
# `upstream` lists its address (GitHub sends /issues/N on to /pull/N).
REPOSITORIES = {"pytorch": "pytorch/pytorch", "vllm": "vllm-project/vllm"}
_GITHUB = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+)/(?:pull|issues)/(\d+)$")
_REFERENCE = re.compile(r"\[([\w./-]+#\d+)\](?![:(\[])")


def backports() -> List[Backport]:
    return [_registry.load(name) for name in _registry.names()]


def reference(url: str) -> str:
    """[pytorch#123] for a pytorch/pytorch address (REPOSITORIES' short names),
    [owner/repo#123] otherwise."""
    found = _GITHUB.match(url)
    if not found:
        return "<%s>" % url
    owner, repo, number = found.groups()
    repository = owner + "/" + repo
    short = next((k for k, v in REPOSITORIES.items() if v == repository), repository)
    return "[%s#%s]" % (short, number)


def affected(backport: Backport) -> str:
    """'2.6.0 – 2.10.x': the first affected release to the last."""
    major, minor, micro = backport.first_fixed
    last = "%d.%d.%d" % (major, minor, micro - 1) if micro else "%d.%d.x" % (major, minor - 1)
    first = format_release(backport.first_affected)
    if last.endswith(".x") and first == last[:-1] + "0":
        return last
    return "%s – %s" % (first, last)


def fixed_in(backport: Backport) -> str:
    """The first fixed release and every upstream reference."""
    links = [reference(url) for url in backport.upstream]
    return format_release(backport.first_fixed) + (" (%s)" % ", ".join(links) if links else "")


def fixes_table(catalogue: Iterable[Backport]) -> str:
    lines = ["| backport | symptom on stock torch | affected | fixed upstream in |",
             "|---|---|---|---|"]
    for backport in catalogue:
        symptom = backport.readme_symptom
        if backport.off_by_default:
            symptom += (". **Off by default**: %s; `TORCH_BACKPORTS_ENABLE=%s` turns it on"
                        % (backport.off_by_default, backport.name))
        lines.append("| `%s` | %s | %s | %s |" % (backport.name, symptom,
                                                  affected(backport), fixed_in(backport)))
    return "\n".join(lines)


def how_fixed(catalogue: Iterable[Backport]) -> str:
    return "\n".join(textwrap.fill("* `%s`: %s" % (backport.name, backport.readme_fix),
                                   width=76, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False)
                     for backport in catalogue)


def link_definitions(text: str, catalogue: Iterable[Backport]) -> str:
    """A definition for each short reference used in `text`: the address a
    backport's `upstream` gives, or the repository's issue address."""
    known: Dict[str, str] = {}
    for backport in catalogue:
        for url in backport.upstream:
            known.setdefault(reference(url)[1:-1], url)
    lines = []
    for short in dict.fromkeys(_REFERENCE.findall(text)):
        repository, number = short.split("#")
        url = known.get(short) or "https://github.com/%s/issues/%s" % (
            REPOSITORIES.get(repository, repository), number)
        lines.append("[%s]: %s" % (short, url))
    return "\n".join(lines)


def cell(backport: Backport, version: str, ci: set, matrix: dict, recorded: dict) -> str:
    release = release_of(version)
    if release < backport.first_affected:
        return "–"
    run = matrix.get(version, {}).get("reproducers", {}).get(backport.name, {})
    if not backport.needed_by(release):
        if release in ci and ci_plan.fixed_run_here(backport, release):
            return "fixed CI"
        return "fixed m" if run.get("with_torch_backports") == "ok" else "fixed"
    if release in ci:
        if ci_plan.stock_in_ci(backport, release, bool(backport.cpu_check), ci):
            return "✔ CI"
        return "✔ all" if cells.proven(recorded, version, backport.name,
                                       bool(backport.cpu_check)) else "✔ ci"
    if cells.crashed_then_ok(run):
        return "✔ m"
    # `fp` only where a status run on that wheel (tests/matrix.py
    # --status-only) saw the fingerprint accepted: a range is not a proof.
    if matrix.get(version, {}).get("status", {}).get(backport.name) == "applied":
        return "fp"
    return "claimed"


def gpu_proven() -> Dict[str, set]:
    """release -> the backports whose reproducer a GPU run (tools/gpu_run.py,
    recorded in tests/gpu-results/) saw fail stock and pass fixed."""
    proven: Dict[str, set] = {}
    for path in sorted((ROOT / "tests" / "gpu-results").glob("*.json")):
        run = json.loads(path.read_text(encoding="utf-8"))
        version = format_release(release_of(run["torch"]))
        proven.setdefault(version, set()).update(
            row["name"] for row in run.get("reproducers", {}).get("backports", [])
            if row.get("verdict") == "fixed")
    return proven


def compatibility_table(catalogue: Iterable[Backport]) -> str:
    ci = ci_plan.ci_releases()
    results = ROOT / "tests" / "matrix-results.json"
    matrix = json.loads(results.read_text())["results"] if results.exists() else {}
    gpu = gpu_proven()
    recorded = cells.load()
    lines = ["| backport | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for backport in catalogue:
        lines.append("| `%s` | " % backport.name + " | ".join(
            cell(backport, v, ci, matrix, recorded)
            + (" GPU" if backport.name in gpu.get(v, ()) else "")
            for v in COLUMNS) + " |")
    return "\n".join(lines)


def replace_section(text: str, name: str, body: str) -> str:
    begin, end = "<!-- begin generated: %s -->" % name, "<!-- end generated: %s -->" % name
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise SystemExit("README.md has no %r ... %r section" % (begin, end))
    return text[:start + len(begin)] + "\n" + body + "\n" + text[stop:]


def generated(text: str) -> str:
    """`text` (the README) with every generated section written anew."""
    catalogue = backports()
    text = replace_section(text, "fixes", fixes_table(catalogue))
    text = replace_section(text, "how-fixed", how_fixed(catalogue))
    text = replace_section(text, "compatibility", compatibility_table(catalogue))
    # Last, from the whole README: every short reference it uses.
    text = replace_section(text, "links", "")
    return replace_section(text, "links", link_definitions(text, catalogue))


def main(argv: List[str]) -> int:
    current = README.read_text(encoding="utf-8")
    wanted = generated(current)
    if "--check" in argv:
        if wanted != current:
            print("README.md differs from the catalogue: run python tools/readme.py")
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
