"""GSM8k scoring rules, as a table."""

from __future__ import annotations

import pytest

from verl_ext.rewards import compute_score

GSM8K = "openai/gsm8k"


@pytest.mark.parametrize(
    "response, truth",
    [
        ("so 72.\n#### 72", "72"),
        ("####72", "72"),
        ("#### $72", "72"),
        ("#### \\$72", "72"),
        ("#### 72.", "72"),
        ("#### 72.0", "72"),
        ("#### 72.000", "72"),
        ("#### **72**", "72"),
        ("#### 1,000", "1000"),
        ("#### 109,200,000", "109200000"),
        ("#### -5", "-5"),
        ("#### \u22125", "-5"),  # a Unicode minus
        ("#### 0.5", "0.5"),
        ("#### 72 dollars", "72"),
        ("first #### 3 then the real one #### 72", "72"),
        ("#### 72", "72.0"),
    ],
)
def test_gsm8k_correct(response, truth):
    result = compute_score(GSM8K, response, truth)
    assert result == {
        "score": 1.0,
        "acc": 1.0,
        "answer_found": 1.0,
        "format_ok": 1.0,
        "timed_out": 0.0,
        "scorer_error": 0.0,
    }


@pytest.mark.parametrize(
    "response, truth, answer_found",
    [
        ("#### 71", "72", 1.0),
        ("#### 72.5", "72", 1.0),
        ("#### 720", "72", 1.0),
        ("#### 7", "72", 1.0),
        ("#### 72,5", "72", 0.0),  # not a thousands group: no number is read
        ("#### 1,0000", "10000", 0.0),
        ("#### 72 \n#### 71", "72", 1.0),  # only the last #### counts
        ("#### 72 \n####", "72", 0.0),
        ("#### the answer is 72", "72", 0.0),
        ("The answer is 72", "72", 0.0),
        ("", "72", 0.0),
        ("#### -72", "72", 1.0),
    ],
)
def test_gsm8k_wrong(response, truth, answer_found):
    result = compute_score(GSM8K, response, truth)
    assert result["score"] == 0.0 and result["acc"] == 0.0
    assert result["answer_found"] == answer_found
    assert result["format_ok"] == float("####" in response)


def test_gsm8k_unreadable_ground_truth_is_flagged():
    result = compute_score(GSM8K, "#### 5", "five")
    assert result["score"] == 0.0 and result["scorer_error"] == 1.0
