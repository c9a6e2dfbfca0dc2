"""Hostile run folders (issue 31, "symlinks followed"; issue 28, "a failed rerun deleted the last run's results"):
a run's file that is a symbolic link is refused, never written through, on every path that prepares a run folder;
the file behind it is left as it was. The child process is a tripwire: reaching it fails the test."""

import pytest

from tests.run_scripts.scripts import script_environment

THEIRS = "someone else's file\n"


@pytest.fixture
def theirs(tmp_path):
    path = tmp_path / "theirs.txt"
    path.write_text(THEIRS)
    return path


def test_the_quickstart_refuses_an_earlier_log_that_is_a_link(tmp_path, tiny_assets, theirs, capsys, monkeypatch):
    from verl_ext.cpu import quickstart
    from verl_ext.runs.launch import ChildProcess

    monkeypatch.setattr(ChildProcess, "execute", lambda *args: pytest.fail("a child was started"))
    out = tmp_path / "out"
    log = out / "verl_ext_cpu" / "rec_oneside_nois" / "main_ppo.log"
    log.parent.mkdir(parents=True)
    log.symlink_to(theirs)
    status = quickstart.main(["--steps", "2", "--out", str(out), "--assets", str(tiny_assets)])
    assert status == 2
    assert f"{log} is a symbolic link" in capsys.readouterr().err.strip().splitlines()[-1]
    assert theirs.read_text() == THEIRS and log.is_symlink()
    assert sorted(path.name for path in out.rglob("*")) == ["main_ppo.log", "rec_oneside_nois", "verl_ext_cpu"]


def test_a_run_script_refuses_a_metrics_file_that_is_a_link(tmp_path, theirs, capsys):
    from verl_ext.experiments.__main__ import main
    from verl_ext.experiments.modes import Tools

    environ = script_environment(tmp_path, VERL_EXT_CPU_SMOKE="1", VERL_EXT_TINY_ASSETS=str(tmp_path / "tiny"))
    metrics = tmp_path / "outputs" / "cpu-smoke" / "metrics" / "verl-ext-gsm8k-qwen2.5-1.5b" / "grpo-on_policy.jsonl"
    metrics.parent.mkdir(parents=True)
    metrics.symlink_to(theirs)
    status = main(["run", "gsm8k", "grpo"], environ,
                  Tools(measure=lambda *args, **kwargs: pytest.fail("a child was started"), count_gpus=lambda: 0,
                        environ=environ))
    assert status == 2
    assert f"{metrics} is a symbolic link" in capsys.readouterr().err
    assert theirs.read_text() == THEIRS and metrics.is_symlink()
    assert not (tmp_path / "tiny").exists()  # refused before the smoke's assets were built


def test_the_lab_log_is_appended_to_and_never_written_through_a_link(tmp_path, theirs):
    from verl_ext.lab.runner import output_to

    log = tmp_path / "lab.log"
    log.write_text("an earlier lab\n")
    with output_to(log):
        print("this lab")
    text = log.read_text()
    assert text.startswith("an earlier lab\n") and text.rstrip().endswith("this lab")
    linked = tmp_path / "linked.log"
    linked.symlink_to(theirs)
    with pytest.raises(OSError):
        with output_to(linked):
            print("this lab")
    assert theirs.read_text() == THEIRS


# issue 41: an --out that is a link to nothing was followed (its target created), one below a file passed the checks
# and crashed later; both are refused by the one output-folder rule (verl_ext.runs.outputs.output_folder) before any
# work: no assets built, nothing written, no child started.
def bad_out(tmp_path, kind):
    if kind == "link to nothing":
        out = tmp_path / "out"
        out.symlink_to(tmp_path / "elsewhere" / "target")
        return out, "is a symbolic link to nothing"
    (tmp_path / "a_file").write_text("mine\n")
    return tmp_path / "a_file" / "out", "which is a file"


@pytest.mark.parametrize("kind", ["link to nothing", "below a file"])
def test_the_quickstart_refuses_a_bad_out_before_any_work(tmp_path, capsys, monkeypatch, kind):
    from verl_ext.cpu import quickstart
    from verl_ext.runs.launch import ChildProcess
    from verl_ext.tiny import assets

    monkeypatch.setattr(ChildProcess, "execute", lambda *args: pytest.fail("a child was started"))
    monkeypatch.setattr(assets, "build_tiny_assets", lambda *args, **kwargs: pytest.fail("assets were built"))
    out, words = bad_out(tmp_path, kind)
    status = quickstart.main(["--steps", "2", "--out", str(out), "--assets", str(tmp_path / "assets")])
    err = capsys.readouterr().err
    assert status == 2 and "error:" in err and str(out) in err and words in err and "Traceback" not in err, err
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "assets").exists()


@pytest.mark.parametrize("kind", ["link to nothing", "below a file"])
def test_the_lab_refuses_a_bad_out_before_any_work(tmp_path, capsys, kind):
    from verl_ext.lab.cli import lab_main

    out, words = bad_out(tmp_path, kind)
    status = lab_main(["--out", str(out), "--assets", str(tmp_path / "assets"), "--steps", "2"])
    err = capsys.readouterr().err
    assert status == 2 and "verl-ext lab: error:" in err and str(out) in err and words in err, err
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "assets").exists()


@pytest.mark.parametrize("kind", ["link to nothing", "below a file"])
def test_every_outputs_root_gets_the_rule(tmp_path, kind):
    """Outputs (the GPU plan, the benchmarks, the smoke runs, the lab's runner build one) refuses it when made."""
    from verl_ext.runs.outputs import OutputFolderError, Outputs

    out, words = bad_out(tmp_path, kind)
    with pytest.raises(OutputFolderError, match=words):
        Outputs(out)
    Outputs(tmp_path / "fresh" / "folder")  # a folder that can be made is fine (nothing made yet)
    assert not (tmp_path / "fresh").exists()
