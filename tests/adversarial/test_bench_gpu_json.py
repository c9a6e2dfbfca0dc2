"""``benchmarks/bench_gpu.py --json FILE`` (issue 41, Benchmarks): another device's or size's figures are never
replaced (each record is kept beside the new one, keyed by device, size, response length and commit); a file that
is not a results file (not JSON, a list, a folder, a FIFO, a link) is ``error: ...`` naming it, exit 2, before
anything runs, and the file is left as it was."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks" / "bench_gpu.py"
sys.path.insert(0, str(REPO / "benchmarks"))

H200 = {"device": {"gpu": "1 x NVIDIA H200", "driver": "580.159.04"}, "device_line": "H200", "commit": "32125f1",
        "size": "qwen2.5-0.5b", "response_length": 1024,
        "modes": {"sync": {"steps_per_second": 0.0267, "steps_averaged": 1}}}


def test_a_record_of_another_device_or_size_is_kept_beside_the_new_one(tmp_path):
    from gpu_results import load_records, merge_record, record_key, save_records

    path = tmp_path / "bench_gpu.json"
    save_records(path, merge_record({}, H200))
    kept = json.dumps(load_records(path)[record_key(H200)], sort_keys=True)
    for other in ({**H200, "device": {"gpu": None, "backend": "cpu"}, "modes": {}},  # an empty rehearsal record
                  {**H200, "size": "qwen2.5-1.5b", "modes": {"sync": {"steps_per_second": 0.01}}},
                  {**H200, "response_length": 512}, {**H200, "commit": "abc1234"}):
        save_records(path, merge_record(load_records(path), other))
        records = load_records(path)
        assert json.dumps(records[record_key(H200)], sort_keys=True) == kept
        assert record_key(other) in records
    assert len(load_records(path)) == 5


def test_the_same_device_size_length_and_commit_adds_modes_and_keeps_the_earlier_ones(tmp_path):
    from gpu_results import load_records, merge_record, record_key, save_records

    path = tmp_path / "bench_gpu.json"
    save_records(path, merge_record({}, H200))
    later = {**H200, "modes": {"delayed_4_0": {"steps_per_second": 0.06, "steps_averaged": 8}}}
    save_records(path, merge_record(load_records(path), later))
    assert set(load_records(path)[record_key(H200)]["modes"]) == {"sync", "delayed_4_0"}


def test_a_file_of_the_first_layout_is_kept_as_a_record(tmp_path):
    from gpu_results import load_records, merge_record, record_key, save_records

    path = tmp_path / "bench_gpu.json"
    path.write_text(json.dumps(H200))  # one record at the top level, as bench_gpu wrote it before
    save_records(path, merge_record(load_records(path), {**H200, "size": "scale-cpu", "modes": {}}))
    assert load_records(path)[record_key(H200)]["modes"] == H200["modes"]


def make_fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def make_link(path: Path) -> Path:
    target = path.parent / "elsewhere.json"
    target.write_text(json.dumps({"format": "verl-ext bench_gpu results 2", "records": {}}))
    path.symlink_to(target)
    return path


BAD_FILES = {
    "not JSON": (lambda path: path.write_text("{ cut short") and path, "not JSON"),
    "a list": (lambda path: path.write_text("[1, 2]") and path, "a JSON list, not a bench_gpu results file"),
    "a number": (lambda path: path.write_text("3") and path, "a JSON int, not a bench_gpu results file"),
    "records not objects": (lambda path: path.write_text('{"records": {"a": 1}}') and path, "'records' must map"),
    "a folder": (lambda path: path.mkdir() or path, "cannot be the bench_gpu results file: it is a folder"),
    "a FIFO": (make_fifo, "cannot be the bench_gpu results file: it is a FIFO"),
    "a link": (make_link, "a symbolic link"),
    "in no folder": (lambda path: path.parent / "missing" / "bench_gpu.json", "does not exist or is not a folder"),
    "below a file": (lambda path: path.parent.joinpath("a_file").write_text("x") and path.parent / "a_file" / "b.json",
                     "does not exist or is not a folder"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_json_that_is_not_a_results_file_is_refused_naming_it(tmp_path, case):
    make, message = BAD_FILES[case]
    path = make(tmp_path / "bench_gpu.json")
    before = sorted((p.name, p.stat().st_size if p.is_file() and not p.is_symlink() else None) for p in tmp_path.iterdir())
    result = subprocess.run([sys.executable, str(BENCH), "--modes", "sync", "--steps", "3", "--skip-losses",
                             "--json", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"error: --json {path}"), result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    after = sorted((p.name, p.stat().st_size if p.is_file() and not p.is_symlink() else None) for p in tmp_path.iterdir())
    assert after == before


def test_without_a_gpu_nothing_is_written(tmp_path):
    from verl_ext.gpu.device import gpu_unavailable_reason

    if gpu_unavailable_reason() is None:
        pytest.skip("this machine has a CUDA GPU and vLLM")
    path = tmp_path / "bench_gpu.json"
    path.write_text(json.dumps(H200))
    result = subprocess.run([sys.executable, str(BENCH), "--modes", "sync", "--steps", "3", "--skip-losses",
                             "--json", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(path.read_text()) == H200
