"""The lab's results: one JSON record per run, and a table per algorithm and setting (terminal and Markdown).

Record of a run (the ``--json`` list's objects; the first seven keys are the issue's contract):
``algorithm`` (the preset's label, ``rec_oneside_nois`` or ``rec_oneside_nois@0.6_2``), ``sync_interval``,
``sync_offset``, ``offline``, ``seed``, ``final_reward`` (fraction of the task's maximum, mean over the last
10% of steps), ``steps_to_target`` (null if never), then ``name`` (the run name), ``setting`` (its one name,
``sync_interval_20``; :mod:`verl_ext.staleness.setting`), ``learning_rate``, ``epsilon_low``,
``epsilon_high`` (null for an unclipped algorithm), ``steps`` (logged), ``peak_reward``,
``kl_to_initial``, ``max_lag``, ``max_kl_to_behaviour`` (null when pi_old is not the behaviour policy),
``error`` (null unless the run failed). Definitions:
:mod:`verl_ext.lab.summary`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from verl_ext.lab.summary import GroupSummary, RunSummary
from verl_ext.runs.run import Run

JSON_KEYS = ("algorithm", "sync_interval", "sync_offset", "offline", "seed", "final_reward", "steps_to_target")


def run_record(run: Run, summary: Optional[RunSummary], error: Optional[str]) -> dict[str, Any]:
    """Everything the lab reports about one run; ``summary`` is kept for :func:`aggregate` (not JSON)."""
    has = summary is not None and bool(summary.steps)
    epsilons = run.algorithm.epsilons
    return {
        "algorithm": run.algorithm.label,
        "sync_interval": run.setting.sync_interval,
        "sync_offset": run.setting.sync_offset,
        "offline": run.setting.offline,
        "seed": run.seed,
        "final_reward": _rounded(summary.final_reward) if has else None,
        "steps_to_target": summary.steps_to_target if has else None,
        "name": run.name,
        "setting": run.setting.label,
        "learning_rate": run.learning_rate,
        "epsilon_low": epsilons[0] if epsilons else None,
        "epsilon_high": epsilons[1] if epsilons else None,
        "steps": len(summary.steps) if has else 0,
        "peak_reward": _rounded(summary.peak_reward) if has else None,
        "kl_to_initial": _rounded(summary.kl_to_initial) if has else None,
        "max_lag": summary.max_lag if has else None,
        "max_kl_to_behaviour": _rounded(summary.max_kl_to_behaviour) if has else None,
        "error": error if error else (None if has else "no training step logged"),
        "summary": summary if has else None,
    }


def _rounded(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(float(value), 4)


def json_records(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records without their in-memory summaries (what ``--json`` prints)."""
    return [{key: value for key, value in record.items() if key != "summary"} for record in records]


TABLE_COLUMNS = ("setting", "algorithm", "lr", "seeds", "final reward", "peak reward", "steps to target", "KL to initial",
                 "max KL to behaviour")


def table_rows(groups: Sequence[GroupSummary], target: float) -> list[list[str]]:
    rows = []
    for group in groups:
        seeds = str(len(group.seeds))
        if group.failed_seeds:
            seeds += f" ({len(group.failed_seeds)} failed)"
        rows.append(
            [
                group.setting,
                group.algorithm,
                f"{group.learning_rate:g}",
                seeds,
                group.final_reward.format(2),
                group.peak_reward.format(2),
                group.steps_to_target_text(),
                group.kl_to_initial.format(3),
                group.max_kl_to_behaviour.format(3),
            ]
        )
    return rows


def rich_table(groups: Sequence[GroupSummary], target: float, title: str = "verl-ext lab"):
    from rich.table import Table

    table = Table(title=title, caption=table_caption(target))
    for column in TABLE_COLUMNS:
        table.add_column(column, no_wrap=True)
    for row in table_rows(groups, target):
        table.add_row(*row)
    return table


def table_caption(target: float) -> str:
    return (
        "reward: fraction of the task's maximum (mean ± std over seeds); final = last 10% of steps; "
        f"peak = best 5-step mean; steps to target: first step whose 5-step mean >= {target:g} "
        "(mean over the seeds that reached it); KL to initial: verl's low_var_kl against the initial "
        "weights, last 10% of steps; max KL to behaviour: the largest actor/ppo_kl (mean log pi_behaviour - "
        "log pi_current on the step's batch, before the update) of the run, when pi_old is the behaviour policy"
    )


def markdown_table(groups: Sequence[GroupSummary], target: float) -> str:
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(groups, target)]
    return "\n".join(lines) + "\n"
