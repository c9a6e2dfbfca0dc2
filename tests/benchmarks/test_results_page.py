"""docs/results.md's generated block is the rendering of benchmarks/results/ (so no figure there is copied by hand),
and benchmarks/results_page.py turns a benchmark's saved output into a record, refusing what is not one."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import results_page  # noqa: E402 -- benchmarks/results_page.py

SCRIPT = REPO / "benchmarks" / "results_page.py"


def test_the_generated_block_of_docs_results_md_is_up_to_date():
    page = results_page.PAGE.read_text(encoding="utf-8")
    assert results_page.page_with_block(page, results_page.render()) == page, \
        "docs/results.md is stale: run python benchmarks/results_page.py"


def test_the_gpu_figures_on_the_page_are_read_from_the_kept_metrics_files():
    """The 0.5B H200 rows come from tests/fixtures/gpu_bench: sync's second step 37.4 s (generation 22.1 s inside
    it), delayed_sync (4, 0)'s first step preceded by the interval's 53.1 s generation, lags 0 then 1."""
    block = results_page.render()
    assert "| sync | 2 | 37.4 | 22.1 | 14.7 |" in block
    assert "| delayed_sync (4, 0) | 1 | 16.0 | 0.00939 | 15.9 | – | 53.1 | 0 |" in block
    assert "| delayed_sync (4, 0) | 2 | 15.8 |" in block and "| 1 | 4.0e-06 |" in block


def _record(folder: Path, name: str, **fields) -> Path:
    record = {"title": "t", "date": "2026-11-28", "machine": "m", "commit": "abc1234", "command": "python x.py",
              "figures": {"steps/s": "1.20"}}
    record.update(fields)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({k: v for k, v in record.items() if v is not None}))
    return path


def test_a_changed_record_makes_the_page_stale(tmp_path):
    _record(tmp_path, "overlap", figures={"steps/s": "1.20"})
    page = results_page.page_with_block(f"intro\n{results_page.BEGIN}\n{results_page.END}\nend\n",
                                        results_page.render(tmp_path))
    assert "| steps/s | 1.20 |" in page and page.startswith("intro\n") and page.endswith("end\n")
    _record(tmp_path, "overlap", figures={"steps/s": "1.35"})
    assert results_page.page_with_block(page, results_page.render(tmp_path)) != page


@pytest.mark.parametrize("fields, message", [
    ({"commit": None}, "commit: a non-empty string is required"),
    ({"date": ""}, "date: a non-empty string is required"),
    ({"figures": {"steps/s": 1.2}}, "figures: a non-empty object of strings is required"),
    ({"metrics_files": {"a": "x.jsonl"}}, "figures / metrics_files: exactly one of them is required"),
    ({"figures": None, "metrics_files": {"a": "x.jsonl"}}, "columns: a non-empty list of [column, metric name] pairs"),
])
def test_a_record_that_is_not_one_is_refused_naming_the_file_and_field(tmp_path, fields, message):
    path = _record(tmp_path, "bad", **fields)
    with pytest.raises(results_page.RecordError, match=message.replace("[", r"\[").replace("]", r"\]")) as error:
        results_page.render(tmp_path)
    assert str(path) in str(error.value)


def test_a_page_without_its_markers_is_refused():
    with pytest.raises(results_page.RecordError, match="must hold the markers"):
        results_page.page_with_block("no markers here\n", "block")


def test_record_reads_the_headline_and_the_load_of_a_benchmarks_output():
    log = ('{"summary": {}}\n2 CPUs; load average at start 1.2, 1.0, 0.9, at end 2.1, 1.5, 1.0\n'
           'HEADLINE {"(1,1) steps/s": "0.87 -> 1.20", "speed-up": "x1.38"}\n')
    figures, load = results_page.record_from_log(log, "overlap.log")
    assert figures == {"(1,1) steps/s": "0.87 -> 1.20", "speed-up": "x1.38"}
    assert load == "1.2, 1.0, 0.9 at start, at end 2.1, 1.5, 1.0"
    with pytest.raises(results_page.RecordError, match="overlap.log: no HEADLINE line"):
        results_page.record_from_log("a report without its last line\n", "overlap.log")


def test_the_command_line_refuses_a_missing_log_and_an_existing_record_with_exit_2(tmp_path):
    existing = next(results_page.RESULTS.glob("*.json")).stem
    for name, log in ((existing, tmp_path / "log"), ("new_record", tmp_path / "missing.log")):
        (tmp_path / "log").write_text('HEADLINE {"a": "1"}\n')
        result = subprocess.run([sys.executable, str(SCRIPT), "record", name, str(log), "--title", "t", "--command",
                                 "c", "--machine", "m"], capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert not (results_page.RESULTS / "new_record.json").exists()


def test_record_writes_a_whole_record_that_the_page_renders(tmp_path, monkeypatch):
    monkeypatch.setattr(results_page, "RESULTS", tmp_path / "results")
    log = tmp_path / "overlap.log"
    log.write_text('2 CPUs; load average at start 1.0, 1.0, 1.0, at end 2.0, 1.0, 1.0\nHEADLINE {"speed-up": "x1.38"}\n')
    arguments = ["record", "overlap_1_1", str(log), "--title", "overlap at (1, 1)", "--command", "python b.py",
                 "--machine", "2-core CPU", "--commit", "abc1234", "--date", "2026-11-28"]
    assert results_page.main(arguments) == 0
    record = json.loads((tmp_path / "results" / "overlap_1_1.json").read_text())
    assert record["figures"] == {"speed-up": "x1.38"} and record["commit"] == "abc1234"
    assert "| speed-up | x1.38 |" in results_page.render(tmp_path / "results")
    assert results_page.main(arguments) == 2  # never replaced
    assert [path.name for path in (tmp_path / "results").iterdir()] == ["overlap_1_1.json"]  # no temporary left
