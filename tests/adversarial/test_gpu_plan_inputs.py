"""The GPU plan's checks, which run before anything GPU-bound (issue 41, GPU plan): a ``plan_summary.json`` whose
fields have the wrong type is ``error: <file>: <field> ...`` and exit 2 (not a traceback when the summary is
printed); the files the plan writes in its folder (the summary, the losses log, the runs folder) are never written
through a symbolic link; an ``--out`` below a file is refused before the assets are built."""

import json
import os

import pytest

from verl_ext.gpu import plan
from verl_ext.tiny import assets


def refused(capsys, argv) -> str:
    assert plan.main(argv) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err
    return err


def summary_with(record=None, **top) -> str:
    return json.dumps({"backend": "cpu", "steps": {"main": {"status": "passed", **(record or {})}}, **top})


@pytest.mark.parametrize("record, top, field", [
    ({"seconds": "fast"}, {}, "steps.main.seconds is a str, not a number"),
    ({"seconds": True}, {}, "steps.main.seconds is a bool, not a number"),
    ({"checks": "all good"}, {}, "steps.main.checks is a str, not a list of checks"),
    ({"checks": [1]}, {}, "steps.main.checks[0] is a int, not an object"),
    ({"checks": [{"name": 3, "ok": True}]}, {}, "steps.main.checks[0].name is a int, not a string"),
    ({"checks": [{"name": "x", "ok": "yes"}]}, {}, "steps.main.checks[0].ok is a str, not true or false"),
    ({"figures": [1, 2]}, {}, "steps.main.figures is a list, not an object"),
    ({"error": 5}, {}, "steps.main.error is a int, not a string"),
    ({}, {"device": 7}, "device is a int, not a string"),
    ({}, {"calls": {"a": 1}}, "calls is a dict, not a list of objects"),
    ({}, {"calls": ["x"]}, "calls is a list, not a list of objects"),
])
def test_a_summary_field_of_the_wrong_type_is_named(tmp_path, capsys, record, top, field):
    out = tmp_path / "plan"
    out.mkdir()
    (out / plan.SUMMARY).write_text(summary_with(record, **top))
    err = refused(capsys, ["--out", str(out), "--backend", "cpu", "--dry-run"])
    assert f"{out / plan.SUMMARY}: {field}" in err


def test_a_summary_of_the_right_types_is_read_and_printed(tmp_path, capsys):
    out = tmp_path / "plan"
    out.mkdir()
    (out / plan.SUMMARY).write_text(summary_with({"seconds": 12.5, "checks": [{"name": "c", "ok": True, "detail": 1}],
                                                  "figures": {}, "error": None}, device="cpu", calls=[]))
    summary = plan.read_summary(out / plan.SUMMARY)
    plan.print_summary(summary)  # the fields it formats have the types it formats
    assert "[ok] c: 1" in capsys.readouterr().out


@pytest.mark.parametrize("name", [plan.LOSSES_LOG, plan.SUMMARY, plan.RUNS])
def test_the_plans_files_are_never_written_through_a_link(tmp_path, capsys, name):
    out = tmp_path / "plan"
    out.mkdir()
    if name != plan.SUMMARY:
        (out / plan.SUMMARY).write_text(summary_with())
    target = tmp_path / "someone-elses.txt"
    target.write_text("theirs\n")
    (out / name).symlink_to(target)
    err = refused(capsys, ["--out", str(out), "--backend", "cpu", "--dry-run"])
    assert f"{out / name}: a symbolic link" in err
    assert target.read_text() == "theirs\n" and (out / name).is_symlink()


def test_an_out_below_a_file_is_refused_before_the_assets_are_built(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(assets, "build_tiny_assets", lambda *a, **k: pytest.fail("the assets were built"))
    below = tmp_path / "results.txt"
    below.write_text("a file\n")
    err = refused(capsys, ["--out", str(below / "plan"), "--backend", "cpu", "--budget", "100"])
    assert f"it is below {below}, which is a file" in err
    assert below.read_text() == "a file\n" and os.listdir(tmp_path) == ["results.txt"]
    link = tmp_path / "plan-link"
    link.symlink_to(tmp_path)
    assert "a symbolic link" in refused(capsys, ["--out", str(link), "--backend", "cpu", "--budget", "100"])
