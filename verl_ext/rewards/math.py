"""MATH and Guru-Math reward: the last ``\\boxed{}`` answer is equivalent to the ground truth.

    answer  = content of the last brace-balanced \\boxed{...} or \\fbox{...} of the response
              (Guru: of the text after the last </think>, when the response has one)
    score   = acc = 1 if equivalent(ground truth, answer) else 0        no box -> 0

Equivalence (:mod:`verl_ext.rewards.math_equivalence`): string normalisation and exact rationals in
this thread, then ``math-verify`` (symbolic, via sympy) in a child process under a wall-clock budget
(:mod:`verl_ext.rewards.equivalence_pool`, default 5 s, ``math_timeout_s`` to change); past the budget
the answer scores 0 and ``timed_out`` is 1. ``format_ok`` is 1 when a box was found and, if the
response opens a ``<think>`` block, it also closes it.
"""

from __future__ import annotations

from verl_ext.rewards.boxed_answer import BOX_COMMANDS, last_boxed_content
from verl_ext.rewards.equivalence_pool import check_equivalent
from verl_ext.rewards.reward_result import as_text, reward_result

THINK_END = "</think>"


def final_answer(text: str, strip_thinking: bool = False) -> str | None:
    """The last boxed answer (after the last ``</think>`` when ``strip_thinking``), or None."""
    if strip_thinking:
        end = text.rfind(THINK_END)
        if end >= 0:
            text = text[end + len(THINK_END) :]
    answer = last_boxed_content(text)
    if answer is None or not answer.strip():
        return None
    return answer.strip()


def ground_truth_answer(ground_truth) -> str:
    """The ground truth as an answer string; a boxed ground truth is unboxed."""
    truth = as_text(ground_truth).strip()
    if any(command in truth for command in BOX_COMMANDS):
        return final_answer(truth) or truth
    return truth


def compute_score(solution_str, ground_truth, *, strip_thinking: bool = False, timeout_s: float | None = None):
    text = as_text(solution_str)
    answer = final_answer(text, strip_thinking)
    think_closed = "<think>" not in text or THINK_END in text
    if answer is None:
        return reward_result(0.0, correct=False, answer_found=False, format_ok=False)
    format_ok = think_closed
    truth = ground_truth_answer(ground_truth)
    if not truth:
        return reward_result(0.0, correct=False, answer_found=True, format_ok=format_ok, scorer_error=True)
    outcome = check_equivalent(truth, answer, timeout_s)
    return reward_result(
        float(outcome.equivalent),
        correct=outcome.equivalent,
        answer_found=True,
        format_ok=format_ok,
        timed_out=outcome.timed_out,
        scorer_error=outcome.failed,
    )
