"""Second round of hostile files for ``verl-ext plot``: every file it reads back is checked (a regular file, a
bounded size, the shape its reader expects) and refused with ``verl-ext plot: error:`` naming it, exit 2 -- never
a hang (a FIFO), an endless read (a link to /dev/zero or /dev/urandom) or a traceback; and a PNG whose write
fails (a file-size limit here, a full disk alike) leaves the previous PNG as it was.

The cases that could hang or exhaust memory if the check broke run in a subprocess with a timeout and a memory
limit, so a regression fails the test instead of the suite.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.run_scripts.scripts import REPO
from verl_ext import metrics_file
from verl_ext.plotting import plot_main

RECORD = json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n"


def runs_folder(tmp_path, description=None):
    runs = tmp_path / "runs"
    runs.mkdir(exist_ok=True)
    (runs / "a.jsonl").write_text(RECORD)
    if description is not None:
        (runs / "a.run.json").write_bytes(description)
    return runs


def plot_error(capsys, argv) -> str:
    assert plot_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("verl-ext plot: error:") and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("content, message", [
    (b"null", "expected a JSON object"),
    (b'"a string"', "expected a JSON object"),
    (b"[" * 30_000 + b"]" * 30_000, "not JSON (nested too deeply)"),  # within the size bound
    (b'{"run": 1e999, "group": ""}', "field 'run': expected a string, got inf"),
    (b'{"run": ' + b"9" * 5000 + b', "group": ""}', "not JSON"),
    (b'{"run": null, "group": ""}', "field 'run': expected a string, got None"),
    (b'{"run": "", "group": "x"}', "field 'run': empty"),
    (b'{"run": "a", "group": ["x"]}', "field 'group': expected a string"),
    (b'{"run": "a"}', "field 'group': missing"),
    (b'{"run": "a", "group": "x", "cpu_smoke": "yes"}', "field 'cpu_smoke': expected true or false"),
    (b'{"run": "a", "group": "x", "colour": "red"}', "field 'colour': not a field of a run description"),
    (b'{"run": "\xff", "group": ""}', "not UTF-8 text"),
    (b"", "not JSON"),
    (b'{"run": "a", "group": "' + b"x" * 70_000 + b'"}', "more than the 65536 a run description"),
])
def test_a_bad_run_description_is_named(tmp_path, capsys, content, message):
    runs = runs_folder(tmp_path, content)
    err = plot_error(capsys, [str(runs), "--out", str(tmp_path / "plots")])
    assert str(runs / "a.run.json") in err and message in err, err


def test_a_metrics_file_larger_than_the_bound_is_refused_without_reading_it(tmp_path, capsys):
    runs = runs_folder(tmp_path)
    with open(runs / "b.jsonl", "wb") as file:
        file.truncate(metrics_file.MAX_BYTES + 1)  # sparse: no disk used, 512 MiB of zeros to a reader
    err = plot_error(capsys, [str(runs), "--out", str(tmp_path / "plots")])
    assert f"{runs / 'b.jsonl'}: {metrics_file.MAX_BYTES + 1} bytes, more than" in err


def test_a_png_name_with_a_folder_in_it_is_refused(tmp_path, capsys):
    runs = runs_folder(tmp_path)
    for name in ("../escape", ".", ""):
        with pytest.raises(SystemExit) as exit_info:
            plot_main([str(runs), "--out", str(tmp_path / "plots"), "--name", name])
        assert exit_info.value.code == 2 and "the PNG's file name, without '/'" in capsys.readouterr().err
    assert not (tmp_path / "escape.png").exists()


# Each in a fresh process (a regression would block or fill the memory): (how to make the bad file, message)
SPECIAL = {
    "metrics file is a FIFO": ("fifo", "a.jsonl", "a FIFO, not a regular file"),
    "metrics file links to /dev/zero": ("/dev/zero", "a.jsonl", "a character device, not a regular file"),
    "metrics file links to /dev/urandom": ("/dev/urandom", "a.jsonl", "a character device, not a regular file"),
    "description is a FIFO": ("fifo", "a.run.json", "a FIFO, not a regular file"),
    "description links to /dev/zero": ("/dev/zero", "a.run.json", "a character device, not a regular file"),
    "description is a broken link": ("/nonexistent/x", "a.run.json", "cannot read the run description"),
    "a FIFO given directly": ("fifo", "direct.jsonl", "a FIFO, not a regular file"),
}
PROBE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))  # an endless read fails, not the machine
from verl_ext.plotting import plot_main
sys.exit(plot_main(sys.argv[1:]))
"""


@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_a_special_file_is_refused_at_once(tmp_path, case):
    kind, name, message = SPECIAL[case]
    runs = runs_folder(tmp_path, b'{"run": "a", "group": ""}')
    target = runs / name
    target.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(kind)
    inputs = [str(target)] if name == "direct.jsonl" else [str(runs)]
    completed = subprocess.run([sys.executable, "-c", PROBE, *inputs, "--out", str(tmp_path / "plots")],
                               cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert f"verl-ext plot: error: {target}" in completed.stderr and message in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


FAILING_WRITE = """
import resource, sys
import matplotlib.pyplot  # before the limit: its font cache may be written on first import
from verl_ext.plotting import plot_main
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.exit(plot_main(sys.argv[2:]))
"""


def test_a_png_whose_write_fails_leaves_the_previous_png_whole(tmp_path):
    """A file-size limit (EFBIG; Python ignores SIGXFSZ) stops the PNG half-way, as a full disk would: the
    earlier PNG is untouched and no partial file is left."""
    runs = runs_folder(tmp_path)
    plots = tmp_path / "plots"
    plots.mkdir()
    previous = b"\x89PNG the previous, good figure"
    (plots / "runs.png").write_bytes(previous)
    completed = subprocess.run([sys.executable, "-c", FAILING_WRITE, "4096", str(runs), "--out", str(plots)],
                               cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert completed.returncode == 2 and "verl-ext plot: error:" in completed.stderr, completed.stderr[-2000:]
    assert (plots / "runs.png").read_bytes() == previous
    assert sorted(path.name for path in plots.iterdir()) == ["runs.png"]  # no temporary file left


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_the_png_is_readable_as_the_umask_says(tmp_path, capsys, umask, mode):
    """Written whole through a temporary file, the PNG still gets the mode ``open(path, "w")`` would give it (0644
    with the usual umask; mkstemp's 0600 made every plot private), the new one and one that replaces another."""
    runs = runs_folder(tmp_path)
    plots = tmp_path / "plots"
    previous = os.umask(umask)
    try:
        for _ in range(2):
            assert plot_main([str(runs), "--out", str(plots)]) == 0
            assert (plots / "runs.png").stat().st_mode & 0o777 == mode
    finally:
        os.umask(previous)
    assert sorted(path.name for path in plots.iterdir()) == ["runs.png"]
