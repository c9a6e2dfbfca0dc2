"""verl's RL row schema, and writing rows to parquet.

A row, as verl's ``RLHFDataset`` and reward managers read it::

    data_source   str                         picks the reward function (verl_ext.rewards.compute_score)
    prompt        [{"role": str, "content": str}, ...]   the chat messages given to the policy
    ability       str                         "math", "tool_use", ...
    reward_model  {"style": "rule", "ground_truth": str}
    extra_info    {"split": str, "index": int, ...}      passed to the reward function as ``extra_info``
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def rl_row(
    *, data_source: str, prompt: list[dict[str, str]], ability: str, ground_truth: str, extra_info: dict[str, Any]
) -> dict[str, Any]:
    """One row in verl's schema. ``extra_info`` must already hold ``split`` and ``index``."""
    if "split" not in extra_info or "index" not in extra_info:
        raise ValueError("extra_info needs 'split' and 'index'")
    return {
        "data_source": data_source,
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": dict(extra_info),
    }


def user_prompt(text: str) -> list[dict[str, str]]:
    """A chat prompt of one user message."""
    return [{"role": "user", "content": text}]


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write rows to ``path`` (parent folders created); returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path
