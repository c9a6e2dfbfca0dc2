"""Are two math answers (LaTeX, as written in ``\\boxed{}``) the same? Pure functions, no time limits.

Three layers, cheapest first:

1. :func:`normalized_equal`, string rules only (safe to run anywhere, linear in the input): the PRM800K
   normalisation (``\\dfrac``/``\\tfrac`` -> ``\\frac``, ``\\left``/``\\right``, ``^\\circ``, ``\\%``, ``\\$``,
   ``\\text{units}`` after a number, ``x =`` prefixes, thousands commas, ``5.0`` -> ``5``, ``.5`` ->
   ``0.5``, ``a/b`` -> ``\\frac{a}{b}``, ``\\frac12`` -> ``\\frac{1}{2}``, spaces), then exact rational
   comparison of plain numbers (``0.25 == \\frac{1}{4}``) and element-wise comparison of tuples and
   intervals (brackets must match).
2. ``math-verify`` (``verify(parse(gold), parse(pred))``, gold first) on the raw answers, then on the
   normalised ones: symbolic equality with sympy, sets, intervals, equations, units; *exactly*
   (:func:`math_verify_equal`): every decimal is first made the rational it writes (``0.333`` ->
   ``333/1000``), so math-verify's rounding of decimals to 6 places never applies, and its numeric
   fallback compares to more digits than any number written in either answer holds.
3. Nothing else: unequal.

Grading is exact. A terminating decimal equals the exact value it writes (``0.5 == \\frac{1}{2} ==
\\frac{\\sqrt{4}}{4}``, ``0.125 == \\frac18``, ``[0.5, 1.5) == [\\frac12, \\frac32)``); a decimal
approximation of an irrational or repeating value is another number, however many digits it has
(``0.333``, ``0.3333333`` != ``\\frac13``; ``1.414``, ``1.41421356`` != ``\\sqrt2``; ``3.14159265358979323846``
!= ``\\pi``; ``\\sqrt{3.14159265358979323846}`` != ``\\sqrt\\pi``). math-verify's defaults (round
decimals to 6 places; compare other numeric values to 15 digits) accepted the 6-digit ones, and
approximations of 15 or more digits inside an expression.

Layer 2 can run for a very long time on some inputs (``2^{2^{2^{100}}}``, ``(x+y+z)^{300}``, ``10^8!``),
so :func:`safe_for_symbolic` refuses inputs with exponent towers, large exponents (of numbers or, with a
variable present, of anything; also in scientific notation, ``1e999999``), large factorials or very long
integers before sympy sees them. No such rule is complete (``(a+b+c+d+e)^{10}`` against ``(a+b+c+d+e)^{9}`` takes sympy about 20 s), so callers
run :func:`are_equivalent` under a wall-clock budget (:mod:`verl_ext.rewards.equivalence_pool`).
math-verify's own signal-based timeouts are switched off (they only work on the main thread).
"""

from __future__ import annotations

import logging
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

MAX_ANSWER_CHARS = 1_000  # longer answers are compared as normalised strings only
MAX_INTEGER_DIGITS = 200
MAX_EXPONENT = 10_000
MAX_EXPONENT_WITH_VARIABLES = 20
MAX_FACTORIAL = 1_000
NUMERIC_GUARD_DIGITS = 15  # the numeric fallback compares this many digits beyond the longest number written
MAX_NUMERIC_DIGITS = 1_000

# ---------------------------------------------------------------------------------------------- layer 1


def normalize_answer(text: str) -> str:
    """PRM800K-style canonical string of a LaTeX answer (see the module docstring)."""
    s = text.strip()
    s = s.replace("\n", " ").replace("\\!", "")
    s = re.sub(r"\\(?:displaystyle|textstyle|left|right|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°", "", s)
    s = s.replace("\\$", "").replace("$", "").replace("\\%", "").replace("%", "")
    s = re.sub(r"\\[,;: ]|~", " ", s)
    s = re.sub(r"^(.*\d)\s*\\(?:text|mbox|mathrm)\{\s*[a-zA-Z][a-zA-Z ]*\}\s*$", r"\1", s)  # 180\text{ miles}
    s = re.sub(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox)\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"^\s*[a-zA-Z]\s*=(?!=)", "", s)  # "x = 5" -> "5"
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    s = s.replace(" ", "")
    s = s.rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"^(-?)\.(\d)", r"\g<1>0.\2", s)
    if re.fullmatch(r"-?\d+\.\d+", s):
        s = s.rstrip("0").rstrip(".")
    s = re.sub(r"^(-?)(\d+)/(\d+)$", r"\1\\frac{\2}{\3}", s)
    return s


def as_fraction(normalized: str) -> Fraction | None:
    """Exact value of a normalised plain number: integer, decimal or ``\\frac{a}{b}`` with integer a, b."""
    if len(normalized) > MAX_INTEGER_DIGITS:
        return None
    match = re.fullmatch(r"(-?)\\frac\{(-?\d+)\}\{(-?\d+)\}", normalized)
    try:
        if match:
            value = Fraction(int(match.group(2)), int(match.group(3)))
            return -value if match.group(1) else value
        if re.fullmatch(r"-?\d+(?:\.\d+)?", normalized):
            return Fraction(Decimal(normalized))
    except (ZeroDivisionError, InvalidOperation, ValueError):
        return None
    return None


def split_top_level(inner: str) -> list[str]:
    """Split on commas that are not inside brackets or braces."""
    parts, depth, start = [], 0, 0
    for position, char in enumerate(inner):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[start:position])
            start = position + 1
    parts.append(inner[start:])
    return parts


def _tuple_parts(normalized: str) -> tuple[str, list[str], str] | None:
    if len(normalized) >= 2 and normalized[0] in "([" and normalized[-1] in ")]":
        parts = split_top_level(normalized[1:-1])
        if len(parts) >= 2:
            return normalized[0], parts, normalized[-1]
    return None


def normalized_equal(gold: str, predicted: str, _depth: int = 0) -> bool:
    """Layer 1: equal after string normalisation, as exact rationals, or element-wise as tuples."""
    if max(len(gold), len(predicted)) > 4 * MAX_ANSWER_CHARS:  # too long to normalise: exact text only
        return bool(gold.strip()) and gold.strip() == predicted.strip()
    a, b = normalize_answer(gold), normalize_answer(predicted)
    if a == b:
        return bool(a)
    fraction_a, fraction_b = as_fraction(a), as_fraction(b)
    if fraction_a is not None and fraction_b is not None:
        return fraction_a == fraction_b
    tuple_a, tuple_b = _tuple_parts(a), _tuple_parts(b)
    if tuple_a and tuple_b and _depth < 3:
        (open_a, parts_a, close_a), (open_b, parts_b, close_b) = tuple_a, tuple_b
        return (
            open_a == open_b
            and close_a == close_b
            and len(parts_a) == len(parts_b)
            and all(normalized_equal(x, y, _depth + 1) for x, y in zip(parts_a, parts_b))
        )
    return False


# ---------------------------------------------------------------------------------------------- guard

_EXPONENT_START = re.compile(r"\^|\*\*")
_NUMBER_IN_EXPONENT = re.compile(r"\d+")


def _exponent_text(text: str, start: int) -> tuple[str, int]:
    """The exponent written at ``text[start:]`` (a brace group or one token) and where it ends."""
    while start < len(text) and text[start] == " ":
        start += 1
    if start < len(text) and text[start] == "{":
        depth = 0
        for position in range(start, min(len(text), start + MAX_ANSWER_CHARS)):
            if text[position] == "{":
                depth += 1
            elif text[position] == "}":
                depth -= 1
                if depth == 0:
                    return text[start + 1 : position], position + 1
        return text[start + 1 :], len(text)
    match = re.compile(r"-?\d+(?:\.\d+)?|\\[a-zA-Z]+|.").match(text, start)
    return (match.group(0), match.end()) if match else ("", start)


def safe_for_symbolic(text: str) -> bool:
    """False for answers sympy could spend unbounded time or memory on (see the module docstring)."""
    if len(text) > MAX_ANSWER_CHARS or re.search(rf"\d{{{MAX_INTEGER_DIGITS + 1},}}", text):
        return False
    has_variable = bool(re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+", " ", text)))  # letters beyond commands
    for match in _EXPONENT_START.finditer(text):
        exponent, end = _exponent_text(text, match.end())
        if _EXPONENT_START.search(exponent) or "!" in exponent:
            return False  # a tower: 2^{2^{100}}
        if _EXPONENT_START.match(text[end:].lstrip()):
            return False  # a double superscript: 2^{9}^{9}
        limit = MAX_EXPONENT_WITH_VARIABLES if has_variable else MAX_EXPONENT
        if any(int(number) > limit for number in _NUMBER_IN_EXPONENT.findall(exponent)):
            return False
    if any(int(exponent) > MAX_EXPONENT for exponent in re.findall(r"\d[eE][+-]?(\d+)", text)):
        return False  # 1e999999 (scientific notation)
    for match in re.finditer(r"(\d+)\s*!|[)}\]]\s*!", text):
        if match.group(1) is None or int(match.group(1)) > MAX_FACTORIAL:
            return False  # 100000!, (10^5)!
    return True


# ---------------------------------------------------------------------------------------------- layer 2


def exact_decimals(parsed):
    """A parsed answer (sympy expression, matrix, or math-verify's string) with every decimal replaced by
    the rational it writes: ``Float('0.333')`` -> ``333/1000`` (sympy keeps a decimal's written digits,
    so ``str`` gives them back; ``Rational`` of that text is exact)."""
    from sympy import Basic, Float, Rational
    from sympy.matrices import MatrixBase

    if isinstance(parsed, MatrixBase):
        return parsed.applyfunc(exact_decimals)
    if not isinstance(parsed, Basic):
        return parsed
    decimals = parsed.atoms(Float)
    return parsed.xreplace({value: Rational(str(value)) for value in decimals}) if decimals else parsed


def written_digits(parsed) -> int:
    """Digits of the longest rational in a parsed answer, numerator and denominator together (0 if none)."""
    from sympy import Basic, Rational
    from sympy.matrices import MatrixBase

    if isinstance(parsed, MatrixBase):
        return max((written_digits(item) for item in parsed), default=0)
    if not isinstance(parsed, Basic):
        return 0
    return max((_digits(value.p) + _digits(value.q) for value in parsed.atoms(Rational)), default=0)


def _digits(integer: int) -> int:
    """Decimal digits of an integer, to within one, without ``str`` (which refuses over 4,300 digits)."""
    return int(abs(integer).bit_length() * 0.30103) + 1


def math_verify_equal(gold: str, predicted: str) -> bool:
    """math-verify's verdict on two boxed answers, exact (module docstring), with its signal-based
    timeouts off. The numeric fallback's precision::

        digits = min(MAX_NUMERIC_DIGITS, NUMERIC_GUARD_DIGITS + longest rational written in either answer)

    so an approximation written with d digits differs from the exact value within the digits compared.
    """
    from math_verify import parse, verify

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # it warns that timeouts are off, every call
    parsed_gold = parse(f"\\boxed{{{gold}}}", parsing_timeout=None, raise_on_error=False)
    parsed_predicted = parse(f"\\boxed{{{predicted}}}", parsing_timeout=None, raise_on_error=False)
    if not parsed_gold or not parsed_predicted:
        return False
    exact_gold = [exact_decimals(item) for item in parsed_gold]
    exact_predicted = [exact_decimals(item) for item in parsed_predicted]
    longest = max(written_digits(item) for item in (*exact_gold, *exact_predicted))
    digits = min(MAX_NUMERIC_DIGITS, NUMERIC_GUARD_DIGITS + longest)
    return bool(
        verify(exact_gold, exact_predicted, numeric_precision=digits, timeout_seconds=None, raise_on_error=False)
    )


def are_equivalent(gold: str, predicted: str) -> bool:
    """Layers 1 and 2. Unbounded time in rare cases: call it under a budget (see equivalence_pool)."""
    if normalized_equal(gold, predicted):
        return True
    if not (safe_for_symbolic(gold) and safe_for_symbolic(predicted)):
        return False
    if math_verify_equal(gold, predicted):
        return True
    normalized_gold, normalized_predicted = normalize_answer(gold), normalize_answer(predicted)
    if (normalized_gold, normalized_predicted) == (gold, predicted) or not (normalized_gold and normalized_predicted):
        return False
    return math_verify_equal(normalized_gold, normalized_predicted)
