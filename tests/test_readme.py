"""The README and the reference pages say what the catalogue holds: the
README's list, docs/backports.md and docs/compatibility.md equal what
tools/readme.py writes from the backport modules, and each count in the
README's prose ("torch 2.13.0 … needs sixteen of the backports") equals the
registry's."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import readme  # noqa: E402
from torch_backports import _registry  # noqa: E402
from torch_backports._versions import release_of  # noqa: E402

TEXT = readme.README.read_text(encoding="utf-8")
PROSE = " ".join(TEXT.split())

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def in_words(n: int) -> str:
    if n < 20:
        return ONES[n]
    tens, ones = divmod(n, 10)
    return TENS[tens - 2] + ("-" + ONES[ones] if ones else "")


def needed_by(version: str) -> int:
    release = release_of(version)
    return sum(_registry.load(name).needed_by(release) for name in _registry.names())


@pytest.mark.parametrize("page", ["README.md", "docs/backports.md", "docs/compatibility.md"])
def test_generated_pages_match_the_catalogue(page):
    path = ROOT / page
    assert readme.pages()[path] == path.read_text(encoding="utf-8"), (
        "%s differs from the catalogue: run python tools/readme.py" % page)


def test_every_backport_has_its_line_and_entry():
    entries = (ROOT / "docs" / "backports.md").read_text(encoding="utf-8")
    for name in _registry.names():
        backport = _registry.load(name)
        assert backport.readme_symptom.strip() and backport.readme_fix.strip(), name
        # One line of the README's table: short enough to read at a glance.
        assert backport.headline.strip() and "\n" not in backport.headline, name
        assert len(backport.headline) <= 100, (name, len(backport.headline))
        assert "| [`%s`](docs/backports.md#%s) |" % (name, name) in TEXT, name
        assert "\n## `%s`\n" % name in entries, name


def test_a_removed_entry_is_noticed():
    # The check above would catch a README row deleted by hand.
    row = next(line for line in TEXT.splitlines()
               if line.startswith("| [`fx-graph-cache-pickling`]"))
    assert readme.generated(TEXT.replace(row + "\n", "")) != TEXT.replace(row + "\n", "")


def test_the_legend_explains_only_the_marks_the_table_uses():
    page = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    table = [line for line in page.splitlines() if line.startswith("| `")]
    cells = {c.strip() for line in table for c in line.strip("|").split("|")[1:]}
    used = {c[:-4] if c.endswith(" GPU") else c for c in cells}
    explained = set(re.findall(r"^\* \*\*(.+?)\*\*:", page, re.M))
    assert explained == used | ({"GPU"} if any(c.endswith(" GPU") for c in cells) else set())


def test_the_readme_fits_a_few_screens():
    assert len(TEXT.splitlines()) <= 300


CLAIM = re.compile(r"torch (\d+\.\d+\.\d+)\b[^.]*?\bneeds ([a-z]+(?:-[a-z]+)?|\d+) of the backports")


def test_counts_in_the_prose_match_the_registry():
    claims = CLAIM.findall(PROSE)
    assert claims, "the quick start says how many backports a release needs"
    for version, count in claims:
        assert count in (in_words(needed_by(version)), str(needed_by(version))), (
            "README says torch %s needs %s of the backports; the registry says %d"
            % (version, count, needed_by(version)))


NUMBER = r"(\d+|[a-z]+(?:-[a-z]+)?)"
# "torch 2.10.0, whose nine backports ...": a count of backports said of a release.
COUNT_OF = re.compile(r"torch (\d+\.\d+\.\d+)\b[^.]*?\b" + NUMBER + r" (?:claimed )?backports\b")


def words_or_digits(n: int) -> tuple:
    return in_words(n), str(n)


def is_number(word: str) -> bool:
    return word.isdigit() or word.split("-")[0] in ONES + TENS


def test_every_count_of_a_release_s_backports_matches_the_registry():
    # The trial that found "nine" and "fourteen" said of 2.10.0 in one README.
    for version, count in COUNT_OF.findall(PROSE):
        if is_number(count):
            assert count in words_or_digits(needed_by(version)), (
                "README says torch %s has %s backports; the registry says %d"
                % (version, count, needed_by(version)))


def test_the_quick_start_counts_the_reproducers_it_runs():
    quick = " ".join(TEXT.split("## Quick start", 1)[1].split("\n## ", 1)[0].split())
    version = re.search(r"torch==(\d+\.\d+\.\d+)", quick).group(1)
    counts = [c for c in re.findall(r"\b" + NUMBER + r" reproducers\b", quick) if is_number(c)]
    assert counts, "the quick start says how many reproducers verify ran"
    for count in counts:
        assert count in words_or_digits(needed_by(version)), (count, version)


def test_a_wrong_count_is_noticed():
    wrong = "torch 2.10.0, whose nine backports make it the release changed most"
    assert COUNT_OF.findall(wrong) == [("2.10.0", "nine")]
    assert "nine" not in words_or_digits(needed_by("2.10.0"))


def test_the_release_said_to_need_the_most_does():
    found = re.search(r"torch (\d+\.\d+\.\d+)\b[^.]*?the most of any release", PROSE)
    assert found, "the quick start says which release needs the most backports"
    most = max(needed_by(version) for version in readme.COLUMNS)
    assert needed_by(found.group(1)) == most


@pytest.mark.parametrize("n, words", [(16, "sixteen"), (21, "twenty-one"), (30, "thirty")])
def test_in_words(n, words):
    assert in_words(n) == words
