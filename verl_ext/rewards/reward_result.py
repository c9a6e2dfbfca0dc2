"""The one shape every scorer returns, and turning whatever verl passes in into text.

verl's reward manager stores every key of the returned dict in ``reward_extra_info`` and averages it per
batch, so all scorers return the same keys, all floats (1.0/0.0 for flags)::

    score         the reward used for training
    acc           1.0 iff the answer is fully correct (verl's validation reports ``acc`` per data source)
    answer_found  1.0 iff an answer could be extracted (``####`` number, ``\\boxed{}``, ``<tool_call>`` list)
    format_ok     1.0 iff the response follows the requested format (see each scorer)
    timed_out     1.0 iff the equivalence check ran out of its time budget (scored 0)
    scorer_error  1.0 iff the scorer hit an unexpected error or an unreadable ground truth (scored 0)
"""

from __future__ import annotations

from typing import Any

RESULT_KEYS = ("score", "acc", "answer_found", "format_ok", "timed_out", "scorer_error")


def reward_result(
    score: float,
    *,
    correct: bool,
    answer_found: bool,
    format_ok: bool,
    timed_out: bool = False,
    scorer_error: bool = False,
) -> dict[str, float]:
    return {
        "score": float(score),
        "acc": float(bool(correct)),
        "answer_found": float(bool(answer_found)),
        "format_ok": float(bool(format_ok)),
        "timed_out": float(bool(timed_out)),
        "scorer_error": float(bool(scorer_error)),
    }


def as_text(value: Any) -> str:
    """Any input as ``str``: bytes are decoded (invalid bytes replaced), None is empty, others ``str()``."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        return str(value)
    except Exception:
        return ""
