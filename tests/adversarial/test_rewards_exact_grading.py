"""Rewards that scored wrong (issue 21, second round): each rule as a table, and as a property where one fits.

* ToolACE compares numbers by exact decimal value: ``1e999`` and ``2e999`` both overflowed to ``inf`` as
  floats and compared equal.
* MATH grades exactly: math-verify rounds decimals to 6 places (``0.3333333`` passed for ``\\frac13``,
  ``1.41421356`` for ``\\sqrt2``) and compares other values to 15 digits; a terminating decimal is still
  the exact value it writes.
* GSM8k reads one number after ``####``: ``#### 3+4`` scored as 3 and ``#### 1 000`` as 1; digit groups
  with the thin spaces of SI typesetting are one number.
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from verl_ext.rewards import compute_score, equivalence_pool
from verl_ext.rewards.math_equivalence import are_equivalent
from verl_ext.rewards.toolace import canonical

GSM8K, MATH, TOOLACE = "openai/gsm8k", "HuggingFaceH4/MATH-500", "Team-ACE/ToolACE"
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
SYMPY_PROPERTY = settings(PROPERTY, max_examples=20)  # each example is a sympy check (in this process)

# --- ToolACE: numbers by exact value ----------------------------------------------------------------------


def toolace(argument_json: str, truth_json: str) -> dict:
    response = f'<tool_call>[{{"name": "f", "arguments": {{"a": {argument_json}}}}}]</tool_call>'
    return compute_score(TOOLACE, response, f'[{{"name": "f", "arguments": {{"a": {truth_json}}}}}]')


@pytest.mark.parametrize(
    "predicted, truth, score",
    [
        ("2e999", "1e999", 0.0),  # both were inf: scored 1
        ("-1e400", "-2e400", 0.0),
        ("1e999", "1e999", 1.0),
        ("1e999", "10e998", 1.0),
        ("0.10000000000000001", "0.1", 0.0),  # the same float, not the same number
        ("12345678901234567890123", "12345678901234567891000", 0.0),  # equal as floats
        ("3.0", "3", 1.0),
        ("0.3e1", "3", 1.0),
        ("300", "3e2", 1.0),
        ("-0.0", "0", 1.0),
        ("1e-999999999", "0", 0.0),
        ("[1e999, 2]", "[2e999, 2]", 0.0),
        ('{"x": 1e999}', '{"x": 2e999}', 0.0),
    ],
)
def test_toolace_numbers_compare_by_exact_value(predicted, truth, score):
    result = toolace(predicted, truth)
    assert result["score"] == score and result["scorer_error"] == 0.0, result


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_toolace_json_constants_json_does_not_have_are_no_answer(constant):
    """``json`` reads them; JSON has no such values. In a response: no answer; in a ground truth: an error."""
    assert toolace(constant, "1")["answer_found"] == 0.0
    as_truth = toolace("1", constant)
    assert as_truth["score"] == 0.0 and as_truth["scorer_error"] == 1.0
    assert toolace(constant, constant)["score"] == 0.0


def test_toolace_an_exponent_decimal_cannot_hold_is_no_answer_not_a_crash():
    result = toolace("1e9999999999999999999999", "1")
    assert result["answer_found"] == 0.0 and result["scorer_error"] == 0.0


decimals = st.decimals(allow_nan=False, allow_infinity=False, places=None, min_value=None, max_value=None)


@PROPERTY
@given(a=decimals, b=decimals, exponent=st.integers(-10**6, 10**6))
def test_toolace_two_numbers_match_exactly_when_their_values_are_equal(a, b, exponent):
    """Two JSON numbers (scaled by any exponent) match iff their exact values do; another spelling of the
    same value (plain digits) matches."""
    a_text, b_text = f"{a:f}E{exponent}", f"{b:f}E{exponent}"  # format "f" writes every digit, exactly
    assert (toolace(a_text, b_text)["score"] == 1.0) is (Decimal(a_text) == Decimal(b_text))
    if abs(exponent) < 50:
        assert toolace(a_text, f"{Decimal(a_text):f}")["score"] == 1.0


def test_toolace_canonical_python_values_follow_the_same_rule():
    assert canonical(Decimal("1E+999")) != canonical(Decimal("2E+999"))
    assert canonical(3) == canonical(3.0) == canonical(Decimal("3.00"))
    assert canonical(math.nan) != canonical(math.nan) and canonical(math.inf) != canonical(math.inf)


# --- MATH: exact grading ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def patient_pool():
    """A start-up allowance and a check budget long enough for a cold child on a busy machine (a check cut
    short would score 0 for the wrong reason: these tests are about the grade, the latency bound is tested in
    test_rewards_concurrency.py); the default checker comes back after."""
    yield equivalence_pool.configure(sandbox="process", workers=2, timeout_s=60.0, startup_allowance_s=120.0)
    equivalence_pool.configure()


def math_score(truth: str, answer: str) -> float:
    result = compute_score(MATH, f"\\boxed{{{answer}}}", truth)
    assert result["timed_out"] == 0.0 and result["scorer_error"] == 0.0, result  # decided, not cut short
    return result["score"]



@pytest.mark.parametrize(
    "truth, answer",
    [
        ("\\frac13", "0.3333333"),  # math-verify's 6-place rounding: scored 1
        ("\\frac{2}{3}", "0.666667"),
        ("\\frac{1}{3}", "0.333"),
        ("\\sqrt2", "1.41421356"),
        ("\\sqrt{2}", "1.4142135623730950488"),
        ("\\frac{\\sqrt{2}}{2}", "0.7071067811865476"),
        ("\\pi", "3.14159265358979323846"),
        ("e", "2.718281828459045"),
        ("\\cos(1)", "0.5403023058681398"),
        ("\\sqrt{\\pi}", "\\sqrt{3.14159265358979323846}"),  # inside an expression: 15-digit numeric test passed it
        ("\\sqrt{\\pi}", "\\sqrt{\\frac{314159265358979323846}{100000000000000000000}}"),  # the same as a fraction
        ("x\\sqrt{2}", "1.41421356237309504880x"),
        ("\\ln 2 + \\pi", "\\pi + 0.69314718055994530942"),
    ],
)
def test_math_an_approximation_of_an_exact_value_is_wrong(patient_pool, truth, answer):
    assert math_score(truth, answer) == 0.0


@pytest.mark.parametrize(
    "truth, answer",
    [
        ("\\frac12", "0.5"),
        ("\\frac{\\sqrt{4}}{4}", "0.5"),  # only sympy sees it is 1/2
        ("\\log_4 2", "0.5"),
        ("\\sin(\\pi/6)", "0.5"),
        ("\\frac{1}{8}", "0.125"),
        ("\\frac{x}{10}", "0.1x"),
        ("[\\frac12, \\frac32)", "[0.5, 1.5)"),
        ("x=\\frac12", "x=0.5"),
        ("\\{\\frac12,2\\}", "\\{0.5,2\\}"),
        ("\\begin{pmatrix}\\frac12\\\\1\\end{pmatrix}", "\\begin{pmatrix}0.5\\\\1\\end{pmatrix}"),
        ("1500", "1.5\\times 10^{3}"),
        ("3.2", "3.20"),
        ("\\sqrt{2}+\\sqrt{3}", "\\sqrt{5+2\\sqrt{6}}"),  # exact, only numerically provable: still equal
        ("2^{100}", "1267650600228229401496703205376"),
        ("10^{10000}", "100^{5000}"),  # a 10,001-digit integer: its digits are counted without str()
        ("\\frac{\\pi}{4}", "\\arctan 1"),
    ],
)
def test_math_a_terminating_decimal_or_exact_form_is_right(patient_pool, truth, answer):
    assert math_score(truth, answer) == 1.0


def truncated(value: Fraction, places: int) -> str:
    return format(Decimal(math.floor(value * 10**places)).scaleb(-places), f".{places}f")


@SYMPY_PROPERTY
@given(numerator=st.integers(1, 999), denominator=st.integers(2, 999), places=st.integers(1, 16), rounded=st.booleans())
def test_math_a_repeating_fraction_never_equals_a_decimal(numerator, denominator, places, rounded):
    """Symbolic layer, gold as an expression only sympy reads (so the in-thread rules do not decide)."""
    value = Fraction(numerator, denominator)
    assume(value.denominator // math.gcd(value.denominator, 10**20) > 1)  # repeats: 1/3, 5/6; not 3/6
    decimal = f"{float(value):.{places}f}" if rounded else truncated(value, places)
    assert not are_equivalent(f"\\frac{{{numerator}}}{{{denominator}}}+0\\cdot\\pi", decimal)


@SYMPY_PROPERTY
@given(numerator=st.integers(-999, 999), twos=st.integers(0, 12), fives=st.integers(0, 12))
def test_math_a_terminating_fraction_equals_its_decimal(numerator, twos, fives):
    value = Fraction(numerator, 2**twos * 5**fives)
    decimal = format(Decimal(value.numerator) / Decimal(value.denominator), "f")
    assert are_equivalent(f"\\frac{{{numerator}}}{{{2**twos * 5**fives}}}+0\\cdot\\pi", decimal)


@SYMPY_PROPERTY
@given(n=st.integers(2, 500).filter(lambda n: math.isqrt(n) ** 2 != n), places=st.integers(1, 30))
def test_math_a_square_root_never_equals_a_decimal(n, places):
    root = Decimal(n).sqrt(context=Context(prec=60))
    rounded = root.quantize(Decimal(1).scaleb(-places), context=Context(prec=80))
    assert not are_equivalent(f"\\sqrt{{{n}}}", f"{rounded:f}")


# --- GSM8k: one number after #### --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, truth",
    [
        ("#### 1\u2009000", "1000"),  # thin space (SI digit grouping)
        ("#### 1\u202f000\u202f000", "1000000"),  # narrow no-break space
        ("#### 1\\,000", "1000"),  # LaTeX thin space
        ("#### $1\u2009234.50", "1234.5"),
        ("#### 72\n3 more lines follow", "72"),  # a digit on the next line is not part of the answer
        ("#### 72 (36 each)", "72"),
        ("#### 72 - that is all", "72"),
        ("#### **72**", "72"),
        ("#### 3 xylophones", "3"),
    ],
)
def test_gsm8k_one_number_is_read(response, truth):
    assert compute_score(GSM8K, response, truth)["score"] == 1.0


@pytest.mark.parametrize(
    "response",
    [
        "#### 3+4",  # scored as 3
        "#### 3 + 4",
        "#### 12/4",
        "#### 3*4",
        "#### 3 \\times 4",
        "#### 3×4",
        "#### 3 x 4",
        "#### 7 = 3+4",
        "#### 3:4",
        "#### 3, 4",
        "#### 3 4",
        "#### 1 000",  # an ordinary space separates words: two numbers
        "#### 1\u00a0000",  # so does a no-break space
        "#### 1\u200900",  # not a group of three
        "#### 1,000\u2009000",  # two kinds of separator
        "#### 1e3",
        "#### 2^3",
        "#### 2 * (3+4)",
    ],
)
def test_gsm8k_more_than_one_number_is_no_answer(response):
    for truth in ("3", "7", "12", "1", "1000", "1000000", "2", "8", "14", "0.75", "3"):
        result = compute_score(GSM8K, response, truth)
        assert result["score"] == 0.0 and result["answer_found"] == 0.0, (response, truth, result)


@PROPERTY
@given(
    a=st.integers(0, 10**9),
    b=st.integers(0, 10**4),
    operator=st.sampled_from(["+", "-", "*", "/", "×", "÷", "^", "=", ":", ",", " ", "\u00a0", "\\times", "\\cdot", "x"]),
    space=st.sampled_from(["", " ", "\u2009"]),
)
def test_gsm8k_an_expression_or_second_number_is_never_credited(a, b, operator, space):
    response = f"#### {a}{space}{operator}{space}{b}"
    for truth in {a, b, a + b, a * b}:
        assert compute_score(GSM8K, response, str(truth))["score"] == 0.0, (response, truth)


@PROPERTY
@given(n=st.integers(0, 10**15), separator=st.sampled_from([",", "\u2009", "\u202f", "\\,"]))
def test_gsm8k_digit_groups_of_three_are_one_number(n, separator):
    response = "#### " + f"{n:,}".replace(",", separator)
    assert compute_score(GSM8K, response, str(n))["score"] == 1.0
    assert compute_score(GSM8K, response, str(n + 1))["score"] == 0.0
