"""Write the pages that describe the catalogue from the registry, so that
they cannot drift from the code: the README's "What it fixes" list (one
line a backport, between `<!-- begin generated: fixes -->` and `<!-- end
generated: fixes -->`), docs/backports.md (each backport in full) and
docs/compatibility.md (the table of releases, from the registry, tox.ini's
CI releases, tests/ci_plan.py, tests/matrix-results.json and
tests/cells-results.json, and the legend of the marks it uses).

Edit a backport module's `headline`, `readme_symptom` or `readme_fix`, not
the pages. tests/test_readme.py fails when a page differs from what this
writes, or when a count in the README's prose disagrees with the registry.

usage: python tools/readme.py [--check]
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterable, List, Tuple

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


def fixes_table(catalogue: Iterable[Backport]) -> str:
    """The README's catalogue: one line per backport, its short symptom."""
    lines = ["| backport | symptom on stock torch | affected | fixed in |",
             "|---|---|---|---|"]
    for backport in catalogue:
        headline = backport.headline
        if backport.off_by_default:
            headline += " *(off by default)*"
        lines.append("| [`%s`](docs/backports.md#%s) | %s | %s | %s |" % (
            backport.name, backport.name, headline, affected(backport),
            format_release(backport.first_fixed)))
    return "\n".join(lines)


def backport_entry(backport: Backport, ci: set) -> str:
    """One backport's section of docs/backports.md."""
    proven = [format_release(r) for r in sorted(ci)
              if backport.needed_by(r) and ci_plan.fixed_run_here(backport, r)]
    parts = ["## `%s`" % backport.name, "",
             "**Symptom**: %s." % backport.readme_symptom.rstrip("."), "",
             "**Fix**: %s" % backport.readme_fix, ""]
    if backport.off_by_default:
        parts += ["**Off by default**: %s. `TORCH_BACKPORTS_ENABLE=%s` turns it on."
                  % (backport.off_by_default.rstrip("."), backport.name), ""]
    parts += ["**Releases**: affects %s, fixed upstream in %s. Proven in CI on %s%s." % (
        affected(backport), format_release(backport.first_fixed),
        ", ".join(proven) or "no CI release",
        " (by its CPU check)" if backport.cpu_check else ""), "",
        "**Upstream**: %s." % ", ".join(reference(url) for url in backport.upstream), ""]
    return "\n".join(textwrap.fill(part, width=76, break_long_words=False,
                                   break_on_hyphens=False)
                     if part and not part.startswith("#") else part for part in parts)


BACKPORTS_HEAD = """# The backports

<!-- Written by tools/readme.py from the backport modules: edit a module's
readme_symptom, readme_fix, off_by_default or upstream, not this page. -->

Each backport in full: the symptom on stock torch, what the fix changes
(and what of the upstream change it does not carry, and why), the releases
it affects, where CI proves it, and its upstream references. The
release-by-release facts, read off each release's wheel, are in the module
docstrings under `torch_backports/backports/`. Which release proves which
backport, and how: [compatibility.md](compatibility.md).
"""


def backports_page(catalogue: List[Backport]) -> str:
    ci = ci_plan.ci_releases()
    text = BACKPORTS_HEAD + "\n" + "\n".join(backport_entry(b, ci) for b in catalogue)
    return text + "\n" + link_definitions(text, catalogue) + "\n"


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


def compatibility_rows(catalogue: Iterable[Backport]) -> List[Tuple[str, List[Tuple[str, bool]]]]:
    """Each backport's name and, per column, its mark and whether a GPU run
    proved it there."""
    ci = ci_plan.ci_releases()
    results = ROOT / "tests" / "matrix-results.json"
    matrix = json.loads(results.read_text())["results"] if results.exists() else {}
    gpu = gpu_proven()
    recorded = cells.load()
    return [(backport.name, [(cell(backport, v, ci, matrix, recorded),
                              backport.name in gpu.get(v, ())) for v in COLUMNS])
            for backport in catalogue]


def compatibility_table(rows: List[Tuple[str, List[Tuple[str, bool]]]]) -> str:
    lines = ["| backport | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for name, marks in rows:
        lines.append("| `%s` | " % name + " | ".join(
            mark + (" GPU" if on_gpu else "") for mark, on_gpu in marks) + " |")
    return "\n".join(lines)


def replace_section(text: str, name: str, body: str) -> str:
    begin, end = "<!-- begin generated: %s -->" % name, "<!-- end generated: %s -->" % name
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise SystemExit("README.md has no %r ... %r section" % (begin, end))
    return text[:start + len(begin)] + "\n" + body + "\n" + text[stop:]


COMPATIBILITY_HEAD = """# Compatibility

<!-- Written by tools/readme.py from the registry, tox.ini,
tests/matrix-results.json, tests/cells-results.json and tests/gpu-results/. -->

One row per backport, one column per release. Releases compare by (major,
minor, micro), because patch releases carry real fixes (2.7.0 → 2.7.1,
2.9.0 → 2.9.1); local, pre-release and dev parts do not count, so
`2.10.0+cu128`, `2.10.0a0+git449b176` (source and NGC builds),
`2.10.0.dev20260101` and `2.10.0rc1` all count as 2.10.0. One exception: a
pre-release, dev or source build of a backport's first fixed release may
have been cut before the fix landed, so there the code decides, not the
version: a verified affected fingerprint is patched, a fixed one reads `not
needed`, anything else `unrecognised` with torch left as shipped. An NGC
`2.13.0a0+…` build cut before a 2.13.0 fix gets that fix; `status` and
`require()` say the same.
"""

# What each mark of the table means; the page lists the marks that occur.
LEGEND = {
    "✔ CI": "in CI (`tox`), on the real wheel of that release, the reproducer (for a fix "
            "of GPU code, its CPU check: [gpu.md](gpu.md)) fails with the upstream symptom "
            "under `TORCH_BACKPORTS_DISABLE=<name>` and passes with torch-backports.",
    "✔ all": "as **✔ ci**, and a `TORCH_BACKPORTS_STOCK_RUNS=all` run of CI's env for that "
             "release also saw the reproducer (or CPU check) fail stock with the upstream "
             "symptom and pass with torch-backports ([cells.md](cells.md) has what each run "
             "printed).",
    "✔ ci": "in CI, the reproducer passes with torch-backports; its stock run is made on "
            "the release marked **✔ CI** (2.13.0 where claimed), whose code the patch "
            "recognises by the same fingerprints ([ci.md](ci.md)).",
    "✔ m": "the same as **✔ CI**, by `tox -e matrix` (`tests/matrix-results.json` has what "
           "each reproducer printed, stock and fixed).",
    "fp": "`torch-backports status` on that release's wheel (`python tests/matrix.py "
          "--status-only VERSION`) accepted the fingerprint of the code the patch replaces; "
          "the reproducer was not run there.",
    "claimed": "in the backport's range, but neither its reproducer nor a status run has "
               "been made on that release.",
    "fixed CI": "the release ships the fix; in CI the reproducer passes and `status` says "
                "`not needed`, so torch-backports leaves that torch as shipped.",
    "fixed m": "the same as **fixed CI**, by `tox -e matrix`.",
    "fixed": "the release ships the fix, read from the wheel's fingerprint only.",
    "–": "the release does not have the bug (the code it lives in is older or absent); "
         "the backport is `not covered` there and touches nothing.",
    "GPU": "(after a mark) a GPU run (`tools/gpu_run.py`, recorded in `tests/gpu-results/`) "
           "saw the reproducer fail on stock torch and pass with torch-backports.",
}


def compatibility_page(catalogue: List[Backport]) -> str:
    rows = compatibility_rows(catalogue)
    table = compatibility_table(rows)
    marks = {mark for _, row in rows for mark, _ in row}
    if any(on_gpu for _, row in rows for _, on_gpu in row):
        marks.add("GPU")
    unknown = marks - set(LEGEND)
    if unknown:
        raise SystemExit("tools/readme.py: no legend for the marks %s" % sorted(unknown))
    legend = "\n".join(textwrap.fill("* **%s**: %s" % (mark, LEGEND[mark]), width=76,
                                      subsequent_indent="  ", break_long_words=False,
                                      break_on_hyphens=False)
                        for mark in LEGEND if mark in marks)
    ci = ", ".join(format_release(r) for r in sorted(ci_plan.ci_releases()))
    tail = textwrap.fill(
        "CI runs torch %s and an env without torch; the unit tests run on Python 3.9 – 3.13 "
        "against a small fake `torch`. `tox -e matrix` and `TORCH_BACKPORTS_STOCK_RUNS=all "
        "tox` make the stock run on every release." % ci, width=76, break_long_words=False,
        break_on_hyphens=False)
    return "%s\n%s\n\n%s\n\n%s\n" % (COMPATIBILITY_HEAD, table, legend, tail)


BACKPORTS_PAGE = ROOT / "docs" / "backports.md"
COMPATIBILITY_PAGE = ROOT / "docs" / "compatibility.md"


def generated(text: str) -> str:
    """`text` (the README) with its generated section written anew."""
    return replace_section(text, "fixes", fixes_table(backports()))


def pages() -> Dict[Path, str]:
    """Each page this writes, as it should read now."""
    catalogue = backports()
    return {README: generated(README.read_text(encoding="utf-8")),
            BACKPORTS_PAGE: backports_page(catalogue),
            COMPATIBILITY_PAGE: compatibility_page(catalogue)}


def main(argv: List[str]) -> int:
    stale = []
    for path, wanted in pages().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if wanted == current:
            continue
        if "--check" in argv:
            stale.append(path.relative_to(ROOT).as_posix())
        else:
            path.write_text(wanted, encoding="utf-8")
    if stale:
        print("%s differ from the catalogue: run python tools/readme.py" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
