"""Hostile and messy raw inputs for the four preprocessors (issue 12): every case ends as promised.

The promise (docs/datasets.md, "Reliability"): a row-level problem is a counted skip naming the field
(``--strict``: a stop naming file, row and field); a file-level problem is ``error: ...`` with exit status
2; never a traceback, never a silent change; the counts of every report add up
(in = out + skipped + filtered). Each case below builds its raw files in ``tmp_path`` and runs the
command's ``main(argv)`` in-process; the generated cases use hypothesis.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_prep.manifest import MANIFEST_NAME
from data_prep.raw_records import MAX_JSON_BYTES
from tests.cost import LINEAR, cost_ratio

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

SURROGATE = "\ud83d"
DEEP = 100_000  # nesting levels
HUGE_INT = "9" * 5000  # digits
TOOLS = [{"name": "calc", "description": "a calculator", "parameters": {"type": "dict", "properties": {}}}]
MARKER = "Here is a list of functions in JSON format that you can invoke:\n"


@dataclass
class Outcome:
    status: int
    out: str
    err: str
    save_dir: Path

    def rows(self, name: str) -> list[dict]:
        return pq.read_table(self.save_dir / f"{name}.parquet").to_pylist()

    def reports(self) -> list[dict]:
        return json.loads((self.save_dir / MANIFEST_NAME).read_text())["reports"]


@pytest.fixture
def prep(tmp_path, capsys):
    """``prep(dataset, raw_path, *flags)``: run ``data_prep.<dataset>.main`` in-process."""
    counter = iter(range(10**6))

    def run(dataset: str, raw: Path, *flags: str) -> Outcome:
        save_dir = tmp_path / f"out_{dataset}_{next(counter)}"
        module = importlib.import_module(f"data_prep.{dataset}")
        status = module.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(raw), *flags])
        captured = capsys.readouterr()
        return Outcome(status, captured.out, captured.err, save_dir)

    return run


def assert_counts_add_up(outcome: Outcome) -> None:
    """Every report (and ToolACE's turn report) adds up, in the manifest and on screen."""
    def check(report: dict) -> None:
        total = report["out"] + sum(report["skipped"].values()) + sum(report["filtered"].values())
        assert report["in"] == total, report
        if "turns" in report:
            check(report["turns"])

    for report in outcome.reports():
        check(report)


def assert_clean_error(outcome: Outcome, *fragments: str) -> None:
    assert outcome.status == 2, outcome.out + outcome.err
    assert "Traceback" not in outcome.err and "error: " in outcome.err
    for fragment in fragments:
        assert fragment in outcome.err, outcome.err
    assert not (outcome.save_dir / "train.parquet").exists()


# --- raw file builders ----------------------------------------------------------------------------------

GOOD_GSM8K = {"question": "How many?", "answer": "Count them.\n#### 4"}


def line(record) -> bytes:
    return record if isinstance(record, bytes) else json.dumps(record).encode()


def write_jsonl(path: Path, records) -> None:
    path.write_bytes(b"".join(line(r) + b"\n" for r in records))


def gsm8k_dir(root: Path, train: list, test: list | None = None) -> Path:
    folder = root / "raw_gsm8k"
    folder.mkdir(exist_ok=True)
    write_jsonl(folder / "train.jsonl", [GOOD_GSM8K, *train])
    write_jsonl(folder / "test.jsonl", test if test is not None else [{"question": "Test?", "answer": "#### 1"}])
    return folder


def math_dir(root: Path, train: list) -> Path:
    folder = root / "raw_math"
    folder.mkdir(exist_ok=True)
    good = {"problem": "1+1?", "level": "Level 1", "answer": "2", "unique_id": "a"}
    write_jsonl(folder / "train.jsonl", [good, *train])
    write_jsonl(folder / "test.jsonl", [{"problem": "2+2?", "level": 2, "answer": "4"}])
    return folder


def guru_row(index: int, **extra) -> dict:
    row = {
        "data_source": "math__test",
        "prompt": [{"role": "user", "content": f"Question {index}? Answer in \\boxed{{}}."}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": str(index)},
        "extra_info": {"index": index},
    }
    row.update(extra)
    return row


def guru_file(root: Path, rows: list, fmt: str = "jsonl") -> Path:
    folder = root / "raw_guru"
    folder.mkdir(exist_ok=True)
    rows = [guru_row(i) for i in range(4)] + rows
    path = folder / f"math__combined.{fmt}"
    if fmt == "jsonl":
        write_jsonl(path, rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return folder


def conversation(call: str, user: str = "Compute it.", system: str | None = None) -> dict:
    return {
        "system": system if system is not None else MARKER + json.dumps(TOOLS),
        "conversations": [{"from": "user", "value": user}, {"from": "assistant", "value": call}],
    }


def toolace_dir(root: Path, records: list, raw_text: str | None = None) -> Path:
    folder = root / "raw_toolace"
    folder.mkdir(exist_ok=True)
    good = [conversation(f"[calc(expression='{i}+1')]", user=f"Add one to {i}.") for i in range(4)]
    content = raw_text if raw_text is not None else json.dumps(good + records)
    (folder / "data.json").write_text(content, encoding="utf-8", errors="surrogatepass")
    return folder


# --- row-level problems: counted skips naming the field, a --strict stop naming file, row and field --------

ROW_CASES = {
    # name: (dataset, raw builder, field and reason in the report)
    "gsm8k lone surrogate in question": (
        "gsm8k", lambda r: gsm8k_dir(r, [{"question": f"Why{SURROGATE}?", "answer": "#### 2"}]),
        "question: not valid Unicode",
    ),
    "gsm8k 1,2,3 is not 123": (
        "gsm8k", lambda r: gsm8k_dir(r, [{"question": "q2", "answer": "#### 1,2,3"}]),
        "answer: the final answer's thousands separators are ill-formed",
    ),
    "gsm8k 1.000,5 is not 1.0005": (
        "gsm8k", lambda r: gsm8k_dir(r, [{"question": "q2", "answer": "#### 1.000,5"}]),
        "answer: the final answer's thousands separators are ill-formed",
    ),
    "gsm8k invalid UTF-8 line": (
        "gsm8k", lambda r: gsm8k_dir(r, [b'{"question": "caf\xe9", "answer": "#### 2"}']),
        "<record>: invalid UTF-8 (byte 17 of the line)",
    ),
    "gsm8k JSON line nested 10^5 deep": (
        "gsm8k", lambda r: gsm8k_dir(r, [b'{"question": "q", "answer": "#### 2", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"]),
        "<record>: JSON nested too deeply",
    ),
    "gsm8k 20k spaces after ####": (
        "gsm8k", lambda r: gsm8k_dir(r, [{"question": "q2", "answer": "#### " + " " * 20000}]),
        "answer: the final answer after '####' is not a number",
    ),
    "math lone surrogate in the solution (stored in extra_info)": (
        "math", lambda r: math_dir(r, [{"problem": "p", "answer": "1", "solution": f"s{SURROGATE}"}]),
        "extra_info.solution: not valid Unicode",
    ),
    "math level beyond int64": (
        "math", lambda r: math_dir(r, [{"problem": "p", "answer": "1", "level": 2**70}]),
        "level: not a MATH level",
    ),
    "math level of 5,000 digits": (
        "math", lambda r: math_dir(r, [b'{"problem": "p", "answer": "1", "level": ' + HUGE_INT.encode() + b"}"]),
        "level: not a MATH level",
    ),
    "math level of another type": (
        "math", lambda r: math_dir(r, [{"problem": "p", "answer": "1", "level": [3]}]),
        "level: not a MATH level",
    ),
    "guru lone surrogate in a pass-through column": (
        "guru", lambda r: guru_file(r, [guru_row(9, note=f"x{SURROGATE}")]),
        "extra_info.note: not valid Unicode",
    ),
    "guru lone surrogate in the prompt": (
        "guru", lambda r: guru_file(r, [guru_row(9, prompt=[{"role": "user", "content": SURROGATE}])]),
        "prompt[0].content: not valid Unicode",
    ),
    "guru int beyond int64 in a pass-through column": (
        "guru", lambda r: guru_file(r, [guru_row(9, pass_rate=2**64)]),
        "extra_info.pass_rate: an integer beyond the 64-bit range",
    ),
    "guru 5,000-digit int in a pass-through column": (
        "guru", lambda r: guru_file(r, [json.dumps(guru_row(9))[:-1].encode() + b', "n": ' + HUGE_INT.encode() + b"}"]),
        "extra_info.n: an integer beyond the 64-bit range",
    ),
    "guru 5,000-digit int inside a pass-through list": (
        "guru", lambda r: guru_file(r, [json.dumps(guru_row(9))[:-1].encode() + b', "n": [' + HUGE_INT.encode() + b"]}"]),
        "extra_info.n: an integer beyond the 64-bit range",
    ),
    "toolace lone surrogate in a user turn": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression='1')]", user=f"hi{SURROGATE}")]),
        "conversations[0].value: not valid Unicode",
    ),
    "toolace lone surrogate escaped in the tool list": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression='1')]", system=MARKER + json.dumps(
            [{"name": "calc", "description": SURROGATE}]))]),
        "prompt[0].content: not valid Unicode",
    ),
    "toolace lone surrogate escaped in a call argument": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression='\\ud83d')]")]),
        "ground_truth: not valid Unicode",
    ),
    "toolace 1+1+... (3,000 terms)": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression=" + "+".join(["1"] * 3000) + ")]")]),
        "unparseable tool call (an expression nested too deeply)",
    ),
    "toolace -----...1 (3,000 signs)": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression=" + "-" * 3000 + "1)]")]),
        "unparseable tool call (an expression nested too deeply)",
    ),
    "toolace 5,000-digit argument": (
        "toolace", lambda r: toolace_dir(r, [conversation(f"[calc(expression={HUGE_INT})]")]),
        "unparseable tool call",
    ),
    "toolace number a float cannot hold exactly (ground truth would say 1.0)": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc(expression=1.0000000000000000001)]")]),
        "unparseable tool call (a number a 64-bit float cannot hold exactly)",
    ),
    "toolace speaker that is a list": (
        "toolace", lambda r: toolace_dir(r, [{"system": MARKER + json.dumps(TOOLS), "conversations": [
            {"from": ["user"], "value": "hi"}, {"from": "assistant", "value": "[calc()]"}]}]),
        "conversations[0].from: speaker is not user, assistant or tool",
    ),
    "guru ground truth NaN": (
        "guru", lambda r: guru_file(r, [b'{"data_source": "math__x", "prompt": [{"role": "user", "content": "c"}], '
                                         b'"reward_model": {"ground_truth": NaN}}']),
        "reward_model.ground_truth: not a finite number",
    ),
    "toolace tool list nested 10^5 deep": (
        "toolace", lambda r: toolace_dir(r, [conversation("[calc()]", system=MARKER + "[" * DEEP + "]" * DEEP)]),
        "system: the function list is nested too deeply",
    ),
}


@pytest.mark.parametrize("case", sorted(ROW_CASES))
def test_row_problem_is_a_counted_skip_and_a_strict_stop(prep, tmp_path, case):
    dataset, build, reason = ROW_CASES[case]
    raw = build(tmp_path)
    flags = ("--test_size", "1") if dataset in ("guru", "toolace") else ()
    outcome = prep(dataset, raw, *flags)
    assert outcome.status == 0, outcome.err
    assert reason in outcome.out, outcome.out
    assert "Traceback" not in outcome.err
    assert_counts_add_up(outcome)
    bad_row = 1 if dataset in ("gsm8k", "math") else 4  # after the good records the builders write first
    # the counted skip says where: on screen and in the manifest
    assert re.search(rf"\(at row {bad_row}\b", outcome.out), outcome.out
    where = json.dumps([report.get("turns", report)["skipped_at"] for report in outcome.reports()] +
                       [report["skipped_at"] for report in outcome.reports()])
    assert re.search(rf"row {bad_row}\b", where), where
    text = json.dumps([outcome.rows("train"), outcome.rows("test")])
    assert SURROGATE not in text
    strict = prep(dataset, raw, *flags, "--strict")
    assert strict.status == 2 and "Traceback" not in strict.err
    assert f": row {bad_row}" in strict.err and "field '" in strict.err, strict.err
    assert "error: " + str(raw) in strict.err


# --- values that must come through unchanged (not skipped, not altered) ----------------------------------

def test_gsm8k_well_formed_thousands_and_unused_huge_values_are_kept(prep, tmp_path):
    raw = gsm8k_dir(
        tmp_path,
        [
            {"question": "q1", "answer": "#### 1,234"},
            {"question": "q2", "answer": "#### -12,345.5"},
            b'{"question": "q3", "answer": "#### 7", "unused": ' + HUGE_INT.encode() + b"}",
        ],
    )
    outcome = prep("gsm8k", raw)
    assert outcome.status == 0, outcome.err
    truths = [row["reward_model"]["ground_truth"] for row in outcome.rows("train")]
    assert truths == ["4", "1234", "-12345.5", "7"]
    assert_counts_add_up(outcome)


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_byte_order_mark_costs_no_row(prep, tmp_path, fmt):
    raw = tmp_path / "bom"
    raw.mkdir()
    records = [{"question": "first", "answer": "#### 1"}, {"question": "second", "answer": "#### 2"}]
    for split in ("train", "test"):
        body = "".join(json.dumps(r) + "\n" for r in records) if fmt == "jsonl" else json.dumps(records)
        (raw / f"{split}.{fmt}").write_bytes(b"\xef\xbb\xbf" + body.encode())
    outcome = prep("gsm8k", raw)
    assert outcome.status == 0, outcome.err
    assert [row["extra_info"]["question"] for row in outcome.rows("train")] == ["first", "second"]
    assert "rows in 2, rows out 2, skipped 0" in outcome.out


def test_guru_pass_through_of_mixed_types_is_stored_as_text_and_said(prep, tmp_path):
    raw = guru_file(tmp_path, [guru_row(8, tag=3), guru_row(9, tag="three")])
    outcome = prep("guru", raw, "--test_size", "1")
    assert outcome.status == 0, outcome.err
    tags = {row["extra_info"].get("tag") for row in outcome.rows("train") + outcome.rows("test")}
    assert tags == {None, "3", "three"}
    assert "note: extra_info.tag holds number and text values: stored as text" in outcome.out
    assert_counts_add_up(outcome)


def test_math_level_of_either_form_is_kept(prep, tmp_path):
    raw = math_dir(tmp_path, [{"problem": "p", "answer": "1", "level": 3}, {"problem": "q", "answer": "1", "level": "Level ?"}])
    outcome = prep("math", raw)
    assert outcome.status == 0, outcome.err
    assert [row["extra_info"]["level"] for row in outcome.rows("train")] == [1, 3, None]


def test_parquet_text_that_is_not_utf8_is_a_counted_skip(prep, tmp_path):
    raw = tmp_path / "bad_utf8"
    raw.mkdir()
    offsets = pa.py_buffer(bytes([0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0]))
    question = pa.Array.from_buffers(pa.string(), 2, [None, offsets, pa.py_buffer(b"q\xff\xfe")])
    table = pa.table({"question": question, "answer": pa.array(["#### 1", "#### 2"])})
    pq.write_table(table, raw / "train.parquet")
    pq.write_table(table.slice(0, 1), raw / "test.parquet")
    outcome = prep("gsm8k", raw)
    assert outcome.status == 0, outcome.err
    assert "<record>: invalid UTF-8 in a text column" in outcome.out
    assert [row["extra_info"]["question"] for row in outcome.rows("train")] == ["q"]
    strict = prep("gsm8k", raw, "--strict")
    assert strict.status == 2 and "train.parquet: row 1: field '<record>': invalid UTF-8" in strict.err


# --- file-level problems: error: ..., exit 2, nothing written --------------------------------------------

def _corrupt_parquet(root: Path) -> Path:
    raw = root / "corrupt"
    raw.mkdir()
    table = pa.table({"question": [f"q{i} " * 50 for i in range(2000)], "answer": ["#### 1"] * 2000})
    pq.write_table(table, raw / "train.parquet", compression="none", row_group_size=500)
    pq.write_table(table.slice(0, 3), raw / "test.parquet")
    data = bytearray((raw / "train.parquet").read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4000] = b"\xff" * 4000  # a page in the middle, the footer intact
    (raw / "train.parquet").write_bytes(bytes(data))
    return raw


FILE_CASES = {
    "corrupt parquet page": (lambda r: ("gsm8k", _corrupt_parquet(r)), "train.parquet: cannot read the rows from row"),
    "JSON array nested 10^5 deep": (
        lambda r: ("toolace", toolace_dir(r, [], raw_text="[" * DEEP + "]" * DEEP)), "JSON nested too deeply to read"),
    "JSON array with invalid UTF-8": (
        lambda r: ("toolace", _write(r / "t", "data.json", b'[{"system": "caf\xe9"}]')), "not valid UTF-8 (byte 16)"),
    "empty JSON Lines file": (lambda r: ("gsm8k", gsm8k_dir(r, [], test=[])), "no readable record"),
    "incomplete shard set": (
        lambda r: ("gsm8k", _shards(r, ["train-00000-of-00002.jsonl"])), "incomplete shard set for split 'train'"),
    "whole file and shards": (
        lambda r: ("gsm8k", _shards(r, ["train.jsonl", "train-00000-of-00001.jsonl"])), "both whole (train.jsonl) and as shards"),
    "shard set claiming 999,999,999 shards": (
        lambda r: ("gsm8k", _shards(r, ["train-00000-of-999999999.jsonl"])), "999999998 of 999999999 missing"),
    "missing folder": (lambda r: ("guru", r / "nowhere"), "no such file or directory"),
}


def _write(folder: Path, name: str, content: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(content)
    return folder


def _shards(root: Path, names: list[str]) -> Path:
    folder = root / "shards"
    folder.mkdir()
    for name in names + ["test.jsonl"]:
        write_jsonl(folder / name, [GOOD_GSM8K])
    return folder


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_file_problem_is_a_clean_error(prep, tmp_path, case):
    build, fragment = FILE_CASES[case]
    dataset, raw = build(tmp_path)
    outcome = prep(dataset, raw, *(("--test_size", "1") if dataset in ("guru", "toolace") else ()))
    assert_clean_error(outcome, fragment)


@pytest.mark.parametrize("flag", ["--local_save_dir", "--local_dataset_path"])
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, capsys, flag):
    from data_prep import gsm8k

    argv = {"--local_save_dir": str(tmp_path / "out"), "--local_dataset_path": str(tmp_path)}
    argv[flag] = ""
    with pytest.raises(SystemExit) as exit_info:
        gsm8k.main([item for pair in argv.items() for item in pair])
    assert exit_info.value.code == 2
    assert f"argument {flag}: expected a path, got an empty value" in capsys.readouterr().err


def test_a_stray_backup_beside_the_split_is_not_a_shard(prep, tmp_path):
    raw = gsm8k_dir(tmp_path, [])
    write_jsonl(raw / "train-old-backup.jsonl", [{"question": "old", "answer": "#### 9"}] * 3)
    outcome = prep("gsm8k", raw)
    assert outcome.status == 0, outcome.err
    assert len(outcome.rows("train")) == 1
    assert "train-old-backup.jsonl is not read: not a file of split 'train'" in outcome.err
    write_jsonl(raw / ("train-" + "9" * 200 + "-of-1.jsonl"), [GOOD_GSM8K])  # over 9 digits: not a shard
    again = prep("gsm8k", raw)
    assert again.status == 0 and len(again.rows("train")) == 1 and "is not read" in again.err


def test_complete_shards_are_read_in_index_order(prep, tmp_path):
    raw = tmp_path / "shards"
    raw.mkdir()
    for index in (1, 0, 2):  # written out of order; the index decides
        write_jsonl(raw / f"train-{index:05d}-of-00003.jsonl", [{"question": f"q{index}", "answer": "#### 1"}])
    write_jsonl(raw / "test.jsonl", [GOOD_GSM8K])
    outcome = prep("gsm8k", raw)
    assert [row["extra_info"]["question"] for row in outcome.rows("train")] == ["q0", "q1", "q2"]


# --- duplicates across splits ------------------------------------------------------------------------------

def test_train_rows_sharing_a_test_prompt_are_counted_and_can_be_dropped(prep, tmp_path):
    shared = {"question": "Test?", "answer": "#### 1"}
    raw = gsm8k_dir(tmp_path, [shared, shared], test=[shared])
    kept = prep("gsm8k", raw)
    assert len(kept.rows("train")) == 3
    assert "note: 2 rows share their prompt with a test row (kept; --drop_duplicates drops them)" in kept.out
    dropped = prep("gsm8k", raw, "--drop_duplicates")
    assert len(dropped.rows("train")) == 1
    assert "rows in 3, rows out 1, skipped 0, filtered 2" in dropped.out
    assert_counts_add_up(dropped)


def test_held_out_splits_keep_rows_sharing_a_prompt_together(prep, tmp_path):
    same = [guru_row(7), guru_row(7), guru_row(7)]
    raw = guru_file(tmp_path, same)
    for seed in range(6):
        outcome = prep("guru", raw, "--test_size", "2", "--seed", str(seed))
        splits = {row["extra_info"]["split"] for row in outcome.rows("train") + outcome.rows("test")
                  if row["reward_model"]["ground_truth"] == "7"}
        assert len(splits) == 1


# --- time: linear in the input ------------------------------------------------------------------------------

def test_long_inputs_take_linear_time():
    """Quadratic versions took minutes on 5,000 calls: the cost at 4n over the cost at n tells them apart on any
    machine (about 4 for linear, 16 for quadratic)."""
    from data_prep.gsm8k import final_answer
    from data_prep.split_report import MalformedRecord
    from data_prep.tool_call_syntax import parse_call_list

    def answers(n: int) -> None:
        for text in ("#### " + " " * n, "#### " + ",1" * n, "#### 1" + " " * n + "x"):
            with pytest.raises(MalformedRecord):
                final_answer(text)

    def calls(n: int) -> None:
        assert len(parse_call_list("[" + ", ".join(f"f(a={i})" for i in range(n)) + "]")) == n

    assert cost_ratio(answers, 2500) < LINEAR  # 10,000 characters at 4n
    assert cost_ratio(calls, 500) < LINEAR  # 2,000 calls at 4n


# --- generated inputs ---------------------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789,.- ", max_size=14))
def test_gsm8k_final_answer_never_guesses(number):
    """Either the exact number (only well-formed thousands commas removed) or a skip; nothing in between."""
    import re

    from data_prep.gsm8k import final_answer
    from data_prep.split_report import MalformedRecord

    try:
        value = final_answer(f"work\n#### {number}")
    except MalformedRecord as error:
        assert error.field == "answer"
        return
    stripped = number.strip()
    assert re.fullmatch(r"-?\d+(\.\d+)?", stripped) or re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", stripped)
    assert value == stripped.replace(",", "")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(
    st.binary(max_size=40),
    st.builds(lambda q, a: json.dumps({"question": q, "answer": a}).encode(), st.text(max_size=8), st.text(max_size=8)),
    st.sampled_from([b"\xef\xbb\xbf{}", b"[1]", b"null", b'{"question": "\\ud800", "answer": "#### 1"}']),
), max_size=6))
def test_gsm8k_any_jsonl_bytes_end_cleanly(prep, tmp_path, lines):
    """Any bytes as JSON Lines: exit 0 with counts that add up, or a clean error; never a traceback."""
    raw = tmp_path / "fuzz"
    raw.mkdir(exist_ok=True)
    (raw / "train.jsonl").write_bytes(b"\n".join(lines) + b"\n" + line(GOOD_GSM8K))
    write_jsonl(raw / "test.jsonl", [GOOD_GSM8K])
    outcome = prep("gsm8k", raw)
    assert outcome.status in (0, 2) and "Traceback" not in outcome.err
    if outcome.status == 0:
        assert_counts_add_up(outcome)
        assert len(outcome.rows("train")) >= 1


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="[](){},=\"'abf1-+.: \\\n", max_size=40))
def test_call_parser_raises_only_its_own_error(text):
    from data_prep.tool_call_syntax import CallSyntaxError, looks_like_call_list, parse_call_list

    looks_like_call_list(text)
    try:
        calls = parse_call_list(text)
    except CallSyntaxError:
        return
    json.dumps(calls, allow_nan=False)  # whatever it returns is JSON


# --- a raw file that is no regular file (issue 41): refused with what it is, not "no such file" -------------------

RAW_KINDS = {
    "FIFO": ("a FIFO, not a regular file", lambda path: os.mkfifo(path)),
    "link to /dev/zero": ("a character device, not a regular file", lambda path: os.symlink("/dev/zero", path)),
    "link to nothing": ("a symbolic link to nothing", lambda path: os.symlink(path.parent / "gone.json", path)),
    "sparse file beyond the bound": ("more than the", lambda path: open(path, "wb").truncate(MAX_JSON_BYTES + 1)),
}
# (dataset, the raw path given, the file the command reads): the file itself, or the file inside the folder given
RAW_PLACES = {
    "toolace file": ("toolace", "data.json", "data.json"),
    "toolace folder": ("toolace", ".", "data.json"),
    "guru file": ("guru", "math__combined.json", "math__combined.json"),
    "guru folder": ("guru", ".", "math__combined.json"),
}
RAW_CHILD = """
import contextlib, io, json, sys
for case, dataset, raw, save in json.loads(sys.argv[1]):
    module = __import__(f"data_prep.{dataset}", fromlist=["main"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = module.main(["--local_save_dir", save, "--local_dataset_path", raw, "--test_size", "1"])
    print(json.dumps({"case": case, "status": status, "err": err.getvalue()}), flush=True)
"""


@pytest.fixture(scope="module")
def raw_kind_outcomes(tmp_path_factory):
    """{case: (outcome, the file named, the save folder)}: every (place, kind) run in one child process with a timeout
    (a regression would block on the FIFO or read /dev/zero until memory runs out)."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("raw_kinds")
    cases, named = [], {}
    for place, (dataset, given, file_name) in RAW_PLACES.items():
        for kind, (_, make) in RAW_KINDS.items():
            case = f"{place}, {kind}"
            folder = root / f"{len(cases)}"
            folder.mkdir()
            make(folder / file_name)
            named[case] = (folder / file_name, root / f"save{len(cases)}")
            cases.append((case, dataset, str(folder / given), str(named[case][1])))
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run([sys.executable, "-c", RAW_CHILD, json.dumps(cases)], cwd=repo, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(repo)},
                           preexec_fn=lambda: __import__("resource").setrlimit(
                               __import__("resource").RLIMIT_AS, (4 * 2**30, 4 * 2**30)))
    lines = [json.loads(text) for text in child.stdout.splitlines() if text.startswith("{")]
    assert child.returncode == 0 and len(lines) == len(cases), child.stdout[-2000:] + child.stderr[-3000:]
    return {line["case"]: (line, *named[line["case"]]) for line in lines}


@pytest.mark.parametrize("kind", sorted(RAW_KINDS))
@pytest.mark.parametrize("place", sorted(RAW_PLACES))
def test_a_raw_file_that_is_no_regular_file_is_refused_saying_what_it_is(raw_kind_outcomes, place, kind):
    outcome, path, save_dir = raw_kind_outcomes[f"{place}, {kind}"]
    err = outcome["err"]
    assert outcome["status"] == 2 and err.startswith("error: ") and "Traceback" not in err, err
    assert str(path) in err and RAW_KINDS[kind][0] in err and "no such file" not in err, err
    assert not save_dir.exists()  # refused before anything was converted or written


@pytest.mark.parametrize("kind", ["FIFO", "link to /dev/zero"])
def test_a_manifest_that_is_no_regular_file_is_no_manifest(tmp_path, kind):
    """The manifest is read with the one bounded reader: ``python -m data_prep.manifest`` says the folder is incomplete
    (exit 1) instead of blocking on a FIFO or reading /dev/zero (a child process with a timeout: a regression fails)."""
    import subprocess
    import sys

    (tmp_path / "train.parquet").write_bytes(b"x")
    RAW_KINDS[kind][1](tmp_path / MANIFEST_NAME)
    repo = Path(__file__).resolve().parents[2]
    child = subprocess.run([sys.executable, "-m", "data_prep.manifest", str(tmp_path), "train.parquet"], cwd=repo,
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(repo)})
    assert child.returncode == 1 and f"no readable {MANIFEST_NAME}" in child.stdout, child.stdout + child.stderr
