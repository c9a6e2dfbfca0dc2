"""The output folder is replaced whole or not at all (issue 12): failures at every stage of a run, including
``kill -9``, leave the previous outputs and their manifest as they were; a bad ``--local_save_dir`` is
refused before anything is converted; the run scripts re-prepare a folder that is not one complete run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from data_prep import gsm8k, guru
from data_prep.manifest import MANIFEST_NAME, incompleteness
from data_prep.save_folder import PARTIAL_PREFIX
from tests.adversarial.save_folders import FIXTURES, raw_gsm8k, snapshot

REPO = Path(__file__).resolve().parents[2]


def run(save_dir: Path, raw: Path, capsys, *flags: str):
    status = gsm8k.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(raw), *flags])
    return status, capsys.readouterr()


def test_a_failure_while_writing_the_test_split_leaves_the_previous_pair(tmp_path, capsys, previous, monkeypatch):
    save_dir, before = previous
    from data_prep import verl_rows

    real_write = verl_rows.write_parquet

    def write_then_fail(rows, path):
        if Path(path).name == "test.parquet":
            raise OSError(28, "No space left on device")
        return real_write(rows, path)

    monkeypatch.setattr(verl_rows, "write_parquet", write_then_fail)
    status, captured = run(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert status == 2 and "cannot write test.parquet (No space left on device)" in captured.err
    assert snapshot(save_dir) == before
    assert not list(save_dir.glob(f"{PARTIAL_PREFIX}*"))  # the partial folder is cleaned up


def test_ctrl_c_during_conversion_leaves_the_previous_pair(tmp_path, capsys, previous, monkeypatch):
    save_dir, before = previous
    calls = []

    def interrupted(data, record, report):
        calls.append(record.row)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_convert(data, record, report)

    real_convert = gsm8k.convert
    monkeypatch.setattr(gsm8k, "convert", interrupted)
    status, captured = run(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert status == 130 and "interrupted" in captured.err and "Traceback" not in captured.err
    assert snapshot(save_dir) == before


def test_a_new_run_replaces_the_pair_and_the_manifest_together(tmp_path, capsys, previous):
    save_dir, before = previous
    status, _ = run(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert status == 0
    after = snapshot(save_dir)
    assert set(after) == set(before) == {"train.parquet", "test.parquet", MANIFEST_NAME}
    assert all(after[name] != before[name] for name in after)
    manifest = json.loads((save_dir / MANIFEST_NAME).read_text())
    assert manifest["files"]["train.parquet"]["rows"] == 5
    assert incompleteness(save_dir, ["train.parquet", "test.parquet"]) is None


KILL_AT = {
    # where the child kills itself with SIGKILL: after writing a parquet file into the partial folder, or
    # between the renames into place (the only instant a folder can hold files of two runs): after the third
    # rename (old manifest out, old train.parquet out, new train.parquet in)
    "while writing": "data_prep.verl_rows",
    "while renaming into place": "os",
}


@pytest.mark.parametrize("moment", sorted(KILL_AT))
def test_kill_9_leaves_the_previous_pair_or_a_folder_the_check_rejects(tmp_path, previous, moment):
    save_dir, before = previous
    raw = raw_gsm8k(tmp_path, 5)
    patch = {
        "while writing": (
            "import data_prep.verl_rows as m; real = m.write_parquet\n"
            "def write(rows, path):\n"
            "    real(rows, path); open(path, 'r+b').truncate(10); os.kill(os.getpid(), signal.SIGKILL)\n"
            "m.write_parquet = write\n"
        ),
        "while renaming into place": (
            "real = os.replace; done = []\n"
            "def replace(a, b):\n"
            "    real(a, b); done.append(b)\n"
            "    if len(done) == 3: os.kill(os.getpid(), signal.SIGKILL)\n"
            "os.replace = replace\n"
        ),
    }[moment]
    code = (
        "import os, signal, sys\n" + patch + "from data_prep import gsm8k\n"
        f"sys.exit(gsm8k.main(['--local_save_dir', {str(save_dir)!r}, '--local_dataset_path', {str(raw)!r}]))\n"
    )
    child = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()
    if moment == "while writing":
        assert snapshot(save_dir) == before  # untouched, manifest included
        assert incompleteness(save_dir, ["train.parquet", "test.parquet"]) is None
    else:
        # new train.parquet, old test.parquet, no manifest: the check refuses the pair
        after = snapshot(save_dir)
        assert MANIFEST_NAME not in after
        assert after["train.parquet"] != before["train.parquet"] and after["test.parquet"] == before["test.parquet"]
        assert "no readable data_prep_manifest.json" in incompleteness(save_dir, ["train.parquet", "test.parquet"])
    # the killed run's hidden folder is removed by the next run, which completes normally
    assert list(save_dir.glob(f"{PARTIAL_PREFIX}*"))
    assert gsm8k.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(raw)]) == 0
    assert not list(save_dir.glob(f"{PARTIAL_PREFIX}*"))
    assert incompleteness(save_dir, ["train.parquet", "test.parquet"]) is None


# --- the save folder, refused before any conversion ---------------------------------------------------------

def test_save_dir_that_is_a_file_or_below_a_file(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for save_dir in (a_file, a_file / "sub"):
        status, captured = run(save_dir, FIXTURES / "gsm8k", capsys)
        why = "it is a file" if save_dir == a_file else f"it is below {a_file}, which is a file"
        assert status == 2 and f"error: --local_save_dir {save_dir} cannot be the save folder: {why}" in captured.err
        assert "rows in" not in captured.out  # refused before converting
    assert a_file.read_text() == "x"


def test_save_dir_equal_to_or_inside_the_raw_folder_is_refused(tmp_path, capsys):
    raw = raw_gsm8k(tmp_path, 3)
    before = snapshot(raw)
    (tmp_path / "link").symlink_to(raw)
    for save_dir in (raw, raw / "out", tmp_path / "link"):
        status, captured = run(save_dir, raw, capsys)
        assert status == 2 and "is (or is inside) the raw input" in captured.err
        assert "rows in" not in captured.out
    assert snapshot(raw) == before and not (raw / "out").exists()


def test_a_folder_where_an_output_goes_is_refused_before_anything_moves(tmp_path, capsys, previous):
    save_dir, before = previous
    (save_dir / "test.parquet").unlink()
    (save_dir / "test.parquet").mkdir()
    status, captured = run(save_dir, raw_gsm8k(tmp_path, 3), capsys)
    assert status == 2 and "['test.parquet'] are folders" in captured.err
    assert snapshot(save_dir)["train.parquet"] == before["train.parquet"]
    assert MANIFEST_NAME in snapshot(save_dir)


def test_guru_save_dir_over_or_beside_its_input_file_is_refused(tmp_path, capsys, guru_file):
    status = guru.main(["--local_save_dir", str(guru_file), "--local_dataset_path", str(guru_file)])
    assert status == 2 and "cannot be the save folder: it is a file" in capsys.readouterr().err
    named_like_an_output = guru_file.rename(guru_file.with_name("train.parquet"))  # a path, not a folder
    before = snapshot(tmp_path)
    status = guru.main(["--local_save_dir", str(tmp_path), "--local_dataset_path", str(named_like_an_output)])
    assert status == 2 and "holds the raw input file train.parquet" in capsys.readouterr().err
    assert snapshot(tmp_path) == before


def test_a_raw_folder_inside_the_save_folder_is_fine(tmp_path, capsys):
    save_dir = tmp_path / "data"
    save_dir.mkdir()
    raw = raw_gsm8k(save_dir, 3)  # data/raw/{train,test}.jsonl
    before = snapshot(raw)
    status, _ = run(save_dir, raw, capsys)
    assert status == 0 and snapshot(raw) == before and (save_dir / "train.parquet").exists()


@pytest.fixture
def guru_file(tmp_path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = json.loads((FIXTURES / "guru" / "math_rows.json").read_text())
    path = tmp_path / "math__combined.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


# --- the run scripts' check ----------------------------------------------------------------------------------

def test_run_scripts_prepare_again_when_the_pair_is_not_one_complete_run(tmp_path, capsys):
    """The run scripts' launcher (verl_ext.experiments.modes.prepare_data) with the real data_prep (a subprocess)."""
    from dataclasses import replace

    from verl_ext.experiments.environment import read_environment
    from verl_ext.experiments.modes import Tools, prepare_data
    from verl_ext.experiments.profiles import profile_named

    environment = read_environment({"DATA_DIR": str(tmp_path / "data"), "RAW_DATA_PATH": str(FIXTURES / "gsm8k")})
    # --drop_duplicates: passed through to the manifest check and to data_prep
    profile = replace(profile_named("gsm8k"), data_prep_args=("--drop_duplicates",))

    def prepare() -> str:
        prepare_data(profile, environment, Tools(environ={**os.environ, "PYTHON": sys.executable}))
        return capsys.readouterr().err

    assert "preparing gsm8k" in prepare()
    assert "preparing gsm8k" not in prepare()  # complete: used as it is
    folder = tmp_path / "data" / "gsm8k"
    (folder / "test.parquet").write_bytes((folder / "train.parquet").read_bytes())  # a pair from two runs
    log = prepare()
    assert "test.parquet differs from the one the last complete run wrote" in log and "preparing gsm8k" in log
    # (other flags than the manifest's: test_the_manifest_check_compares_the_flags_that_decide_the_rows)


def test_the_manifest_check_compares_the_flags_that_decide_the_rows(tmp_path, capsys):
    from data_prep import manifest, toolace

    save_dir = tmp_path / "toolace"
    flags = ["--test_size", "1", "--max_train_size", "2"]
    assert toolace.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(FIXTURES / "toolace"), *flags]) == 0
    files = [str(save_dir), "train.parquet", "test.parquet"]
    assert manifest.main([*files, "--dataset", "toolace", "--args=--test_size 1 --max_train_size=2"]) == 0
    assert manifest.main([*files]) == 0  # no flags given: only completeness
    capsys.readouterr()
    assert manifest.main([*files, "--dataset", "toolace", "--args=--test_size 1"]) == 1
    assert "prepared with other options" in capsys.readouterr().out
    assert manifest.main([str(save_dir), "train.parquet", "math500.parquet"]) == 1
    assert "math500.parquet is not part of the last complete output" in capsys.readouterr().out
