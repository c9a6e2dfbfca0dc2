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

from data_prep.split_report import INVALID_UNICODE, is_valid_unicode

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


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


def storage_problem(row: dict[str, Any]) -> tuple[str, str] | None:
    """``(field, reason)`` for the first value of ``row`` that parquet cannot store, else None.

    Parquet text is UTF-8 (a lone surrogate cannot be written) and its integers are 64-bit; any other
    type than JSON's has no column type here. The field is a path such as ``extra_info.pass_rate`` or
    ``prompt[0].content``. Walks without recursion, so any nesting depth is fine.
    """
    return _first_unstorable(row)


def unstorable_rows(rows: Sequence[dict[str, Any]]) -> dict[int, tuple[str, str]]:
    """``{position: (field, reason)}`` for the rows parquet cannot store.

    Asks pyarrow first, for all rows at once (C++ speed; the common case: nothing to report); only when it
    refuses are the rows walked one by one (:func:`storage_problem`) to find and name the culprits. Rows
    that are each fine but disagree on a column's type are not reported here (that is the dataset's
    business: Guru stores such pass-through columns as text).
    """
    import pyarrow as pa

    try:
        pa.Table.from_pylist(list(rows))
        return {}
    except Exception:  # pyarrow raises ArrowInvalid, ArrowTypeError, OverflowError, UnicodeEncodeError
        pass
    found = {}
    for position, row in enumerate(rows):
        problem = storage_problem(row)
        if problem is not None:
            found[position] = problem
    return found


def _first_unstorable(row: dict[str, Any]) -> tuple[str, str] | None:
    stack: list[tuple[str, Any]] = [(name, value) for name, value in reversed(row.items())]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if not is_valid_unicode(value):
                return path, INVALID_UNICODE
        elif isinstance(value, bool) or value is None or isinstance(value, float):
            continue
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                return path, "an integer beyond the 64-bit range"
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if not isinstance(key, str) or not is_valid_unicode(key):
                    return path, "a key that is not valid text"
                stack.append((f"{path}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
        else:
            return path, f"a value parquet cannot store ({value!r})"
    return None


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Write rows to ``path`` (parent folders created); returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path
