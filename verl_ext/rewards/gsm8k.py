"""GSM8k reward: the number after the last ``####`` equals the ground truth, compared as a number.

Accepted spellings of 72 after the last ``####``: ``####72``, ``#### 72``, ``#### $72``, ``#### \\$72``,
``#### **72**``, ``#### 72.`` (sentence end), ``#### 72.0``; and ``#### 1,000`` for 1000 (commas only in
groups of three). Anything else scores 0: a wrong number, no number right after ``####``, ``72,5``.

    score = acc = 1 if Decimal(number) == Decimal(ground truth) else 0
    answer_found = a number follows the last ``####``;   format_ok = the response has a ``####``
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from verl_ext.rewards.reward_result import as_text, reward_result

MARKER = "####"
TAIL_CHARS = 200  # only this much text after the last marker is read

_NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
# Every "\s*" follows a required literal, so no two of them compete for the same spaces (which would
# backtrack in cubic time); the tail is left-stripped before matching.
_ANSWER = re.compile(rf"(?:\*\*\s*)?(?:\\?\$\s*)?(?P<number>{_NUMBER})(?!\d|[.,]\d)")
_GROUND_TRUTH = re.compile(rf"\\?\$?\s*(?P<number>{_NUMBER})")  # matched against the stripped text


def _as_decimal(number: str) -> Decimal | None:
    try:
        return Decimal(number.replace(",", ""))
    except InvalidOperation:
        return None


def final_answer(text: str) -> Decimal | None:
    """The number right after the last ``####`` (see the module docstring), or None."""
    position = text.rfind(MARKER)
    if position < 0:
        return None
    tail = text[position + len(MARKER) : position + len(MARKER) + TAIL_CHARS].replace("\u2212", "-")
    match = _ANSWER.match(tail.lstrip())
    return _as_decimal(match.group("number")) if match else None


def compute_score(solution_str, ground_truth) -> dict[str, float]:
    text = as_text(solution_str)
    # Stripped first: surrounding "\s*" in the pattern would backtrack quadratically on 20k spaces.
    truth_text = as_text(ground_truth).strip().replace("\u2212", "-")
    truth_match = _GROUND_TRUTH.fullmatch(truth_text)
    truth = _as_decimal(truth_match.group("number")) if truth_match else None
    answer = final_answer(text)
    if truth is None:
        return reward_result(
            0.0, correct=False, answer_found=answer is not None, format_ok=MARKER in text, scorer_error=True
        )
    correct = answer is not None and answer == truth
    return reward_result(float(correct), correct=correct, answer_found=answer is not None, format_ok=MARKER in text)
