"""ToolACE reward: the calls in the last ``<tool_call>`` block match the ground-truth calls.

The response is expected to be ``<think>...</think>`` then ``<tool_call>[{"name": ..., "arguments":
{...}}, ...]</tool_call>`` (the prompt written by ``data_prep.toolace`` asks for exactly that); the ground
truth is the same JSON list. Only the last ``<tool_call>...</tool_call>`` block is read; a single object
instead of a list counts as a list of one, ``"arguments"`` may be omitted (no arguments) or given as a
JSON string, and a code fence around the JSON is ignored.

Calls are compared as a multiset of (name, arguments): call order and key order do not matter; values
compare by JSON type and value, numbers as numbers (``3 == 3.0``, ``"3" != 3``, ``true != 1``).

Numbers compare by their exact decimal value as written, never through a binary float::

    value(text) = Decimal(text)        3 == 3.0 == 3e0 == 0.3e1,  0.1 != 0.10000000000000001,  1e999 != 2e999

(read as floats, ``1e999`` and ``2e999`` would both overflow to ``inf`` and compare equal, and numbers
past 17 significant digits would round together). ``NaN``, ``Infinity`` and ``-Infinity``, which
``json`` accepts but JSON does not have, make a block (or a ground truth) unreadable.

Modes (keyword arguments of :func:`compute_score`, which verl fills from
``reward.custom_reward_function.reward_kwargs``; a sample's ``extra_info`` may override them with the same
keys ``toolace_mode`` and ``toolace_strict_format``):

``exact`` (default)
    score = 1 if the multisets are equal else 0.
``partial``
    score = sum over matched pairs of q(gold, predicted) / max(#gold calls, #predicted calls), in [0, 1],
    where calls are paired greedily (best q first) only with calls of the same name, and
    q = 1/3 + 1/3 * |keys_gold & keys_pred| / |keys_gold | keys_pred| + 1/3 * (#gold keys whose value is
    matched) / #gold keys (an empty key set counts as fully matched). Equals 1 exactly when ``exact`` does.
``strict format`` (``toolace_strict_format=True``, either mode)
    score = 0 unless the response is exactly one ``<think>...</think>`` block followed by exactly one
    ``<tool_call>...</tool_call>`` block and nothing else (whitespace aside).

``format_ok`` always reports that strict-format test (for logging) whether or not it is enforced; ``acc``
is the exact match (under the strict format when enforced).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from decimal import Decimal
from typing import Any

from verl_ext.rewards.reward_result import as_text, reward_result

MODES = ("exact", "partial")
OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
MAX_CALL_BLOCK_CHARS = 200_000
MAX_CALLS = 64
MAX_DEPTH = 64  # nesting of the whole call list; deeper JSON is no tool call, and comparing it would recurse


def last_call_block(text: str) -> str | None:
    """Text inside the last ``<tool_call>...</tool_call>``, or None."""
    start = text.rfind(OPEN)
    if start < 0:
        return None
    end = text.find(CLOSE, start + len(OPEN))
    if end < 0 or end - start > MAX_CALL_BLOCK_CHARS:
        return None
    block = text[start + len(OPEN) : end].strip()
    if block.startswith("```"):
        block = block[3:]
        block = block[4:] if block.startswith("json") else block
        block = block.rstrip()
        block = block[:-3] if block.endswith("```") else block
    return block


_NOT_JSON = object()


def _not_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(text: str) -> Any:
    """``json.loads`` with every number an exact ``Decimal``, or a ``_NOT_JSON`` marker for invalid JSON
    (``NaN``/``Infinity`` included), JSON nested too deeply, or a number ``Decimal`` cannot hold (an
    exponent beyond 10^18)."""
    try:
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal, parse_constant=_not_json_constant)
    except (ValueError, ArithmeticError, RecursionError):  # decimal.InvalidOperation is an ArithmeticError
        return _NOT_JSON
    return value if nesting_depth(value) <= MAX_DEPTH else _NOT_JSON


def nesting_depth(value: Any) -> int:
    """How deeply lists and objects nest in a JSON value (a scalar is 0), counted without recursion; the
    count stops a level past :data:`MAX_DEPTH`."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_calls(text: str) -> list[tuple[str, dict[str, Any]]] | None:
    """``[{"name", "arguments"}, ...]`` JSON -> [(name, arguments)], or None if it is not that (or nests
    deeper than :data:`MAX_DEPTH`, so that comparing values can never exhaust the recursion limit)."""
    value = _loads(text)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value or len(value) > MAX_CALLS:
        return None
    calls = []
    for call in value:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return None
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            arguments = _loads(arguments)
        if not isinstance(arguments, dict):
            return None
        calls.append((call["name"], arguments))
    return calls


def exact_number(value: Decimal) -> tuple:
    """``(sign, digits, exponent)`` with no trailing zero digit: one form per exact value, computed from
    the digits alone (no arithmetic, so ``1E+999999999999999999`` costs nothing); zero is ``(0, "0", 0)``."""
    sign, digits, exponent = value.as_tuple()
    text = "".join(map(str, digits)).lstrip("0")
    if not text:
        return (0, "0", 0)
    stripped = text.rstrip("0")
    return (sign, stripped, exponent + len(text) - len(stripped))


def canonical(value: Any) -> tuple:
    """A hashable form in which equal JSON values are equal: numbers by exact value (see the module
    docstring), objects by sorted keys."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, Decimal) and value.is_finite():
        return ("number", exact_number(value))
    if isinstance(value, int):
        return ("number", exact_number(Decimal(value)))
    if isinstance(value, float) and math.isfinite(value):
        return ("number", exact_number(Decimal(repr(value))))  # the float as Python writes it: 0.1 -> 0.1
    if isinstance(value, (float, Decimal)):  # nan, inf: equal to nothing, not even themselves
        return ("not a number", object())
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("list", tuple(canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", tuple(sorted(((str(k), canonical(v)) for k, v in value.items()), key=lambda kv: kv[0])))
    return ("other", repr(value))


def strict_format_ok(text: str) -> bool:
    """Exactly ``<think>...</think>`` then ``<tool_call>...</tool_call>``, nothing else but whitespace."""
    stripped = text.strip()
    if any(stripped.count(tag) != 1 for tag in (THINK_OPEN, THINK_CLOSE, OPEN, CLOSE)):
        return False
    if not (stripped.startswith(THINK_OPEN) and stripped.endswith(CLOSE)):
        return False
    think_end, call_start = stripped.index(THINK_CLOSE), stripped.index(OPEN)
    return think_end < call_start and not stripped[think_end + len(THINK_CLOSE) : call_start].strip()


def _call_quality(gold: dict[str, Any], predicted: dict[str, Any]) -> float:
    gold_keys, predicted_keys = set(gold), set(predicted)
    union = gold_keys | predicted_keys
    key_overlap = len(gold_keys & predicted_keys) / len(union) if union else 1.0
    matched = sum(1 for key in gold_keys & predicted_keys if canonical(gold[key]) == canonical(predicted[key]))
    value_match = matched / len(gold_keys) if gold_keys else 1.0
    return (1.0 + key_overlap + value_match) / 3.0


def partial_credit(gold: list[tuple[str, dict]], predicted: list[tuple[str, dict]]) -> float:
    """The ``partial`` score (module docstring); 1.0 iff the call multisets are equal."""
    pairs = sorted(
        (
            (_call_quality(g_args, p_args), i, j)
            for i, (g_name, g_args) in enumerate(gold)
            for j, (p_name, p_args) in enumerate(predicted)
            if g_name == p_name
        ),
        key=lambda pair: -pair[0],
    )
    used_gold, used_predicted, total = set(), set(), 0.0
    for quality, i, j in pairs:
        if i not in used_gold and j not in used_predicted:
            used_gold.add(i)
            used_predicted.add(j)
            total += quality
    return total / max(len(gold), len(predicted))


def _multiset(calls: list[tuple[str, dict]]) -> Counter:
    return Counter((name, canonical(arguments)) for name, arguments in calls)


def compute_score(solution_str, ground_truth, *, mode: str = "exact", strict_format: bool = False):
    if mode not in MODES:
        raise ValueError(f"toolace_mode={mode!r}: expected one of {MODES}")
    text = as_text(solution_str)
    format_ok = strict_format_ok(text)
    block = last_call_block(text)
    predicted = parse_calls(block) if block is not None else None
    gold = parse_calls(as_text(ground_truth))
    if gold is None:
        return reward_result(
            0.0, correct=False, answer_found=predicted is not None, format_ok=format_ok, scorer_error=True
        )
    if predicted is None:
        return reward_result(0.0, correct=False, answer_found=False, format_ok=format_ok)
    exact = _multiset(gold) == _multiset(predicted)
    score = partial_credit(gold, predicted) if mode == "partial" else float(exact)
    if strict_format and not format_ok:
        score, exact = 0.0, False
    return reward_result(score, correct=exact, answer_found=True, format_ok=format_ok)
