"""The assets builder never deletes what verl-ext did not write (issue 31, class 1), on every path to it:
``verl-ext tiny-assets --out``, ``quickstart --assets``, ``lab --assets`` (and its warm-start folder beside),
``gpu-smoke --assets`` and a run script's ``VERL_EXT_TINY_ASSETS``. A folder that is not an assets folder, a
symbolic link (whatever it points at), a file, and a manifest that is not a UTF-8 JSON object are refused before
anything is built, with ``error: <path>: <what>`` and exit 2; the user's files are left exactly as they were."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verl_ext.tiny.assets import AssetsFolderError, build_tiny_assets, main as tiny_assets_main

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]


def users_folder(root: Path) -> Path:
    folder = root / "my-project"
    (folder / "notes").mkdir(parents=True)
    (folder / "thesis.tex").write_text("three years of work\n")
    (folder / "notes" / "a.txt").write_text("keep me\n")
    return folder


def contents(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


def refused_by_the_cli(capsys, argv) -> str:
    assert tiny_assets_main([*argv, "--train-examples", "4", "--val-examples", "2"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    return err


def test_a_users_folder_is_refused_and_left_as_it_was(tmp_path, capsys):
    folder = users_folder(tmp_path)
    before = contents(folder)
    err = refused_by_the_cli(capsys, ["--out", str(folder)])
    assert f"{folder}: a folder that verl-ext did not write" in err
    assert contents(folder) == before and sorted(os.listdir(tmp_path)) == ["my-project"]  # no staging left behind


def test_a_link_to_a_users_folder_is_refused_and_its_target_kept(tmp_path, capsys):
    folder = users_folder(tmp_path)
    before = contents(folder)
    link = tmp_path / "assets-link"
    link.symlink_to(folder)
    err = refused_by_the_cli(capsys, ["--out", str(link)])
    assert f"{link} cannot be the assets folder: it is a symbolic link" in err
    assert contents(folder) == before and link.is_symlink()


def test_a_link_to_an_assets_folder_is_refused_too(tmp_path, capsys):
    """Even to a folder verl-ext built: a rebuild would replace the target, which the link's owner may not own."""
    assets = tmp_path / "assets"
    build_tiny_assets(assets, train_examples=4, val_examples=2)
    link = tmp_path / "link"
    link.symlink_to(assets)
    assert "a symbolic link" in refused_by_the_cli(capsys, ["--out", str(link), "--force"])
    assert (assets / "manifest.json").is_file()


def test_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "data.csv"
    target.write_text("a,b\n1,2\n")
    assert f"{target} cannot be the assets folder: it is a file" in refused_by_the_cli(capsys, ["--out", str(target)])
    assert target.read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize("content, what", [
    (b"\xff\xfe not utf-8", "not UTF-8 text"),
    (b"[1, 2, 3]", "a JSON list, not an object"),
    (b"null", "a JSON NoneType, not an object"),
    (b"{\"recipe\": ", "not JSON"),
    (b"{\"files\": [\"x\"]}", "not a manifest verl-ext wrote"),
])
def test_a_manifest_that_is_not_ours_is_named(tmp_path, capsys, content, what):
    folder = tmp_path / "assets"
    folder.mkdir()
    (folder / "manifest.json").write_bytes(content)
    (folder / "weights.bin").write_bytes(b"\x00" * 10)
    err = refused_by_the_cli(capsys, ["--out", str(folder)])
    assert f"{folder / 'manifest.json'}: {what}" in err
    assert (folder / "weights.bin").read_bytes() == b"\x00" * 10


def test_an_empty_folder_and_our_own_folder_are_built_into(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    manifest = build_tiny_assets(empty, train_examples=4, val_examples=2)
    assert json.loads((empty / "manifest.json").read_text())["files"] == manifest["files"]
    rebuilt = build_tiny_assets(empty, train_examples=5, val_examples=2)  # another recipe: ours, replaced
    assert rebuilt["recipe"]["train_examples"] == 5


@pytest.mark.parametrize("argv, message", [
    (["--train-examples", "0"], "expected an integer in 1..100000"),
    (["--val-examples", "-3"], "expected an integer in 1..100000"),
    (["--train-examples", "1000000000"], "expected an integer in 1..100000"),
    (["--seed", str(2**64)], f"expected an integer in 0..{2**63 - 1}"),
    (["--seed", "-1"], f"expected an integer in 0..{2**63 - 1}"),
    (["--seed", "9" * 5000], "expected an integer in 0.."),
    (["--size", "tpu"], "invalid choice"),
])
def test_bounded_arguments(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        tiny_assets_main(["--out", str(tmp_path / "new"), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "new").exists()


def test_the_builder_refuses_bad_values_from_python_too(tmp_path):
    with pytest.raises(ValueError, match="seed must be an integer"):
        build_tiny_assets(tmp_path / "x", seed=2**64)
    with pytest.raises(ValueError, match="train_examples must be an integer in 1..100000"):
        build_tiny_assets(tmp_path / "x", train_examples=0)
    with pytest.raises(AssetsFolderError):
        build_tiny_assets(users_folder(tmp_path))


def test_quickstart_lab_and_gpu_smoke_refuse_a_users_assets_folder(tmp_path, capsys):
    from verl_ext.cpu.quickstart import main as quickstart_main
    from verl_ext.gpu.smoke import main as smoke_main
    from verl_ext.lab.cli import lab_main

    folder = users_folder(tmp_path)
    before = contents(folder)
    assert quickstart_main(["--assets", str(folder), "--out", str(tmp_path / "out"), "--steps", "1"]) == 2
    assert smoke_main(["--backend", "cpu", "--assets", str(folder), "--out", str(tmp_path / "out")]) == 2
    assert lab_main(["--assets", str(folder), "--out", str(tmp_path / "lab"), "--initial-model", "random"]) == 2
    output = capsys.readouterr()
    assert output.err.count("a folder that verl-ext did not write") + output.out.count("a folder that verl-ext did not write") == 3
    assert "Traceback" not in output.err + output.out
    # the quickstart refused it first, before its run's checks (the line after them names the assets it will build)
    assert "tiny assets:" not in output.out
    assert contents(folder) == before


def test_the_labs_warm_start_folder_beside_the_assets_is_refused_when_not_ours(tmp_path, capsys):
    from verl_ext.lab.cli import lab_main

    assets = tmp_path / "tiny"
    build_tiny_assets(assets)  # the lab's own assets (default size): kept
    warm = users_folder(tmp_path)
    warm.rename(tmp_path / "tiny-warm-start")
    before = contents(tmp_path / "tiny-warm-start")
    assert lab_main(["--assets", str(assets), "--out", str(tmp_path / "lab")]) == 2
    assert "a folder that verl-ext did not write" in capsys.readouterr().out
    assert contents(tmp_path / "tiny-warm-start") == before


def test_a_run_scripts_tiny_assets_variable_pointing_at_a_users_folder_is_refused(tmp_path):
    folder = users_folder(tmp_path)
    before = contents(folder)
    environment = {**os.environ, "VERL_EXT_CPU_SMOKE": "1", "VERL_EXT_TINY_ASSETS": str(folder),
                   "OUTPUT_DIR": str(tmp_path / "out"), "DATA_DIR": str(tmp_path / "data"), "PYTHON": sys.executable,
                   "ALGORITHMS": "rec_oneside_nois", "SETTINGS": "on_policy"}
    result = subprocess.run(["bash", str(REPO / "run_scripts" / "gsm8k" / "figure2_rec_oneside.sh")],
                            capture_output=True, text=True, timeout=300, env=environment, cwd=tmp_path)
    assert result.returncode != 0
    assert "a folder that verl-ext did not write" in result.stderr and "Traceback" not in result.stderr
    # refused first, in a second: before the runs' checks (the preflight imports verl and composes every config)
    assert "preflight" not in result.stdout + result.stderr
    assert contents(folder) == before
