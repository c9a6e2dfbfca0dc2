"""Rewards never raise or hang: hostile responses and ground truths, for every data source.

Each call must return the six result keys as floats, a score in [0, 1], within a bound: 1 s of the calling thread's
CPU time for GSM8k and ToolACE (their parsing is linear and capped; the load of the machine does not count), budget +
start-up allowance + slack of wall time for MATH and Guru (their promise is a deadline). From 16
threads at once on a loaded 2-core machine the calls also wait for the processor, so there the bound is a hang
guard (4x); the bound under concurrency is measured by ``benchmarks/bench_rewards.py``.
Inputs: lone surrogates, huge numbers (as text and as Python ints too long to print), deep nesting of
every bracket kind, ToolACE arguments like ``1+1+...`` and ``-----1``, non-str values, megabyte strings.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verl_ext.rewards import compute_score, equivalence_pool
from verl_ext.rewards.reward_result import RESULT_KEYS
from tests.cost import LINEAR, cost_ratio

BUDGET_S, ALLOWANCE_S, SLACK_S = 0.5, 1.0, 1.5
MEGA = 1_000_000
SOURCES = {
    "gsm8k": ("openai/gsm8k", "72", "#### 72", {}),
    "math": ("DigitalLearningGmbH/MATH-lighteval", "\\frac{1}{2}", "\\boxed{0.5}", {}),
    "guru": ("math__hostile", "1000", "<think>\\boxed{3}</think>\\boxed{1,000}", {}),
    "toolace exact": (
        "Team-ACE/ToolACE",
        json.dumps([{"name": "f", "arguments": {"a": 1}}]),
        '<think>t</think><tool_call>[{"name": "f", "arguments": {"a": 1}}]</tool_call>',
        {},
    ),
    "toolace partial strict": (
        "Team-ACE/ToolACE",
        json.dumps([{"name": "f", "arguments": {"a": 1}}]),
        '<think>t</think><tool_call>[{"name": "f", "arguments": {"a": 1.0}}]</tool_call>',
        {"toolace_mode": "partial", "toolace_strict_format": True},
    ),
}


class Unprintable:
    def __str__(self):
        raise RuntimeError("no text for you")


def tool_call(arguments: str) -> str:
    return f'<tool_call>[{{"name": "f", "arguments": {arguments}}}]</tool_call>'


HOSTILE = {
    "empty": "",
    "spaces": " " * 200_000,
    "control": "\t\n\r\x0b\x0c\x00" * 50_000,
    "surrogate": "\ud83d",
    "surrogates everywhere": "#### \ud83d \\boxed{\udcff} <tool_call>[\"\ud800\"]</tool_call> \udfff",
    "surrogate in box": "\\boxed{\ud83d}",
    "surrogate tool name": '<tool_call>[{"name": "\ud83d", "arguments": {}}]</tool_call>',
    "digits": "9" * 200_000,
    "marker digits": "#### " + "9" * 200_000,
    "boxed digits": "\\boxed{" + "9" * 5_000 + "}",
    "boxed tower": "\\boxed{9^{9^{9^{9^{9}}}}}",
    "boxed 1e999999": "\\boxed{1e999999}",
    "commas": "#### 1" + ",000" * 50_000,
    "dollars": "#### " + "$" * 100_000 + "5",
    "stars": "#### " + "*" * 100_000 + "5",
    "minus run": "#### " + "-" * 100_000 + "1",
    "braces": "{" * 200_000,
    "boxed nest": "\\boxed{" + "{" * 50_000 + "}" * 50_001,
    "boxed sqrt nest": "\\boxed{" + "\\sqrt{" * 400 + "2" + "}" * 401,
    "boxed frac nest": "\\boxed{" + "\\frac{1}{" * 300 + "2" + "}" * 301,
    "boxed parens": "\\boxed{" + "(" * 3_000 + "1" + ")" * 3_000 + "}",
    "boxed plus chain": "\\boxed{" + "1+" * 3_000 + "1}",
    "boxed minus chain": "\\boxed{" + "-" * 3_000 + "1}",
    "many boxes": "\\boxed{1}" * 100_000,
    "think flood": "<think>" * 100_000 + "</think>" * 3,
    "brackets": "[" * 200_000 + "]" * 200_000,
    "tool nest list": "<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>",
    "tool nest args": tool_call('{"a": ' * 900 + "1" + "}" * 900),
    "tool nest 63": tool_call('{"a": ' * 60 + "1" + "}" * 60),
    "tool plus args": tool_call('{"a": ' + "1+" * 3_000 + "1}"),
    "tool plus string": tool_call(json.dumps("1+" * 3_000 + "1")),
    "tool minus args": tool_call('{"a": ' + "-" * 3_000 + "1}"),
    "tool minus string": tool_call(json.dumps("-" * 3_000 + "1")),
    "tool huge int": tool_call('{"a": ' + "9" * 5_000 + "}"),
    "tool huge float": tool_call('{"a": 1e999999, "b": NaN, "c": -Infinity}'),
    "tool many calls": "<tool_call>" + json.dumps([{"name": "f", "arguments": {"a": 1}}] * 64) + "</tool_call>",
    "tool many keys": tool_call(json.dumps({f"k{i}": i for i in range(15_000)})),
    "tool unclosed": "<tool_call>" * 100_000,
    "megabyte": "x" * MEGA,
    "marker flood": "####" * (MEGA // 4),
    "bytes": b"\xff\xfe#### 72\x80",
    "bytearray": bytearray(b"\\boxed{1}"),
    "memoryview": memoryview(b"<tool_call>[]</tool_call>"),
    "None": None,
    "int": 72,
    "unprintable int": 10**5_000,
    "float nan": math.nan,
    "float inf": -math.inf,
    "bool": True,
    "list": ["#### 72", "\\boxed{1}"],
    "dict": {"answer": "72"},
    "numpy array": np.array([72, 1]),
    "numpy scalar": np.float64(0.5),
    "unprintable object": Unprintable(),
}


@pytest.fixture(scope="module", autouse=True)
def small_pool():
    """A short budget and allowance, so the bound checked here is tight; the default checker comes back after."""
    equivalence_pool.configure(sandbox="process", workers=2, timeout_s=BUDGET_S, startup_allowance_s=ALLOWANCE_S)
    yield
    equivalence_pool.configure()


HANG_GUARD_FACTOR = 4


IN_THREAD_CPU_S = 1.0  # GSM8k and ToolACE score in the calling thread: a bound on that thread's work


def scored_within_bound(source: str, response, truth, factor: float = 1) -> dict:
    """The result, checked; and its cost. GSM8k and ToolACE parse in the calling thread: what is bounded is that
    thread's CPU time (``time.thread_time``: its own work, not the time it waits for a core on a loaded machine), so a
    slow pattern fails and a busy machine does not. MATH and Guru promise a deadline (budget + start-up allowance,
    whatever happens in the child that checks): that is a wall-clock promise, checked as one, with slack for a busy
    machine."""
    data_source, _, _, options = SOURCES[source]
    in_thread = source not in ("math", "guru")
    clock = time.thread_time if in_thread else time.monotonic
    bound = factor * (IN_THREAD_CPU_S if in_thread else BUDGET_S + ALLOWANCE_S + SLACK_S)
    start = clock()
    result = compute_score(data_source, response, truth, None, **options)
    spent = clock() - start
    assert list(result) == list(RESULT_KEYS) and all(type(value) is float for value in result.values()), result
    assert 0.0 <= result["score"] <= 1.0 and all(result[key] in (0.0, 1.0) for key in RESULT_KEYS[1:]), result
    assert spent < bound, f"{source}: {spent:.2f} {'CPU-' if in_thread else ''}s"
    return result


@pytest.mark.parametrize("source", ["gsm8k", "toolace exact", "toolace partial strict"])
@pytest.mark.parametrize("hostile", HOSTILE, ids=list(HOSTILE))
def test_hostile_response_and_hostile_ground_truth(source, hostile):
    _, truth, good_response, _ = SOURCES[source]
    scored_within_bound(source, HOSTILE[hostile], truth)
    scored_within_bound(source, good_response, HOSTILE[hostile])


def test_hostile_math_and_guru_inputs_from_sixteen_threads():
    """The same battery for MATH and Guru, run as verl runs rewards (a thread pool): some of these reach
    sympy and overrun, so children are killed and restarted meanwhile; every call still comes back, scored,
    within the hang guard (16 threads share the processor: the tight bound is the sequential tests')."""
    cases = [
        (source, f"{name} as {role}", *((value, truth) if role == "response" else (good_response, value)))
        for source in ("math", "guru")
        for name, value in HOSTILE.items()
        for role in ("response", "truth")
        for _, truth, good_response, _ in [SOURCES[source]]
    ]

    def problem(case) -> str | None:
        source, name, response, truth = case
        try:
            scored_within_bound(source, response, truth, factor=HANG_GUARD_FACTOR)
        except AssertionError as error:
            return f"{source} {name}: {error}"
        return None

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        problems = [found for found in pool.map(problem, cases) if found]
    assert not problems, problems


@pytest.mark.parametrize("source", SOURCES)
def test_the_good_pair_still_scores_one(source):
    """The hostile battery runs against these pairs: they must be right, or the battery proves little."""
    _, truth, good_response, _ = SOURCES[source]
    assert scored_within_bound(source, good_response, truth)["score"] == 1.0


FRAGMENTS = [value for value in HOSTILE.values() if isinstance(value, str) and len(value) < 20_000]
FRAGMENTS += ["####", "\\boxed{", "}", "<tool_call>", "</tool_call>", "<think>", "</think>", '{"name": "f"', "1+", "-"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    source=st.sampled_from(list(SOURCES)),
    response=st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=6).map("".join),
    truth=st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=3).map("".join),
)
def test_generated_mixtures_of_hostile_fragments(source, response, truth):
    scored_within_bound(source, response, truth)


@pytest.mark.parametrize(
    "case",
    [
        lambda n: ("#### 72", " " * n),  # took 9 to 22 s at n = 20k: "\s*" on both sides of an optional "$" backtracked
        lambda n: ("#### 72", "\\$" + " " * n + "7x"),
        lambda n: ("#### " + " " * n, "72"),
        lambda n: ("#### **" + " " * n + "$" + " " * n + "72", "72"),
        lambda n: ("#### 72", "1" + ",000" * n + "x"),
    ],
    ids=["spaces truth", "dollar spaces truth", "spaces answer", "stars dollar spaces answer", "comma groups truth"],
)
def test_gsm8k_parsing_takes_linear_time(case):
    """At n = 20k a quadratic pattern costs seconds and a linear one about a millisecond: the cost at 4n over the
    cost at n (about 4 for linear, 16 for quadratic) tells them apart on any machine."""
    # n = 1,250: a quadratic pattern already costs a tenth of a second there (16 times more at 4n), a linear one a tenth
    # of a millisecond; at larger n float() of the comma-grouped number (60,000 digits at n = 20k) grows a little
    # faster than linear by itself (C's correctly rounded conversion), which is not what this test is about
    pairs = {n: case(n) for n in (1_250, 5_000)}  # made once: only the scoring is timed

    def score(n: int) -> None:
        result = compute_score("openai/gsm8k", *pairs[n])
        assert list(result) == list(RESULT_KEYS) and 0.0 <= result["score"] <= 1.0, result

    assert cost_ratio(score, 1_250) < LINEAR
