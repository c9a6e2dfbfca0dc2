"""The assets builder replaces only what verl-ext wrote, as its manifest lists it (issue 41, the scale and tiny
assets builder): a folder whose ``manifest.json`` merely looks like verl-ext's, or a real assets folder a user added
files to, is refused with ``--force`` and with another seed, naming the files, and every file is left as it was.
An ``--out`` below a file, a place that cannot be written, a write that fails half-way (a full disk), a count that
cannot be held in memory, a build larger than the memory available and model dimensions that cannot form a model
are each refused with ``error: ...`` and exit 2 (ValueError naming the field from Python), before the build."""

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.tiny import assets
from verl_ext.tiny.assets import build_tiny_assets, main as tiny_assets_main
from verl_ext.tiny.sizes import SIZES, TinyModelSize, build_memory_bytes, parameter_count

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--train-examples", "4", "--val-examples", "2"]


def contents(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def refused(capsys, argv) -> str:
    assert tiny_assets_main([*argv, *SMALL]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("built") / "assets"
    build_tiny_assets(folder, train_examples=4, val_examples=2)
    return folder


def copy_of(built: Path, where: Path) -> Path:
    import shutil

    return Path(shutil.copytree(built, where / "assets"))


def test_a_manifest_that_merely_looks_like_ours_does_not_get_the_users_files_deleted(tmp_path, capsys):
    folder = tmp_path / "project"
    (folder / "chapters").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"files": {}, "recipe": {"mine": True}}))
    (folder / "thesis.tex").write_text("three years of work\n")
    (folder / "chapters" / "one.tex").write_text("keep me\n")
    before = contents(folder)
    for extra in ([], ["--force"], ["--seed", "7"]):
        err = refused(capsys, ["--out", str(folder), *extra])
        assert f"{folder}: holds 2 file(s) that its manifest.json does not list" in err
        assert "thesis.tex" in err and "chapters/" in err
    assert contents(folder) == before
    assert sorted(os.listdir(tmp_path)) == ["project"]  # no staging folder left


def test_files_a_user_added_to_a_real_assets_folder_survive_force_and_another_seed(built, tmp_path, capsys):
    folder = copy_of(built, tmp_path)
    (folder / "my-notes.txt").write_text("what I tried\n")
    (folder / "model" / "lora-of-mine").mkdir()
    (folder / "model" / "lora-of-mine" / "adapter.bin").write_bytes(b"\x01" * 8)
    (folder / "data" / "extra.parquet").write_bytes(b"mine")
    before = contents(folder)
    for extra in (["--force"], ["--seed", "3"], ["--force", "--seed", "3"]):
        err = refused(capsys, ["--out", str(folder), *extra])
        for name in ("my-notes.txt", "model/lora-of-mine/", "data/extra.parquet"):
            assert name in err, err
    assert contents(folder) == before
    (folder / "my-notes.txt").unlink()  # with only what the manifest lists, the rebuild goes ahead
    import shutil

    shutil.rmtree(folder / "model" / "lora-of-mine")
    (folder / "data" / "extra.parquet").unlink()
    assert tiny_assets_main(["--out", str(folder), "--seed", "3", *SMALL]) == 0
    assert json.loads((folder / "manifest.json").read_text())["recipe"]["seed"] == 3


def test_a_link_inside_the_folder_is_named_and_its_target_kept(built, tmp_path, capsys):
    folder = copy_of(built, tmp_path)
    target = tmp_path / "precious.txt"
    target.write_text("not verl-ext's\n")
    (folder / "data" / "precious.txt").symlink_to(target)
    (folder / "elsewhere").symlink_to(tmp_path)
    err = refused(capsys, ["--out", str(folder), "--force"])
    assert "data/precious.txt" in err and "elsewhere" in err
    assert target.read_text() == "not verl-ext's\n" and (folder / "data" / "precious.txt").is_symlink()


def test_an_out_below_a_file_is_refused_before_the_build(tmp_path, capsys):
    below = tmp_path / "notes.txt"
    below.write_text("a file\n")
    err = refused(capsys, ["--out", str(below / "assets")])
    assert f"{below / 'assets'} cannot be the assets folder: it is below {below}, which is a file" in err
    assert below.read_text() == "a file\n" and sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_place_that_cannot_be_written_is_an_error_not_a_traceback(capsys):
    err = refused(capsys, ["--out", "/proc/verl-ext-assets"])
    assert "/proc/verl-ext-assets" in err


def _limit_file_size() -> None:  # in the child: a disk that takes no file over 64 KiB (the weights are ~500 KiB)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


def test_a_write_that_fails_half_way_leaves_the_earlier_build_as_it_was(built, tmp_path):
    folder = copy_of(built, tmp_path)
    before = contents(folder)
    completed = subprocess.run(
        [sys.executable, "-m", "verl_ext.tiny.assets", "--out", str(folder), "--force", *SMALL],
        capture_output=True, text=True, timeout=600, cwd=REPO, preexec_fn=_limit_file_size,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert f"error: {folder}: the build could not be written" in completed.stderr
    assert "Traceback" not in completed.stderr
    assert contents(folder) == before
    assert sorted(os.listdir(tmp_path)) == ["assets"]  # the staging folder was removed


def test_a_build_larger_than_the_memory_available_is_refused_with_both_figures(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(assets, "available_memory_bytes", lambda: 2**30)  # a machine with 1 GiB free
    err = refused(capsys, ["--size", "qwen2.5-1.5b", "--out", str(tmp_path / "scale")])
    assert "--size qwen2.5-1.5b: building it takes about 9.6 GiB" in err and "1.0 GiB are available" in err
    assert "--skip-memory-check" in err
    assert not (tmp_path / "scale").exists() and os.listdir(tmp_path) == []


def test_the_memory_estimate_comes_from_the_size_table():
    # the parameter counts of Qwen2.5-0.5B and -1.5B by arithmetic, as the checkpoints have them
    assert parameter_count(SIZES["qwen2.5-0.5b"].model, 151936) == 494_032_768
    assert parameter_count(SIZES["qwen2.5-1.5b"].model, 151936) == 1_543_714_304
    # float32 draw + bfloat16 copy (6 bytes a parameter) + 1 GiB: about 10 GB for 1.5B, far less for the CPU size
    assert build_memory_bytes(SIZES["qwen2.5-1.5b"]) == 1_543_714_304 * 6 + 2**30
    assert build_memory_bytes(SIZES["cpu"]) < 2 * 2**30


@pytest.mark.parametrize("dimensions, field", [
    ({"hidden_size": 100, "num_attention_heads": 3}, "num_attention_heads 3 does not divide hidden_size 100"),
    ({"num_attention_heads": 4, "num_key_value_heads": 3}, "num_key_value_heads 3 does not divide"),
    ({"hidden_size": 12, "num_attention_heads": 4, "num_key_value_heads": 2}, "head dimension"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be an integer >= 1"),
    ({"intermediate_size": 2.5}, "intermediate_size must be an integer >= 1"),
    ({"num_attention_heads": True}, "num_attention_heads must be an integer >= 1"),
    ({"rope_theta": float("nan")}, "rope_theta must be a finite number > 0"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
])
def test_dimensions_that_cannot_form_a_model_are_refused_naming_the_field(dimensions, field):
    with pytest.raises(ValueError, match="model size: ") as refused_size:
        TinyModelSize(**dimensions)
    assert field in str(refused_size.value)
