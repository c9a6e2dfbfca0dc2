"""ToolACE scoring rules as tables: exact multiset match, partial credit, strict format."""

from __future__ import annotations

import json

import pytest

from verl_ext.rewards import compute_score
from verl_ext.rewards.toolace import canonical, partial_credit

TOOLACE = "Team-ACE/ToolACE"
TRUTH = json.dumps(
    [
        {"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3}},
        {
            "name": "get-news.headlines",
            "arguments": {"topics": ["tech", "AI"], "limit": 5, "filters": {"lang": "en", "safe": True}},
        },
    ]
)


def answer(calls, think="I will call the tools.") -> str:
    body = calls if isinstance(calls, str) else json.dumps(calls)
    return f"<think>{think}</think>\n<tool_call>{body}</tool_call>"


WEATHER = {"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3}}
NEWS = {
    "name": "get-news.headlines",
    "arguments": {"topics": ["tech", "AI"], "limit": 5, "filters": {"lang": "en", "safe": True}},
}


@pytest.mark.parametrize(
    "response",
    [
        answer([WEATHER, NEWS]),
        answer([NEWS, WEATHER]),  # call order does not matter
        answer([{"arguments": {"days": 3, "city": "Paris"}, "name": "Weather/Forecast v2"}, NEWS]),  # key order
        answer([{"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3.0}}, NEWS]),  # 3 == 3.0
        answer([WEATHER, {**NEWS, "arguments": {**NEWS["arguments"], "filters": {"safe": True, "lang": "en"}}}]),
        answer([{"name": "Weather/Forecast v2", "arguments": json.dumps({"city": "Paris", "days": 3})}, NEWS]),
        answer("```json\n" + json.dumps([WEATHER, NEWS]) + "\n```"),
        "<tool_call>[]</tool_call> changed my mind " + answer([WEATHER, NEWS]),  # the last block counts
        answer([WEATHER, NEWS], think="") + "\n",
    ],
)
def test_toolace_exact_match_scores_one(response):
    result = compute_score(TOOLACE, response, TRUTH)
    assert result["score"] == 1.0 and result["acc"] == 1.0 and result["answer_found"] == 1.0, result


@pytest.mark.parametrize(
    "response, answer_found",
    [
        (answer([WEATHER]), 1.0),  # a call missing
        (answer([WEATHER, NEWS, WEATHER]), 1.0),  # a call too many (multiset, not set)
        (answer([{"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": "3"}}, NEWS]), 1.0),  # "3" != 3
        (answer([{"name": "Weather/Forecast v2", "arguments": {"city": "paris", "days": 3}}, NEWS]), 1.0),
        (answer([{"name": "Weather/Forecast", "arguments": {"city": "Paris", "days": 3}}, NEWS]), 1.0),
        (answer([{"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3, "unit": "C"}}, NEWS]), 1.0),
        (answer([WEATHER, {**NEWS, "arguments": {**NEWS["arguments"], "filters": {"lang": "en", "safe": 1}}}]), 1.0),
        (answer([WEATHER, {**NEWS, "arguments": {**NEWS["arguments"], "topics": ["AI", "tech"]}}]), 1.0),  # list order
        (answer(json.dumps([WEATHER, NEWS])[:-1]), 0.0),  # invalid JSON
        (answer([{"function": "Weather/Forecast v2"}]), 0.0),  # no name
        (answer([{"name": "x", "arguments": [1]}]), 0.0),  # arguments not an object
        (json.dumps([WEATHER, NEWS]), 0.0),  # no <tool_call> block
        ("<tool_call>" + json.dumps([WEATHER, NEWS]), 0.0),  # unclosed block
        ("", 0.0),
    ],
)
def test_toolace_mismatch_scores_zero(response, answer_found):
    result = compute_score(TOOLACE, response, TRUTH)
    assert result["score"] == 0.0 and result["acc"] == 0.0, result
    assert result["answer_found"] == answer_found


def test_toolace_single_object_counts_as_one_call():
    truth = json.dumps([WEATHER])
    assert compute_score(TOOLACE, answer(WEATHER), truth)["score"] == 1.0


@pytest.mark.parametrize(
    "response, format_ok",
    [
        (answer([WEATHER, NEWS]), 1.0),
        ("  " + answer([WEATHER, NEWS]) + "\n\n", 1.0),
        ("<tool_call>" + json.dumps([WEATHER, NEWS]) + "</tool_call>", 0.0),  # no think block
        ("Sure! " + answer([WEATHER, NEWS]), 0.0),  # text before the think block
        (answer([WEATHER, NEWS]) + " Done.", 0.0),  # text after the call
        ("<think>a</think><think>b</think><tool_call>" + json.dumps([WEATHER, NEWS]) + "</tool_call>", 0.0),
        ("<think>a</think> so <tool_call>" + json.dumps([WEATHER, NEWS]) + "</tool_call>", 0.0),
        ("<tool_call>[]</tool_call>" + answer([WEATHER, NEWS]), 0.0),  # two call blocks
    ],
)
def test_toolace_strict_format(response, format_ok):
    lenient = compute_score(TOOLACE, response, TRUTH)
    strict = compute_score(TOOLACE, response, TRUTH, toolace_strict_format=True)
    assert lenient["format_ok"] == strict["format_ok"] == format_ok  # always reported
    assert lenient["score"] == 1.0  # the calls are right in every case
    assert strict["score"] == format_ok and strict["acc"] == format_ok


def test_toolace_options_from_extra_info_override_keyword_arguments():
    response = "<tool_call>" + json.dumps([WEATHER, NEWS]) + "</tool_call>"
    assert compute_score(TOOLACE, response, TRUTH, {"toolace_strict_format": True})["score"] == 0.0
    assert (
        compute_score(TOOLACE, response, TRUTH, {"toolace_strict_format": False}, toolace_strict_format=True)["score"]
        == 1.0
    )
    assert compute_score(TOOLACE, response, TRUTH, {"toolace_strict_format": "true"})["score"] == 0.0
    with pytest.raises(ValueError, match="toolace_strict_format"):
        compute_score(TOOLACE, response, TRUTH, {"toolace_strict_format": "maybe"})
    with pytest.raises(ValueError, match=r"toolace_mode='fuzzy': expected one of \('exact', 'partial'\)"):
        compute_score(TOOLACE, response, TRUTH, toolace_mode="fuzzy")


def _partial(calls):
    return compute_score(TOOLACE, answer(calls), TRUTH, toolace_mode="partial")


def test_toolace_partial_credit_values():
    wrong_days = {"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 4}}
    extra_key = {"name": "Weather/Forecast v2", "arguments": {"city": "Paris", "days": 3, "unit": "C"}}
    assert _partial([WEATHER, NEWS])["score"] == 1.0
    # One of two calls right, the other missing: (1 + 0) / max(2, 1).
    assert _partial([WEATHER])["score"] == pytest.approx(0.5)
    # Weather keys all present, one of two values right: q = 1/3 + 1/3 * 1 + 1/3 * 1/2; NEWS exact.
    assert _partial([wrong_days, NEWS])["score"] == pytest.approx((1 / 3 + 1 / 3 + 1 / 6 + 1) / 2)
    # An extra key: key overlap 2/3, both gold values right.
    assert _partial([extra_key, NEWS])["score"] == pytest.approx((1 / 3 + 2 / 9 + 1 / 3 + 1) / 2)
    # Wrong names earn nothing; the extra call lowers the score through the denominator.
    assert _partial([{"name": "other", "arguments": {}}])["score"] == 0.0
    assert _partial([WEATHER, NEWS, WEATHER])["score"] == pytest.approx(2 / 3)
    result = _partial([wrong_days, NEWS])
    assert result["acc"] == 0.0 and 0.0 < result["score"] < 1.0


def test_partial_credit_pairs_the_best_matching_calls():
    gold = [("f", {"a": 1}), ("f", {"a": 2})]
    assert partial_credit(gold, [("f", {"a": 2}), ("f", {"a": 1})]) == 1.0
    assert partial_credit(gold, [("f", {"a": 2})]) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "a, b, equal",
    [
        (3, 3.0, True),
        ("3", 3, False),
        (True, 1, False),
        (None, "null", False),
        ({"x": [1, {"y": 2}]}, {"x": [1.0, {"y": 2.0}]}, True),
        ([1, 2], [2, 1], False),
        (0.1, 0.1, True),
        (1e20, 100000000000000000000, True),
    ],
)
def test_canonical_values(a, b, equal):
    assert (canonical(a) == canonical(b)) is equal


def test_toolace_unreadable_ground_truth_is_flagged_not_raised():
    result = compute_score(TOOLACE, answer([WEATHER]), "not json")
    assert result["score"] == 0.0 and result["scorer_error"] == 1.0
