"""Prompts shared across splits: a test question that is also a training question inflates test scores.

Two rows share a prompt when their ``prompt`` messages are equal, character for character. Datasets that
ship their own splits (GSM8k, MATH) are checked: every training row whose prompt is also in an evaluation
split is counted in a note of the train report, and ``--drop_duplicates`` drops those training rows
(counted as *filtered*). Held-out splits made here (Guru, ToolACE) cannot overlap: :func:`merge_by_prompt`
puts every group of rows sharing a prompt into one group, which the split keeps whole.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from data_prep.split_report import SplitReport

Row = dict[str, Any]


def add_drop_duplicates_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--drop_duplicates",
        action="store_true",
        help="drop training rows whose prompt is also in an evaluation split (default: keep them, counted)",
    )


def prompt_key(row: Row) -> tuple:
    """The prompt's messages as (role, content) pairs (rows hold nothing else in a message)."""
    return tuple((message["role"], message["content"]) for message in row["prompt"])


def flag_shared_prompts(
    outputs: dict[str, list[Row]], reports: dict[str, SplitReport], evaluation: Sequence[str], drop: bool
) -> None:
    """Count (or, with ``drop``, remove) the ``train`` rows whose prompt is also in an evaluation split."""
    train, report = outputs["train"], reports["train"]
    for name in evaluation:
        if name not in outputs:
            continue
        keys = {prompt_key(row) for row in outputs[name]}
        shared = sum(1 for row in train if prompt_key(row) in keys)
        if not shared:
            continue
        if drop:
            train = [row for row in train if prompt_key(row) not in keys]
            report.filter(f"prompt also in {name} (--drop_duplicates)", shared)
            report.rows_out -= shared
        else:
            report.notes.append(
                f"{shared} rows share their prompt with a {name} row (kept; --drop_duplicates drops them)"
            )
    outputs["train"] = train


def merge_by_prompt(groups: Sequence[Sequence[Row]], report: SplitReport) -> list[list[Row]]:
    """Join the groups that share a prompt (in order of first appearance), noting how many were joined."""
    parent = list(range(len(groups)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_group: dict[str, int] = {}
    for index, group in enumerate(groups):
        for row in group:
            other = first_group.setdefault(prompt_key(row), index)
            a, b = root(other), root(index)
            if a != b:
                parent[max(a, b)] = min(a, b)
    merged: dict[int, list[Row]] = {}
    for index, group in enumerate(groups):
        merged.setdefault(root(index), []).extend(group)
    joined = len(groups) - len(merged)
    if joined:
        report.notes.append(
            f"{joined} groups of rows share a prompt with an earlier one: kept in the same split as it"
        )
    return list(merged.values())
