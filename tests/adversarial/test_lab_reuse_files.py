"""Hostile run records for ``verl-ext lab --reuse`` (issue 31, item 5), beside the plot's (test_plot_files.py): the
lab's record of a run (``runs/<name>.json``) is read back through the one reader of run descriptions
(:func:`verl_ext.run_description.read_lab_record`) and a record that is not one -- a list, null, garbage, binary, a
FIFO, a link to an endless file, a huge file -- is ``verl-ext lab: error: <file>: <what>``, exit 2: never a traceback,
a hang, an endless read, or a silent rerun. ``verl-ext plot`` refuses the same bytes as a ``<name>.run.json``.

The cases that could hang or exhaust memory if the check broke run in a subprocess with a timeout and a memory limit.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.run_scripts.scripts import REPO
from verl_ext.lab.runner import LabPaths, is_reusable, write_description
from verl_ext.plotting import plot_main
from verl_ext.run_description import MAX_LAB_RECORD_BYTES, RunDescriptionError, read_lab_record
from verl_ext.runs.run import Run

RUN = Run("r", overrides=("data.seed=1",), steps=2)

# bytes -> what the message says (the lab's reader; the plot's says the same of a .run.json for the first four)
BAD = {
    "a list": (b"[]", "expected a JSON object", "expected a JSON object"),
    "null": (b"null", "expected a JSON object", "expected a JSON object"),
    "garbage": (b"{{{ not json", "not JSON", "not JSON"),
    "binary": (b"\xff\xfe\x00{", "not UTF-8 text", "not UTF-8 text"),
    "empty": (b"", "not JSON", "not JSON"),
    "steps as text": (b'{"steps": "2", "overrides": [], "assets": "x"}', "field 'steps': expected an integer >= 1", None),
    "overrides not a list": (b'{"steps": 2, "overrides": "a=1", "assets": "x"}', "field 'overrides': expected a list of strings", None),
    "no overrides": (b'{"steps": 2, "assets": "x"}', "field 'overrides': missing", None),
    "a field of no record": (b'{"steps": 2, "overrides": [], "assets": "x", "colour": 1}', "field 'colour': not a field", None),
    "config not scalars": (b'{"steps": 2, "overrides": [], "assets": "x", "config": {"a": [1]}}', "field 'config': expected", None),
}


def record_at(tmp_path, content: bytes):
    paths = LabPaths(tmp_path)
    record = paths.run_description(RUN)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_bytes(content)
    return paths, record


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_record_is_refused_naming_the_file(tmp_path, capsys, case):
    content, message, plot_message = BAD[case]
    paths, record = record_at(tmp_path, content)
    with pytest.raises(RunDescriptionError) as refused:
        is_reusable(RUN, paths, "fingerprint")
    assert str(refused.value).startswith(str(record)) and message in str(refused.value), refused.value
    if plot_message:  # verl-ext plot on the same bytes as a run description
        runs = tmp_path / "plotted"
        runs.mkdir()
        (runs / "a.jsonl").write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
        (runs / "a.run.json").write_bytes(content)
        assert plot_main([str(runs), "--out", str(tmp_path / "plots")]) == 2
        err = capsys.readouterr().err
        assert f"verl-ext plot: error: {runs / 'a.run.json'}: " in err and plot_message in err and "Traceback" not in err


def test_a_record_the_lab_wrote_is_read_back_and_compared(tmp_path):
    paths = LabPaths(tmp_path)
    write_description(paths.run_description(RUN), RUN, "fingerprint", ["x=1"], {"data.seed": 1, "lr": 1e-6, "n": None})
    stored = read_lab_record(paths.run_description(RUN))
    assert stored["overrides"] == list(RUN.overrides) and stored["config"] == {"data.seed": 1, "lr": 1e-6, "n": None}
    assert not is_reusable(RUN, paths, "fingerprint")  # no metrics logged: run again
    assert not is_reusable(RUN, paths, "another model")
    with pytest.raises(RunDescriptionError, match="field 'config'"):  # the writer checks what it writes (JSON has no nan)
        write_description(paths.run_description(RUN), RUN, "fingerprint", [], {"lr": float("nan")})
    assert read_lab_record(paths.run_description(RUN))["config"]["lr"] == 1e-6  # the record before is whole


PROBE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 * 1024 ** 3, 2 * 1024 ** 3))  # an endless read fails, not the machine
from pathlib import Path
from verl_ext.lab.runner import LabPaths, is_reusable
from verl_ext.run_description import RunDescriptionError
from verl_ext.runs.run import Run
try:
    is_reusable(Run("r", steps=2), LabPaths(Path(sys.argv[1])), "fingerprint")
except RunDescriptionError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
"""
SPECIAL = {
    "a FIFO": ("fifo", "a FIFO, not a regular file"),
    "a link to /dev/zero": ("/dev/zero", "a character device, not a regular file"),
    "a link to /dev/urandom": ("/dev/urandom", "a character device, not a regular file"),
    "a huge file": ("huge", f"more than the {MAX_LAB_RECORD_BYTES} a lab run record"),
    "a broken link": ("/nonexistent/x", "cannot read the lab run record"),
}


@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_a_special_record_is_refused_at_once(tmp_path, case):
    kind, message = SPECIAL[case]
    paths, record = record_at(tmp_path, b"")
    record.unlink()
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "huge":
        with open(record, "wb") as file:
            file.truncate(512 * 1024 * 1024)  # sparse: no disk used, 512 MiB of zeros to a reader
    else:
        record.symlink_to(kind)
    completed = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                               timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert f"error: {record}: " in completed.stderr and message in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stderr


def test_lab_reuse_with_a_bad_record_exits_2_naming_it(tmp_path, capsys, tiny_assets):
    """Through ``verl-ext lab --reuse``: refused after the runs' checks, before Ray starts, nothing run."""
    from verl_ext.lab.cli import build_parser, resolve_runs
    from verl_ext.lab.cli import lab_main

    out = tmp_path / "lab"
    argv = ["--algorithms", "reinforce", "--steps", "2", "--out", str(out), "--assets", str(tiny_assets),
            "--initial-model", "random", "--reuse"]
    run = resolve_runs(build_parser().parse_args(argv))[2][0]  # the lab's own planning, as the command does
    record = LabPaths(out.resolve()).run_description(run)
    record.parent.mkdir(parents=True)
    record.write_bytes(b"null")
    assert lab_main(argv) == 2
    err = capsys.readouterr().err
    assert f"verl-ext lab: error: {record}: expected a JSON object" in err and "Traceback" not in err, err
    assert not (out / "lab.log").exists()  # nothing was run
