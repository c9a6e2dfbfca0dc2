"""Property tests: no input makes a scorer raise, leave [0, 1] or take more than linear time.

Inputs mix random text with the fragments the scorers look for (markers, braces, tags, JSON, huge
numbers, exponent towers), bytes, None, and megabyte strings.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_prep.tool_call_syntax import CallSyntaxError, parse_call_list
from verl_ext.rewards import compute_score
from verl_ext.rewards.reward_result import RESULT_KEYS
from tests.cost import LINEAR, cost_ratio

MATH_BUDGET_S = 1.0
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

FRAGMENTS = [
    "####",
    " ",
    "$",
    "\\$",
    ",",
    ".",
    "-",
    "72",
    "1,000",
    "0",
    "9" * 30,
    "e999",
    "\n",
    "\\boxed{",
    "\\boxed",
    "\\fbox{",
    "{",
    "}",
    "\\{",
    "\\}",
    "\\frac",
    "\\dfrac{1}{2}",
    "^",
    "^{",
    "**",
    "!",
    "x",
    "(",
    ")",
    "[",
    "]",
    "\\sqrt{",
    "\\left(",
    "\\right)",
    "\\text{",
    "2^{2^{2^{",
    "10^{100000}",
    "100000!",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    '"name"',
    '"arguments"',
    ":",
    '{"name": "f", "arguments": {}}',
    "true",
    "null",
    "NaN",
    "1e400",
    "[[[[[[",
    "]]]]]]",
    '"',
    "\\",
    "\x00",
    "\udcff"[:0],
    "é",
    "🙂",
]
texts = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40).map("".join),
)
inputs = st.one_of(texts, st.binary(max_size=200), st.none(), st.integers())
latex = st.recursive(
    st.sampled_from(["1", "2", "72", "0.5", "-3", "x", "y", "\\pi", "1,000", "10^{100000}", "100000!", "\\infty", ""]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "^", ",", "=", "\\cdot "]), inner).map("".join),
        st.tuples(inner, inner).map(lambda p: f"\\frac{{{p[0]}}}{{{p[1]}}}"),
        inner.map(lambda e: f"\\sqrt{{{e}}}"),
        inner.map(lambda e: f"({e})"),
        inner.map(lambda e: f"{{{e}}}^{{{e}}}"),
        inner.map(lambda e: f"\\text{{{e}}}"),
    ),
    max_leaves=8,
)
boxed_responses = st.tuples(texts, latex, st.sampled_from(["", ".", " </think>", "$"])).map(
    lambda p: f"{p[0]}\\boxed{{{p[1]}}}{p[2]}"
)
math_truths = st.one_of(
    latex, st.sampled_from(["72", "\\frac{1}{2}", "(1,2)", "x^2+1", "\\text{(C)}", "", "\\boxed{3}"]), texts
)
toolace_truths = st.one_of(
    st.just(json.dumps([{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {"b": [True, None]}}])),
    texts,
)


def check(result: dict) -> None:
    """A result of the promised shape. How long a check may take is not asserted here (a wall-clock bound flakes on a
    loaded machine): the math checker's budget is tested by its timed_out flag (test_rewards_math.py), the parsers'
    linear cost by cost ratios (tests/adversarial), and a hang fails at the test's time limit."""
    assert list(result) == list(RESULT_KEYS)
    assert all(type(value) is float for value in result.values())
    assert 0.0 <= result["score"] <= 1.0
    assert all(result[key] in (0.0, 1.0) for key in RESULT_KEYS if key != "score")


@FUZZ
@given(response=inputs, truth=st.one_of(st.sampled_from(["72", "-5", "1000", "0.5"]), texts))
def test_gsm8k_never_fails(response, truth):
    check(compute_score("openai/gsm8k", response, truth))


@FUZZ
@given(response=st.one_of(inputs, boxed_responses, boxed_responses), truth=math_truths, guru=st.booleans())
def test_math_and_guru_never_fail(response, truth, guru):
    source = "math__fuzz" if guru else "DigitalLearningGmbH/MATH-lighteval"
    check(compute_score(source, response, truth, None, math_timeout_s=MATH_BUDGET_S))


@FUZZ
@given(
    response=inputs,
    truth=toolace_truths,
    mode=st.sampled_from(["exact", "partial"]),
    strict=st.booleans(),
)
def test_toolace_never_fails(response, truth, mode, strict):
    check(compute_score("Team-ACE/ToolACE", response, truth, None, toolace_mode=mode, toolace_strict_format=strict))


@FUZZ
@given(
    calls=st.lists(
        st.fixed_dictionaries(
            {
                "name": st.text(min_size=1, max_size=8),
                "arguments": st.dictionaries(
                    st.text(max_size=4),
                    st.recursive(
                        st.none()
                        | st.booleans()
                        | st.integers()
                        | st.floats(allow_nan=False, allow_infinity=False)
                        | st.text(max_size=5),
                        lambda children: (
                            st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
                        ),
                        max_leaves=6,
                    ),
                    max_size=3,
                ),
            }
        ),
        min_size=1,
        max_size=3,
    ),
    shuffle=st.randoms(use_true_random=False),
)
def test_toolace_matches_any_reordering_of_the_truth(calls, shuffle):
    """Property of the exact mode: a permutation of the calls, each with its keys reordered, scores 1."""
    truth = json.dumps(calls)
    reordered = [{"arguments": dict(reversed(list(c["arguments"].items()))), "name": c["name"]} for c in calls]
    shuffle.shuffle(reordered)
    response = f"<think>t</think><tool_call>{json.dumps(reordered)}</tool_call>"
    assert compute_score("Team-ACE/ToolACE", response, truth)["score"] == 1.0
    assert compute_score("Team-ACE/ToolACE", response, truth, toolace_mode="partial")["score"] == 1.0


@FUZZ
@given(text=st.one_of(texts, st.text(alphabet="[]()=,'\"abc 12.", max_size=60).map(lambda t: f"[{t}]")))
def test_tool_call_syntax_raises_only_its_own_error(text):
    try:
        calls = parse_call_list(text)
    except CallSyntaxError:
        return
    assert calls and all(set(call) == {"name", "arguments"} for call in calls)
    json.dumps(calls)  # always JSON


MEGABYTE = 1_000_000
HUGE_INPUTS = [  # each of size about n (a megabyte at the largest n used here)
    lambda n: "{" * n,
    lambda n: "\\boxed{" * (n // 7),
    lambda n: "\\boxed{" + "1" * n + "}",
    lambda n: "\\boxed{" + "x^" * (n // 2) + "}",
    lambda n: "#### " + "9" * n,
    lambda n: "####" * (n // 4),
    lambda n: "<tool_call>" + "[" * n + "</tool_call>",
    lambda n: "<tool_call>" + json.dumps([{"name": "f", "arguments": {"a": "x" * n}}]) + "</tool_call>",
    lambda n: "<think>" * (n // 7) + "</think>",
    lambda n: "\x00\xff" * n,
    lambda n: "\\boxed{" + "(" * (n // 200) + "1" + ")" * (n // 200) + "}",  # 5,000 deep at a megabyte
]
SOURCES = (
    ("openai/gsm8k", "72"),
    ("DigitalLearningGmbH/MATH-lighteval", "72"),
    ("math__fuzz", "72"),
    ("Team-ACE/ToolACE", json.dumps([{"name": "f", "arguments": {"a": 1}}])),
)


@pytest.mark.parametrize("response", HUGE_INPUTS, ids=[f"huge{i}" for i in range(len(HUGE_INPUTS))])
def test_megabyte_inputs_are_bounded(response):
    """Scored 0 and in time linear in the input: the cost at a megabyte over the cost at a quarter of it (about 4 for
    a linear scorer, 16 for a quadratic one, on any machine). These answers are all longer than the math checker's
    limit, so no budget or child start-up is part of the cost."""
    texts = {n: response(n) for n in (MEGABYTE // 4, MEGABYTE)}  # made once: only the scoring is timed
    for data_source, truth in SOURCES:
        def score(n: int) -> None:
            result = compute_score(data_source, texts[n], truth, None, math_timeout_s=MATH_BUDGET_S)
            check(result)
            assert result["score"] == 0.0

        assert cost_ratio(score, MEGABYTE // 4) < LINEAR, data_source
