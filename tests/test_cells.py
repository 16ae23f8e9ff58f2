"""tools/cells.py: what a run of the reproducers printed, recorded cell by
cell, and docs/cells.md written from that record."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import cells  # noqa: E402


def write(folder, release, name, run, text):
    path = folder / release / ("%s.%s.txt" % (name, run))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def test_a_folder_is_read_by_release_and_backport(tmp_path):
    write(tmp_path, "2.13.0", "a-fix", "stock", "crashed: TypeError\nTypeError: Multiple dispatch")
    write(tmp_path, "2.13.0", "a-fix", "with_torch_backports", "ok")
    write(tmp_path, "2.13.0", "a-fix", "state", "not needed")
    write(tmp_path, "2.11.0", "gpu-fix", "cpu_check_stock", "crashed: AssertionError")
    found = cells.read_folder(tmp_path, "2026-12-07")
    assert found == {
        "2.13.0": {"a-fix": {"date": "2026-12-07", "stock": "crashed: TypeError",
                             "stock_printed": "TypeError: Multiple dispatch",
                             "with_torch_backports": "ok"}},
        "2.11.0": {"gpu-fix": {"date": "2026-12-07", "cpu_check_stock": "crashed: AssertionError"}},
    }
    assert cells.proven(found, "2.13.0", "a-fix", cpu_check=False)
    assert not cells.proven(found, "2.11.0", "gpu-fix", cpu_check=True)  # no fixed run
    assert not cells.proven(found, "2.12.1", "a-fix", cpu_check=False)


def test_a_new_run_replaces_a_backports_cell_whole_and_keeps_the_rest():
    old = {"2.13.0": {"a-fix": {"date": "1", "stock": "crashed: X", "with_torch_backports": "ok"},
                      "b-fix": {"date": "1", "stock": "crashed: Y"}},
           "2.9.1": {"a-fix": {"date": "1", "stock": "crashed: X"}}}
    new = {"2.13.0": {"a-fix": {"date": "2", "with_torch_backports": "failed: 1"}},
           "2.10.0": {"a-fix": {"date": "2", "stock": "crashed: X"}}}
    merged = cells.merge(old, new)
    assert list(merged) == ["2.9.1", "2.10.0", "2.13.0"]
    assert merged["2.13.0"]["a-fix"] == {"date": "2", "with_torch_backports": "failed: 1"}
    assert merged["2.13.0"]["b-fix"] == old["2.13.0"]["b-fix"]
    assert old["2.13.0"]["a-fix"]["stock"] == "crashed: X"  # the record read is not changed


def test_the_page_shows_each_run_and_escapes_table_cells():
    text = cells.page({"2.12.1": {"gpu-fix": {
        "date": "2026-12-07", "stock": "skipped: needs a CUDA GPU",
        "with_torch_backports": "skipped: needs a CUDA GPU",
        "with_torch_backports_printed": "skipped: needs a CUDA GPU",
        "cpu_check_stock": "crashed: AssertionError",
        "cpu_check_stock_printed": "AssertionError: a | b", "cpu_check_with_torch_backports": "ok"}}})
    assert "| 2.12.1 | reproducer | skipped: needs a CUDA GPU | skipped: needs a CUDA GPU |" in text
    assert ("| 2.12.1 | CPU check | crashed: AssertionError: a \\| b | ok | 2026-12-07 |"
            in text)


def test_docs_cells_is_what_the_record_gives():
    assert cells.main(["--check"]) == 0, "run python tools/cells.py"
