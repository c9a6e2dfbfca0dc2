"""Synthetic verl file-logger records for the lab's unit tests (what verl writes, with chosen values)."""

import json
from pathlib import Path
from typing import Optional, Sequence


def step_records(rewards: Sequence[float], kl: Optional[Sequence[float]] = None, lag: Optional[Sequence[int]] = None,
                 ppo_kl: Optional[Sequence[float]] = None) -> list[dict]:
    """``[{"step": 1, "data": {...}}, ...]``: one record per training step, as verl's FileLogger writes them."""
    records = []
    for index, reward in enumerate(rewards):
        data = {"critic/score/mean": reward, "training/global_step": index + 1, "timing_s/step": 2.0}
        if kl is not None:
            data["actor/kl_loss"] = kl[index]
        if lag is not None:
            data["staleness/lag"] = lag[index]
        if ppo_kl is not None:
            data["actor/ppo_kl"] = ppo_kl[index]
        records.append({"step": index + 1, "data": data})
    return records


def as_steps(records: list[dict]) -> list[dict]:
    """What verl_ext.metrics_file.read_metrics_file(...).steps returns for ``records``."""
    return [{"step": record["step"], **record["data"]} for record in records]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path
