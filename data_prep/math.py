"""MATH (Hendrycks et al.) to verl parquet: train 7,500 / test 5,000, plus the MATH-500 evaluation file.

Two raw schemas are accepted, told apart by their columns:

* MATH-lighteval (``DigitalLearningGmbH/MATH-lighteval``): ``problem``, ``level`` ("Level 3"), ``type``,
  ``solution``; the ground truth is the content of the solution's last brace-balanced ``\\boxed{}``.
* MATH-500 / PRM800K (``HuggingFaceH4/MATH-500``): ``problem``, ``level``, ``subject``, ``unique_id``,
  ``answer``; the ground truth is ``answer``. A file with both ``answer`` and ``solution`` uses ``answer``.

    python -m data_prep.math --local_save_dir ~/data/math [--local_dataset_path DIR] [--no_math500] [--strict]
                             [--drop_duplicates]

``DIR`` holds ``train.*`` and ``test.*`` and, optionally, ``math500.*``. Output: ``train.parquet`` and
``test.parquet`` with ``data_source`` :data:`verl_ext.data_sources.MATH_LIGHTEVAL`, and ``math500.parquet`` with
:data:`verl_ext.data_sources.MATH_500` (kept apart so validation metrics are reported per source).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from data_prep.command import (
    base_parser,
    check_outputs_place,
    convert_split,
    print_reports,
    print_written,
    run_command,
    write_outputs,
)
from data_prep.overlap import add_drop_duplicates_flag, flag_shared_prompts
from data_prep.raw_records import (
    RawRecord,
    RawSplit,
    columns_of,
    find_split_files,
    has_split_files,
    load_hub_split,
    read_files,
    require_columns,
)
from data_prep.split_report import DataPrepError, MalformedRecord, SplitReport, text_field
from data_prep.verl_rows import rl_row, user_prompt
from verl_ext import data_sources
from verl_ext.rewards.boxed_answer import BOX_COMMANDS, last_boxed_content

DATASET = "math"
# hub dataset and split per output; the rows' data_source is the hub dataset's name
HUB_SOURCES = {"train": (data_sources.MATH_LIGHTEVAL, "train"), "test": (data_sources.MATH_LIGHTEVAL, "test"),
               "math500": (data_sources.MATH_500, "test")}
INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."

ANSWER_SCHEMA = "answer"  # MATH-500 / PRM800K
SOLUTION_SCHEMA = "solution"  # MATH-lighteval


def schema_of(raw: RawSplit) -> str:
    """Which of the two raw schemas ``raw`` follows; fails at once, naming the file, when neither."""
    columns = columns_of(raw)
    if "problem" in columns and "answer" in columns:
        return ANSWER_SCHEMA
    if "problem" in columns and "solution" in columns:
        return SOLUTION_SCHEMA
    raise DataPrepError(
        f"{raw.source}: wrong schema for math: need 'problem' plus 'answer' (MATH-500/PRM800K schema) or "
        f"'solution' (MATH-lighteval schema); found: {sorted(columns)}"
    )


MAX_LEVEL = 1000  # MATH has levels 1 to 5; anything far beyond is not a level


def parse_level(value: Any) -> int | None:
    """``"Level 3"`` or ``3`` -> 3; ``"Level ?"`` (present in MATH) or no level -> None.

    Anything else (``"hard"``, a float, a list, a level above :data:`MAX_LEVEL`) is a MalformedRecord
    on ``level``: a row is skipped and counted rather than stored with a level it did not have.
    """
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_LEVEL:
        return value
    if isinstance(value, str):
        if re.fullmatch(r"\s*Level\s*\?\s*", value):
            return None
        match = re.fullmatch(r"\s*(?:Level\s*)?(\d{1,4})\s*", value)
        if match and int(match.group(1)) <= MAX_LEVEL:
            return int(match.group(1))
    raise MalformedRecord("level", f"not a MATH level ('Level N', N from 0 to {MAX_LEVEL}, or 'Level ?')")


def ground_truth_from_solution(solution: str) -> str:
    answer = last_boxed_content(solution)
    if answer is None:
        if any(command in solution for command in BOX_COMMANDS):
            raise MalformedRecord("solution", "the last \\boxed{} is not closed")
        raise MalformedRecord("solution", "no \\boxed{} answer")
    if not answer.strip():
        raise MalformedRecord("solution", "the last \\boxed{} is empty")
    return answer.strip()


def make_converter(schema: str, data_source: str):
    def convert(data: dict[str, Any], record: RawRecord, report: SplitReport) -> list[dict[str, Any]]:
        problem = text_field(data, "problem")
        solution = data.get("solution") if isinstance(data.get("solution"), str) else None
        if schema == ANSWER_SCHEMA:
            answer = text_field(data, "answer").strip()
        else:
            answer = ground_truth_from_solution(text_field(data, "solution"))
        subject = data.get("subject", data.get("type"))
        return [
            rl_row(
                data_source=data_source,
                prompt=user_prompt(f"{problem} {INSTRUCTION}"),
                ability="math",
                ground_truth=answer,
                extra_info={
                    "split": report.split,
                    "index": record.row,
                    "question": problem,
                    "answer": answer,
                    "solution": solution,
                    "level": parse_level(data.get("level")),
                    "subject": subject if isinstance(subject, str) else None,
                    "source_id": data.get("unique_id") if isinstance(data.get("unique_id"), str) else None,
                },
            )
        ]

    return convert


def load_raw(output: str, local_dataset_path: str | None) -> RawSplit | None:
    """The raw split behind one output; None for a local ``math500`` that is absent (it is optional)."""
    if local_dataset_path is None:
        hub_name, split = HUB_SOURCES[output]
        return load_hub_split(hub_name, split)
    directory = Path(local_dataset_path).expanduser()
    if output == "math500" and directory.is_dir() and not has_split_files(directory, "math500"):
        return None
    return read_files(output, find_split_files(directory, output))


def run(args) -> None:
    outputs_wanted = ["train", "test"] + ([] if args.no_math500 else ["math500"])
    raws = {name: load_raw(name, args.local_dataset_path) for name in outputs_wanted}
    if raws.get("math500", True) is None:
        print(f"note: no math500.* file in {args.local_dataset_path}: math500.parquet not written", flush=True)
        del raws["math500"]
    check_outputs_place(args, raws.values())
    schemas = {}
    for name, raw in raws.items():  # check every input before converting any
        require_columns(raw, ("problem",), DATASET)
        schemas[name] = schema_of(raw)
    outputs, reports = {}, {}
    for name, raw in raws.items():
        data_source = HUB_SOURCES[name][0]
        reports[name] = SplitReport(DATASET, name, f"{raw.source}, {schemas[name]} schema")
        outputs[name] = convert_split(raw, make_converter(schemas[name], data_source), reports[name], args.strict)
    flag_shared_prompts(outputs, reports, ["test", "math500"], args.drop_duplicates)
    print_reports(reports.values())
    print_written(write_outputs(args, DATASET, outputs, list(reports.values())), outputs)


def build_parser():
    parser = base_parser(DATASET, __doc__.splitlines()[0])
    parser.add_argument("--no_math500", action="store_true", help="do not write the MATH-500 evaluation file")
    add_drop_duplicates_flag(parser)
    return parser


def main(argv=None) -> int:
    return run_command(run, build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
