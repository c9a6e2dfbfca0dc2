"""Property tests: no input makes a scorer raise, leave [0, 1] or take unbounded time.

Inputs mix random text with the fragments the scorers look for (markers, braces, tags, JSON, huge
numbers, exponent towers), bytes, None, and megabyte strings.
"""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from data_prep.tool_call_syntax import CallSyntaxError, parse_call_list
from verl_ext.rewards import compute_score, equivalence_pool
from verl_ext.rewards.reward_result import RESULT_KEYS

MATH_BUDGET_S = 1.0
# The promised bound of one call: its budget plus the start-up allowance (equivalence_pool's docstring;
# conftest.py sets a generous one for this busy machine), plus 1 s of slack.
BOUND_S = MATH_BUDGET_S + equivalence_pool.settings().startup_allowance_s + 1.0
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


def check(result: dict, elapsed: float) -> None:
    assert list(result) == list(RESULT_KEYS)
    assert all(type(value) is float for value in result.values())
    assert 0.0 <= result["score"] <= 1.0
    assert all(result[key] in (0.0, 1.0) for key in RESULT_KEYS if key != "score")
    assert elapsed < BOUND_S


def timed(*args, **kwargs):
    start = time.monotonic()
    result = compute_score(*args, **kwargs)
    return result, time.monotonic() - start


@FUZZ
@given(response=inputs, truth=st.one_of(st.sampled_from(["72", "-5", "1000", "0.5"]), texts))
def test_gsm8k_never_fails(response, truth):
    check(*timed("openai/gsm8k", response, truth))


@FUZZ
@given(response=st.one_of(inputs, boxed_responses, boxed_responses), truth=math_truths, guru=st.booleans())
def test_math_and_guru_never_fail(response, truth, guru):
    source = "math__fuzz" if guru else "DigitalLearningGmbH/MATH-lighteval"
    check(*timed(source, response, truth, None, math_timeout_s=MATH_BUDGET_S))


@FUZZ
@given(
    response=inputs,
    truth=toolace_truths,
    mode=st.sampled_from(["exact", "partial"]),
    strict=st.booleans(),
)
def test_toolace_never_fails(response, truth, mode, strict):
    check(*timed("Team-ACE/ToolACE", response, truth, None, toolace_mode=mode, toolace_strict_format=strict))


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
HUGE_INPUTS = [
    "{" * MEGABYTE,
    "\\boxed{" * (MEGABYTE // 7),
    "\\boxed{" + "1" * MEGABYTE + "}",
    "\\boxed{" + "x^" * (MEGABYTE // 2) + "}",
    "#### " + "9" * MEGABYTE,
    "####" * (MEGABYTE // 4),
    "<tool_call>" + "[" * MEGABYTE + "</tool_call>",
    "<tool_call>" + json.dumps([{"name": "f", "arguments": {"a": "x" * MEGABYTE}}]) + "</tool_call>",
    "<think>" * (MEGABYTE // 7) + "</think>",
    "\x00\xff" * MEGABYTE,
    "\\boxed{" + "(" * 5000 + "1" + ")" * 5000 + "}",
]


@pytest.mark.parametrize("response", HUGE_INPUTS, ids=[f"huge{i}" for i in range(len(HUGE_INPUTS))])
def test_megabyte_inputs_are_bounded(response):
    for data_source, truth in (
        ("openai/gsm8k", "72"),
        ("DigitalLearningGmbH/MATH-lighteval", "72"),
        ("math__fuzz", "72"),
        ("Team-ACE/ToolACE", json.dumps([{"name": "f", "arguments": {"a": 1}}])),
    ):
        result, elapsed = timed(data_source, response, truth, None, math_timeout_s=MATH_BUDGET_S)
        check(result, elapsed)
        assert result["score"] == 0.0
