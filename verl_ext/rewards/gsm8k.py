"""GSM8k reward: the one number after the last ``####`` equals the ground truth, compared exactly.

Accepted spellings of 72 after the last ``####``: ``####72``, ``#### 72``, ``#### $72``, ``#### \\$72``,
``#### **72**``, ``#### 72.`` (sentence end), ``#### 72.0``, ``#### 72 dollars``; of 1000: ``#### 1,000``
and, with the digit-group separators of SI typesetting, ``#### 1\\u2009000`` (thin space),
``#### 1\\u202f000`` (narrow no-break space) and ``#### 1\\,000`` (LaTeX thin space), every group after
the first exactly three digits, one kind of separator per number.

The text after ``####`` must hold *one* number. It scores 0 (no answer read, ``answer_found`` = 0) when
the number is continued, on its line, by

* another digit after a space: ``#### 1 000``, ``#### 1\\u00a0000`` (an ordinary or no-break space
  separates words, so this reads as two numbers), ``#### 1\\u200900`` (not a group of three);
* an operator and a number: ``#### 3+4``, ``#### 12/4``, ``#### 2 * (3+4)``, ``#### 7 = 3+4``,
  ``#### 3:4``, ``#### 3 \\times 4``, ``#### 3 x 4``, or a list: ``#### 3, 4``; or an exponent: ``#### 1e3``.

Expressions are not evaluated: GSM8k asks for the final number, its ground truths are numbers, and
crediting ``#### 3+4`` would reward leaving the last step of the arithmetic undone (and reading only the
first number, as before, credited ``#### 3+4`` for 3).

    score = acc = 1 if Decimal(number) == Decimal(ground truth) else 0
    answer_found = one number follows the last ``####``;   format_ok = the response has a ``####``
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from verl_ext.rewards.reward_result import as_text, reward_result

MARKER = "####"
TAIL_CHARS = 200  # only this much text after the last marker is read
DIGIT_GROUP_SEPARATORS = (",", "\u2009", "\u202f", "\\,")  # comma, thin space, narrow no-break space, LaTeX \,

_GROUPED = "|".join(rf"\d{{1,3}}(?:{re.escape(separator)}\d{{3}})+" for separator in DIGIT_GROUP_SEPARATORS)
_NUMBER = rf"-?(?:{_GROUPED}|\d+)(?:\.\d+)?"
# Every "\s*" follows a required literal, so no two of them compete for the same spaces (which would
# backtrack in cubic time); the tail is left-stripped before matching.
_ANSWER = re.compile(rf"(?:\*\*\s*)?(?:\\?\$\s*)?(?P<number>{_NUMBER})(?!\d|[.,]\d)")
_GROUND_TRUTH = re.compile(rf"\\?\$?\s*(?P<number>{_NUMBER})")  # matched against the stripped text
_SPACE = r"(?:[^\S\n\r\v\f\x1c-\x1e\x85\u2028\u2029]|\\[,;:! ]|~)*"  # spaces within a line, and LaTeX's
_OPERATOR = r"(?:[-+*/×÷^=:,;xX·⋅∙∗]|\\(?:times|div|cdot))"  # x only when a number follows: 3 x 4, not 3 xylophones
# What may not follow the number: another digit, an operator (or list comma) then a number, an exponent.
_CONTINUATION = re.compile(rf"{_SPACE}(?:\d|{_OPERATOR}{_SPACE}(?:\\?\$)?(?:\d|\(|\.\d)|[eE][-+]?\d)")
_SEPARATOR = re.compile("|".join(re.escape(separator) for separator in DIGIT_GROUP_SEPARATORS))


def _as_decimal(number: str) -> Decimal | None:
    try:
        return Decimal(_SEPARATOR.sub("", number))
    except InvalidOperation:
        return None


def final_answer(text: str) -> Decimal | None:
    """The one number right after the last ``####`` (see the module docstring), or None."""
    position = text.rfind(MARKER)
    if position < 0:
        return None
    tail = text[position + len(MARKER) : position + len(MARKER) + TAIL_CHARS].replace("\u2212", "-").lstrip()
    match = _ANSWER.match(tail)
    if match is None or _CONTINUATION.match(tail, match.end()):
        return None
    return _as_decimal(match.group("number"))


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
