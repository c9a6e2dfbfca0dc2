"""ToolACE (``Team-ACE/ToolACE``) to verl parquet: one sample per parseable tool-call turn.

Each raw record is a conversation: ``system`` (holding the tool list as JSON) and ``conversations``
(``{"from": "user"|"assistant"|"tool", "value": str}``). Every assistant turn written in ToolACE's call
syntax (``[Name(arg=value, ...), ...]``, read by :mod:`data_prep.tool_call_syntax`) becomes one sample
whose prompt is our system prompt (tools + answer format) followed by the turns before it. The default
keeps single-turn samples only (the call answers the first user message, as in the REC paper's 5k
subset); ``--multi_turn`` keeps every call turn. The held-out test split is seeded and keeps each
conversation whole (and conversations sharing a sample prompt together).

Counts come in two units that each add up: *conversations* (out: gave a sample; skipped: malformed, or
every call turn in it was; filtered: nothing wrong, nothing selected) and, for the conversations read,
*assistant turns* (out: a sample; skipped: an unusable call; filtered: no call, or not selected).

The policy is asked to answer ``<think>...</think>`` then ``<tool_call>[{"name": ..., "arguments":
{...}}, ...]</tool_call>``; the ground truth is that JSON list (scored by ``verl_ext.rewards.toolace``).

    python -m data_prep.toolace --local_save_dir ~/data/toolace [--local_dataset_path DIR]
        [--multi_turn] [--test_size 500] [--max_train_size N] [--seed 42] [--strict]
        [--toolace_mode exact|partial] [--toolace_strict_format]

``DIR`` holds the hub's ``data.json`` (or ``data.jsonl``/``data.parquet``).
"""

from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from data_prep.command import (
    add_held_out_flags,
    base_parser,
    check_outputs_place,
    convert_split,
    held_out_split,
    number_rows,
    positive_int,
    print_reports,
    print_written,
    run_command,
    write_outputs,
)
from data_prep.overlap import merge_by_prompt
from data_prep.raw_records import RawRecord, RawSplit, exists_as_entry, find_split_files, load_hub_split, read_files, require_columns
from data_prep.split_report import INVALID_UNICODE, MalformedRecord, SplitReport, is_valid_unicode, text_field
from data_prep.tool_call_syntax import CallSyntaxError, looks_like_call_list, parse_call_list
from data_prep.verl_rows import rl_row, storage_problem
from verl_ext import data_sources

DATASET = "toolace"
HUB_NAME = data_sources.TOOLACE  # the rows' data_source is the hub dataset's name
REQUIRED_FIELDS = ("system", "conversations")
DEFAULT_TEST_SIZE = 500
TOOL_LIST_MARKER = "Here is a list of functions in JSON format that you can invoke:"
ROLES = {"user": "user", "assistant": "assistant", "tool": "tool"}

SYSTEM_PROMPT = """You are an expert in composing function calls. You are given a conversation and a set of \
functions. Decide which function call(s) fulfil the user's latest request.

The functions, as a JSON list:
{tools}

First think it through inside <think>...</think>. Then write every call you make as one JSON list inside \
<tool_call>...</tool_call>, each call an object with the function's "name" and its "arguments":
<think>your reasoning</think>
<tool_call>[{{"name": "function name", "arguments": {{"argument name": value}}}}]</tool_call>
Use the function names exactly as listed and write values as JSON (strings in quotes, numbers without, \
true/false/null)."""


def tool_list(system: str) -> list[dict[str, Any]]:
    """The JSON tool list embedded in a ToolACE system prompt."""
    marker = system.find(TOOL_LIST_MARKER)
    if marker < 0:
        raise MalformedRecord("system", "no function list")
    start = system.find("[", marker + len(TOOL_LIST_MARKER))
    if start < 0:
        raise MalformedRecord("system", "no function list")
    try:
        tools, _ = json.JSONDecoder().raw_decode(system, start)
    except ValueError:
        raise MalformedRecord("system", "the function list is not valid JSON") from None
    except RecursionError:
        raise MalformedRecord("system", "the function list is nested too deeply") from None
    if not isinstance(tools, list) or not tools:
        raise MalformedRecord("system", "the function list is empty or not a list")
    if not all(isinstance(tool, dict) and isinstance(tool.get("name"), str) for tool in tools):
        raise MalformedRecord("system", "a function without a string 'name'")
    return tools


def render_calls(calls: list[dict[str, Any]]) -> str:
    """Calls in the answer format the prompt asks for (used for earlier turns of a multi-turn context)."""
    return f"<tool_call>{json.dumps(calls, ensure_ascii=False)}</tool_call>"


def system_message(tools: list[dict[str, Any]]) -> dict[str, str]:
    return {"role": "system", "content": SYSTEM_PROMPT.format(tools=json.dumps(tools, ensure_ascii=False))}


def _turns(data: dict[str, Any]) -> list[tuple[str, str]]:
    conversations = data.get("conversations")
    if not isinstance(conversations, list) or not conversations:
        raise MalformedRecord("conversations", "not a non-empty list")
    turns = []
    for position, turn in enumerate(conversations):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise MalformedRecord(f"conversations[{position}]", "not an object with a string 'value'")
        if not is_valid_unicode(turn["value"]):
            raise MalformedRecord(f"conversations[{position}].value", INVALID_UNICODE)
        if not isinstance(turn.get("from"), str) or turn["from"] not in ROLES:
            raise MalformedRecord(f"conversations[{position}].from", "speaker is not user, assistant or tool")
        turns.append((turn["from"], turn["value"]))
    return turns


NO_CALL_TURN = "conversation without a tool-call turn"
NO_TURN_SELECTED = "no call turn answering the first user message (kept with --multi_turn)"
LATER_TURN = "call turn after the first user message (kept with --multi_turn)"


def make_converter(multi_turn: bool, strict: bool, reward_options: dict[str, Any] | None = None):
    """The record converter; a bad call turn is skipped alone (or, strict, stops the command).

    Counts: the conversation in ``report`` (by :func:`~data_prep.command.convert_split`), each of its
    assistant turns in ``report.turns``. ``reward_options`` (``toolace_mode``, ``toolace_strict_format``)
    are stored in every row's ``extra_info``, where :func:`verl_ext.rewards.compute_score` reads them
    (they win over run-wide ones).
    """

    def convert(data: dict[str, Any], record: RawRecord, report: SplitReport) -> list[dict[str, Any]]:
        turn_report = report.turns
        tools = tool_list(text_field(data, "system"))
        tool_names = {tool["name"] for tool in tools}
        turns = _turns(data)
        parsed: dict[int, list[dict[str, Any]]] = {}
        rows = []
        call_turns = skipped_turns = 0
        for position, (speaker, value) in enumerate(turns):
            if speaker != "assistant":
                continue
            turn_report.rows_in += 1
            if not looks_like_call_list(value):
                turn_report.filter("assistant turn without a tool call")
                continue
            call_turns += 1
            try:
                calls = parse_call_list(value)
            except CallSyntaxError as error:
                problem = ("conversations[].value", f"unparseable tool call ({error.reason})", error.detail)
            else:
                unknown = sorted({call["name"] for call in calls} - tool_names)
                problem = None
                if unknown:
                    problem = ("conversations[].value", "calls a function missing from the tool list", str(unknown))
            row = None
            if problem is None:
                parsed[position] = calls
                single_turn = position == 1 and turns[0][0] == "user"
                if not (single_turn or multi_turn):
                    turn_report.filter(LATER_TURN)
                    continue
                row = _sample(tools, turns, position, parsed, record, len(rows), single_turn, reward_options)
                stored = _unstorable(row)
                if stored is not None:
                    problem = (*stored, "")
            if problem is not None:
                field, reason, detail = problem
                if strict:
                    where = f"conversations[{position}].value" if field.startswith("conversations") else field
                    raise MalformedRecord(where, f"{reason}: {detail}" if detail else reason)
                turn_report.skip(field, reason, location=f"{record.location}, conversations[{position}]")
                skipped_turns += 1
                continue
            rows.append(row)
            turn_report.rows_out += 1
        if not rows:
            if skipped_turns:
                raise MalformedRecord("conversations", "every call turn was skipped (see the assistant turns)")
            report.filter(NO_CALL_TURN if not call_turns else NO_TURN_SELECTED)
        return rows

    return convert


def _unstorable(sample: dict[str, Any]) -> tuple[str, str] | None:
    """Why parquet cannot store ``sample``, if it cannot. A sample holds text and small counters only, so a
    lone surrogate (from a ``\\ud83d`` escape in the tool list or a call) is the one possible reason: one
    C-speed test of the whole sample, and the walk naming the field only when it fails."""
    if is_valid_unicode(json.dumps(sample, ensure_ascii=False)):
        return None
    return storage_problem(sample)


def _sample(tools, turns, position, parsed, record, index, single_turn, reward_options) -> dict[str, Any]:
    """The sample of the call turn at ``position``: system prompt, the turns before it, the calls as truth."""
    context = [
        {"role": ROLES[s], "content": render_calls(parsed[i]) if i in parsed else v}
        for i, (s, v) in enumerate(turns[:position])
    ]
    return rl_row(
        data_source=data_sources.TOOLACE,
        prompt=[system_message(tools), *context],
        ability="tool_use",
        ground_truth=json.dumps(parsed[position], ensure_ascii=False),
        extra_info={
            "split": "",
            "index": index,
            "source_id": f"row {record.row}, turn {position}",
            "source_row": record.row,
            "turn": position,
            "single_turn": single_turn,
            "num_calls": len(parsed[position]),
            **(reward_options or {}),
        },
    )


def load_raw(local_dataset_path: str | None) -> RawSplit:
    if local_dataset_path is None:
        return load_hub_split(HUB_NAME, "train")
    path = Path(local_dataset_path).expanduser()
    # a path that is there and no folder is the raw file, whatever it is (a FIFO, a link: read_files says what)
    return read_files("train", [path] if exists_as_entry(path) else find_split_files(path, "data"))


def cap_train_size(train: list[dict[str, Any]], max_train_size: int | None, seed: int) -> list[dict[str, Any]]:
    """A seeded random subset of ``max_train_size`` training rows, in their original order."""
    if max_train_size is None or len(train) <= max_train_size:
        return train
    keep = set(random.Random(seed).sample(range(len(train)), max_train_size))
    return [row for i, row in enumerate(train) if i in keep]


def run(args) -> None:
    raw = load_raw(args.local_dataset_path)
    check_outputs_place(args, [raw])
    require_columns(raw, REQUIRED_FIELDS, DATASET)
    source = f"{raw.source}, {'multi' if args.multi_turn else 'single'}-turn"
    report = SplitReport(DATASET, "source", source, unit="conversations")
    report.turns = SplitReport(DATASET, "source", "assistant turns of the conversations read", unit="assistant turns")
    reward_options = {}
    if args.toolace_mode is not None:
        reward_options["toolace_mode"] = args.toolace_mode
    if args.toolace_strict_format:
        reward_options["toolace_strict_format"] = True
    rows = convert_split(raw, make_converter(args.multi_turn, args.strict, reward_options), report, args.strict)
    by_conversation: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_conversation[row["extra_info"]["source_row"]].append(row)
    groups = merge_by_prompt(list(by_conversation.values()), report)
    print_reports([report])
    train, test = held_out_split(groups, args.test_size, args.seed, "samples")
    capped = cap_train_size(train, args.max_train_size, args.seed)
    note = f" (of {len(train)}, --max_train_size)" if len(capped) < len(train) else ""
    outputs = {"train": number_rows(capped, "train"), "test": number_rows(test, "test")}
    print(
        f"held-out split (seed {args.seed}) of {len(rows)} samples: train {len(capped)} rows{note}, "
        f"test {len(test)} rows",
        flush=True,
    )
    print_written(write_outputs(args, DATASET, outputs, [report]), outputs)


def build_parser():
    parser = base_parser(DATASET, __doc__.splitlines()[0])
    parser.add_argument("--multi_turn", action="store_true", help="keep call turns after the first user message")
    add_held_out_flags(parser, DEFAULT_TEST_SIZE)
    parser.add_argument(
        "--max_train_size",
        type=positive_int,
        default=None,
        help="keep a seeded random subset of this many training rows",
    )
    parser.add_argument(
        "--toolace_mode",
        choices=("exact", "partial"),
        default=None,
        help="store this reward mode in every row's extra_info (default: the run's reward_kwargs decide)",
    )
    parser.add_argument(
        "--toolace_strict_format",
        action="store_true",
        help="store toolace_strict_format=True in every row's extra_info (one think block, then the call)",
    )
    return parser


def main(argv=None) -> int:
    return run_command(run, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
