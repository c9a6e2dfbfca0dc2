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


def _gpu_record(device: dict, device_line: str, modes: dict) -> dict:
    split = {"gen": 2.0, "update_weights": 0.1, "old_log_prob": 0.0, "ref": 0.0, "adv": 0.0, "update_actor": 1.5,
             "step": 4.0}
    return {"device": device, "device_line": device_line, "commit": "abc1234", "size": "qwen2.5-0.5b",
            "response_length": 512,
            "modes": {name: {"steps_averaged": averaged, "steps_per_second": rate, "tokens_per_second": 4000.0,
                             "actor_mfu": 0.125, "phase_seconds": {**split, "gen": gen}, "push_seconds": 0.4,
                             "peak_gpu_gib": 60.5, "run": "phased", "phases_asked": "sync:4,delayed_4_0:12"}
                      for name, (averaged, rate, gen) in modes.items()}}


def test_bench_gpu_json_is_rendered_through_gpu_results_one_table_per_record(tmp_path):
    """A synthetic bench_gpu.json (gpu_results' layout, written by its own writer) in a results folder of its own:
    one table per record, each mode's figures, its steps/s against sync's, and no 'not measured yet' line."""
    from gpu_results import merge_record, save_records

    h200 = _gpu_record({"gpu": "1 x NVIDIA H200", "driver": "580.159.04"}, "one NVIDIA H200 140 GiB",
                       {"sync": (3, 0.25, 2.5), "delayed_4_0": (8, 0.5, 1.25), "delayed_4_1_overlap": (8, 0.625, 0.75)})
    rehearsal = _gpu_record({"gpu": None, "backend": "cpu"}, "CPU backend (rehearsal: no GPU figure)",
                            {"sync": (4, 0.2, 3.0)})
    save_records(tmp_path / "bench_gpu.json", merge_record(merge_record({}, h200), rehearsal))
    _record(tmp_path, "overlap")  # a record of the other kind beside it
    block = results_page.render(tmp_path)
    assert "| steps/s | 1.20 |" in block
    assert block.count("| mode | steps averaged | steps/s | x sync | tokens/s | actor MFU |") == 2
    assert "| sync | 3 | 0.25 | – | 4000.0 | 12.5% | 2.5 | 1.5 | 0.1 | 60.5 |" in block
    assert "| delayed_4_0 | 8 | 0.5 | 2.00x | 4000.0 | 12.5% | 1.25 | 1.5 | 0.1 | 60.5 |" in block
    assert "| delayed_4_1_overlap | 8 | 0.625 | 2.50x |" in block
    assert "one NVIDIA H200 140 GiB, commit abc1234" in block and "CPU backend (rehearsal" in block
    assert "`python benchmarks/bench_gpu.py --phases sync:4,delayed_4_0:12`" in block
    assert "Not measured yet" not in block
    assert block.index("| sync | 3 |") < block.index("| delayed_4_0 | 8 |")


def test_without_a_gpu_record_the_gpu_section_says_the_comparison_is_not_measured_yet(tmp_path):
    from gpu_results import merge_record, save_records

    assert "Not measured yet" in results_page.render(tmp_path)  # no bench_gpu.json at all
    save_records(tmp_path / "bench_gpu.json",
                 merge_record({}, _gpu_record({"gpu": None, "backend": "cpu"}, "CPU backend", {"sync": (4, 0.2, 3.0)})))
    block = results_page.render(tmp_path)
    assert "Not measured yet" in block and f"]({results_page.ONE_LEASE})" in block
    assert "| sync | 4 | 0.2 | – |" in block  # the rehearsal is still shown


def test_the_page_links_the_one_lease_command_while_bench_gpu_json_is_absent():
    if (results_page.RESULTS / results_page.GPU_FILE).exists():
        pytest.skip("benchmarks/results/bench_gpu.json exists")
    page = results_page.PAGE.read_text(encoding="utf-8")
    assert "Not measured yet" in page and "gpu.md#measuring-delayed_sync-against-sync-in-one-lease" in page


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "a JSON list, not a bench_gpu results file"),
    ("{not json", "not JSON"),
    ('{"records": {"k": {"modes": {"sync": {"steps_per_second": "fast"}}}}}', "modes: sync: steps_per_second: a number"),
    ('{"records": {"k": {"modes": [1]}}}', "modes: an object of modes"),
    ('{"records": {"k": {"modes": {"sync": {"phase_seconds": {"gen": "x"}}}}}}', "sync: phase_seconds"),
])
def test_a_bench_gpu_json_that_is_not_one_is_refused_naming_it_and_the_cli_exits_2(tmp_path, content, message):
    (tmp_path / "bench_gpu.json").write_text(content)
    with pytest.raises(results_page.RecordError, match=message) as error:
        results_page.render(tmp_path)
    assert str(tmp_path / "bench_gpu.json") in str(error.value)
    page = tmp_path / "results.md"
    page.write_text(f"{results_page.BEGIN}\n{results_page.END}\n")
    result = subprocess.run([sys.executable, str(SCRIPT), "--results", str(tmp_path), "--page", str(page)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert page.read_text() == f"{results_page.BEGIN}\n{results_page.END}\n"


def test_the_results_folder_and_page_are_options_of_the_command_line(tmp_path):
    _record(tmp_path, "overlap", figures={"steps/s": "1.20"})
    page = tmp_path / "results.md"
    page.write_text(f"intro\n{results_page.BEGIN}\n{results_page.END}\n")
    arguments = ["--results", str(tmp_path), "--page", str(page)]
    assert results_page.main([*arguments, "--check"]) == 1
    assert results_page.main(arguments) == 0
    assert "| steps/s | 1.20 |" in page.read_text() and "Not measured yet" in page.read_text()
    assert results_page.main([*arguments, "--check"]) == 0


def test_record_never_takes_the_name_of_bench_gpus_results_file(tmp_path, monkeypatch):
    monkeypatch.setattr(results_page, "RESULTS", tmp_path / "results")
    log = tmp_path / "log"
    log.write_text('HEADLINE {"a": "1"}\n')
    arguments = ["record", "bench_gpu", str(log), "--title", "t", "--command", "c", "--machine", "m"]
    assert results_page.main(arguments) == 2
    assert not (tmp_path / "results").exists()
