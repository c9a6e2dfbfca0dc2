"""The benchmarks refuse bad options before their first run (issue 41, benchmarks): counts of 0, comma lists with
an empty or a repeated entry, a grid whose steady window is empty, an ``--out`` that is a link or lies below a file,
a ``--commit`` that is an option of git, unknown, or not a commit, a tree with uncommitted changes; and
``bench_against_commit.py`` runs a tree with its own code only. Each refusal is exit 2 with a message naming the
option, no traceback, and nothing run or written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import bench_against_commit  # noqa: E402
import bench_overlap  # noqa: E402
import run_all  # noqa: E402

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)


def refused_in_process(capsys, main, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    output = capsys.readouterr()
    assert "Traceback" not in output.err and "== " not in output.out  # no benchmark started
    return output.err


@pytest.mark.parametrize("only, message", [
    (",", "none empty"),
    ("", "none empty"),
    ("losses,,rewards", "none empty"),
    ("losses,losses", "losses given twice"),
    ("losses,speed", "unknown speed; allowed: losses"),
])
def test_run_all_only_is_checked_before_any_benchmark(capsys, only, message):
    assert message in refused_in_process(capsys, run_all.main, ["--only", only])


def test_run_all_out_is_never_written_through_a_link(tmp_path, capsys):
    target = tmp_path / "someone-elses.txt"
    target.write_text("theirs\n")
    link = tmp_path / "report.txt"
    link.symlink_to(target)
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "nowhere" / "x.txt")
    for out in (link, dangling):
        err = refused_in_process(capsys, run_all.main, ["--only", "losses", "--out", str(out)])
        assert f"--out {out} cannot be the report: it is a symbolic link" in err
    assert target.read_text() == "theirs\n" and link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_run_all_out_below_a_file_or_a_folder_is_refused_first(tmp_path, capsys):
    below = tmp_path / "a-file"
    below.write_text("x")
    assert f"it is below {below}, which is a file" in refused_in_process(capsys, run_all.main,
                                                            ["--only", "losses", "--out", str(below / "r.txt")])
    assert "cannot be the report: it is a folder" in refused_in_process(capsys, run_all.main,
                                                                  ["--only", "losses", "--out", str(tmp_path)])


def test_bench_overlap_refuses_a_grid_whose_steady_window_is_empty_before_any_run(capsys, monkeypatch):
    monkeypatch.setattr(bench_overlap, "bench_cpu", lambda *a, **k: pytest.fail("a run started"))
    err = refused_in_process(capsys, bench_overlap.main, ["--steps", "8"])  # the default grid holds (4, 4)
    assert "no steady step for delayed_4_4 (needs --steps >= 12)" in err and "delayed_1_1" not in err
    assert "given twice" in refused_in_process(capsys, bench_overlap.main, ["--steps", "16", "--grid", "1,1", "1,1"])
    assert "integer >= 1" in refused_in_process(capsys, bench_overlap.main, ["--steps", "0"])
    # --skip-sync: sync mode's own window does not count; (1, 1) still needs 4 steps
    assert "delayed_1_1 (needs --steps >= 4)" in refused_in_process(
        capsys, bench_overlap.main, ["--steps", "3", "--grid", "1,1", "--skip-sync"])


@pytest.mark.parametrize("script, argv, message", [
    ("bench_async_modes.py", ["--only", ","], "none empty"),
    ("bench_async_modes.py", ["--only", "delayed_1_1,delayed_1_1"], "delayed_1_1 given twice"),
    ("bench_async_modes.py", ["--repeats", "0"], "expected an integer >= 1"),
    ("bench_losses.py", ["--repeats", "0"], "expected an integer >= 1"),
    ("bench_losses.py", ["--shapes", "256x0"], "both >= 1"),
    ("bench_losses.py", ["--shapes", ","], "none empty"),
    ("bench_losses.py", ["--shapes", "4x4,4x4"], "4x4 given twice"),
    ("bench_data_prep.py", ["--repeats", "0"], "expected an integer >= 1"),
    ("bench_refusal.py", ["--repeats", "0"], "expected an integer >= 1"),
    ("bench_plugin_import.py", ["--repeats", "-1"], "expected an integer >= 1"),
    ("bench_cpu_backend.py", ["--session-runs", "0"], "expected an integer >= 1"),
    ("bench_mismatch.py", ["--pairs", "0"], "expected an integer >= 1"),
    ("bench_rewards.py", ["--threads", "0"], "expected an integer >= 1"),
    ("bench_scale.py", ["--topologies", "1x1,1x1"], "1x1 given twice"),
    ("bench_scale.py", ["--repeats", "0"], "expected an integer >= 1"),
    ("bench_against_commit.py", ["--repeats", "0"], "expected an integer >= 1"),
])
def test_counts_and_lists_are_refused_while_parsing(script, argv, message):
    completed = subprocess.run([sys.executable, str(BENCHMARKS / script), *argv], cwd=REPO, capture_output=True,
                               text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert completed.returncode == 2, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert message in completed.stderr and "Traceback" not in completed.stderr


def worktrees() -> str:
    return subprocess.run(["git", "-C", str(REPO), "worktree", "list"], capture_output=True, text=True).stdout


@pytest.mark.parametrize("commit", ["-h", "--output=/tmp/verl-ext-bench-x", "no-such-commit-41", "HEAD^{tree}", " "])
def test_a_commit_that_is_an_option_unknown_or_not_a_commit_is_refused_before_any_run(capsys, commit):
    before = worktrees()
    err = refused_in_process(capsys, bench_against_commit.main, [f"--commit={commit}"])
    assert "--commit" in err and ("not a commit" in err or "is empty" in err)
    assert worktrees() == before and not os.path.exists("/tmp/verl-ext-bench-x")


def git(repo: Path, *argv: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *argv], check=True,
                   capture_output=True)


def test_a_dirty_tree_is_seen_and_an_untracked_file_is_not(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-qm", "a")
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert bench_against_commit.uncommitted_changes(tmp_path) == []
    (tmp_path / "a.py").write_text("x = 2\n")
    assert bench_against_commit.uncommitted_changes(tmp_path) == ["a.py"]
    assert bench_against_commit.resolve_commit(tmp_path, "HEAD") == subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_the_headline_marks_figures_of_a_dirty_tree():
    side = {"no_overlap": {"gen": 1.0, "step": 2.0, "step_to_the_end": 2.0},
            "overlap": {"gen": 1.0, "step": 1.0, "step_to_the_end": 1.0},
            "overlap_speed_up": 2.0, "overlap_speed_up_to_the_end": 2.0, "overlap_speed_up_per_repeat": [2.0]}
    summary = {"abc": side, bench_against_commit.THIS_DIRTY: side}
    figures = bench_against_commit.headline_figures(summary, "abc", bench_against_commit.THIS_DIRTY)
    assert "uncommitted changes" in figures["this checkout"]


def test_an_old_tree_runs_its_own_code_only(tmp_path):
    """A tree without the quickstart: under the guard the module is missing, never today's from the editable
    install; and the probe refuses the tree before any run."""
    old = tmp_path / "old"
    (old / "verl_ext").mkdir(parents=True)
    (old / "verl_ext" / "__init__.py").write_text("")
    guard = bench_against_commit.write_guard(tmp_path / "guard")
    probe = subprocess.run([sys.executable, "-c", "import verl_ext.cpu"], cwd=old, capture_output=True, text=True,
                           env=bench_against_commit.guarded_environment(old, guard))
    assert probe.returncode != 0 and "No module named 'verl_ext.cpu'" in probe.stderr
    with pytest.raises(bench_against_commit.BenchRefused, match="verl_ext.cpu.quickstart is not importable"):
        bench_against_commit.check_own_code(old, guard)
    bench_against_commit.check_own_code(REPO, guard)  # this checkout has its own quickstart


def test_bench_mismatch_out_below_a_file_or_holding_a_users_assets_folder_is_refused(tmp_path):
    below = tmp_path / "a-file"
    below.write_text("x")
    mine = tmp_path / "runs"
    (mine / "assets").mkdir(parents=True)
    (mine / "assets" / "mine.txt").write_text("keep\n")
    for out, message in ((below / "runs", f"it is below {below}, which is a file"), (mine, "a folder that verl-ext did not write")):
        completed = subprocess.run([sys.executable, str(BENCHMARKS / "bench_mismatch.py"), "--out", str(out)],
                                   cwd=REPO, capture_output=True, text=True, timeout=300,
                                   env={**os.environ, "PYTHONPATH": str(REPO)})
        assert completed.returncode == 2 and message in completed.stderr, completed.stderr[-2000:]
        assert "Traceback" not in completed.stderr
    assert below.read_text() == "x" and (mine / "assets" / "mine.txt").read_text() == "keep\n"
