"""Parse ToolACE's bracketed call syntax into JSON calls.

ToolACE's assistant turns write calls like Python, inside one pair of brackets::

    [Market Trends API(trend_type="MARKET_INDEXES", country="us"), Weather/Forecast(days=3, metric=true)]

Function names may hold spaces, dots, dashes, slashes and quotes, so the text is not Python as it
stands. The parser takes each name as the text between a call boundary (``[`` or ``,``) and the next
``(``, finds the ``)`` that closes its argument list with Python's :mod:`tokenize` (which knows where
every string literal starts and ends, so a ``)`` or ``,`` inside a string is never mistaken for syntax),
swaps the names for placeholder identifiers, and parses the result
with :mod:`ast`. Argument values must be literals (strings, numbers, lists, dicts, tuples); the JSON
words ``true``/``false``/``null`` are read like ``True``/``False``/``None``. The result is JSON-ready::

    [{"name": "Market Trends API", "arguments": {"trend_type": "MARKET_INDEXES", "country": "us"}}, ...]
"""

from __future__ import annotations

import ast
import json
import math
import re
import tokenize
from decimal import Decimal, InvalidOperation
from typing import Any

JSON_WORDS = {"true": True, "false": False, "null": None}
_OPENING, _CLOSING = "([{", ")]}"
_STRUCTURAL = re.compile(r"[()\[\]{},]")  # the first of these after a name must be its "("


class CallSyntaxError(ValueError):
    """The text looks like a call list but cannot be read as one.

    ``reason`` is a short fixed phrase (a counting key for reports); ``detail`` says where.
    """

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


def looks_like_call_list(text: str) -> bool:
    """True for text shaped ``[...]`` that is not a JSON list (plain-text turns and tool results are not)."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")) or "(" not in stripped:
        return False
    try:
        json.loads(stripped)
    except (ValueError, RecursionError):  # not JSON (or too deep to tell): the call parser decides
        return True
    return False


def parse_call_list(text: str) -> list[dict[str, Any]]:
    """``[Name(key=value, ...), ...]`` -> ``[{"name": Name, "arguments": {key: value}}, ...]``."""
    source = text.strip()
    if not (source.startswith("[") and source.endswith("]")):
        raise CallSyntaxError("not enclosed in [ ]")
    names, placeholder_source = _replace_names(source)
    try:
        tree = ast.parse(placeholder_source, mode="eval")
    except SyntaxError as error:
        raise CallSyntaxError("invalid call syntax", error.msg) from None
    except (RecursionError, MemoryError):  # 1+1+...+1 or -----1, thousands deep
        raise CallSyntaxError("an expression nested too deeply") from None
    if not isinstance(tree.body, ast.List):
        raise CallSyntaxError("not a list of calls")
    calls = []
    for element in tree.body.elts:
        if not (isinstance(element, ast.Call) and isinstance(element.func, ast.Name) and element.func.id in names):
            raise CallSyntaxError("an element of the list is not a call")
        name = names[element.func.id]
        if element.args:
            raise CallSyntaxError("positional argument", f"in the call to '{name}'")
        arguments = {}
        for keyword in element.keywords:
            if keyword.arg is None:
                raise CallSyntaxError("'**' argument", f"in the call to '{name}'")
            if keyword.arg in arguments:
                raise CallSyntaxError("repeated argument", f"'{keyword.arg}' in the call to '{name}'")
            arguments[keyword.arg] = _literal(keyword.value, name, keyword.arg, placeholder_source)
        calls.append({"name": name, "arguments": arguments})
    if not calls:
        raise CallSyntaxError("empty call list")
    return calls


def _replace_names(source: str) -> tuple[dict[str, str], str]:
    """Swap each function name for an identifier; returns {identifier: name} and the new source.

    Between calls the text is scanned as plain characters (a name runs up to its ``(``, so it may hold
    any character but brackets, even a quote); each argument list is delimited by the tokenizer.
    """
    names: dict[str, str] = {}
    calls: list[str] = []
    position = 1  # just after the opening "["
    last = len(source) - 1  # the closing "]"
    name = ""
    while True:
        while position < last and source[position].isspace():
            position += 1
        if calls:  # after a call: "," then the next call (a trailing comma is allowed), or the end
            if position < last and source[position] == ",":
                position += 1
                while position < last and source[position].isspace():
                    position += 1
            elif position < last:
                raise CallSyntaxError(
                    "invalid call syntax",
                    f"unexpected text after the call to '{name}'",
                )
        if position >= last:
            break
        structural = _STRUCTURAL.search(source, position)
        paren = structural.start() if structural else len(source)
        if structural is None or structural.group() != "(":
            raise CallSyntaxError("a name not followed by '(...)'", source[position:paren].strip())
        name = source[position:paren].strip()
        if not name:
            raise CallSyntaxError("a '(' without a function name before it")
        if name[0] in "\"'":
            raise CallSyntaxError("a string where a function name should be")
        closing = _matching_paren(source, paren)
        placeholder = f"__tool_call_{len(names)}__"
        names[placeholder] = name
        calls.append(placeholder + source[paren : closing + 1])
        position = closing + 1
    return names, "[" + ", ".join(calls) + "]"


def _matching_paren(source: str, opening: int) -> int:
    """Offset of the ``)`` closing the ``(`` at ``opening``, skipping strings (via :mod:`tokenize`).

    The tokenizer reads ``source`` from ``opening`` on, line by line, and stops at the closing ``)``: the
    work is the call's own length plus one copy of the rest of its line (no re-reading of the text).
    """
    position = opening
    line_offsets: list[int] = []  # source offset of each line handed to the tokenizer

    def readline() -> str:
        nonlocal position
        if position >= len(source):
            return ""
        end = source.find("\n", position)
        end = len(source) if end < 0 else end + 1
        line_offsets.append(position)
        line, position = source[position:end], end
        return line

    depth = 0
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type != tokenize.OP:
                continue
            if token.string in _OPENING:
                depth += 1
            elif token.string in _CLOSING:
                depth -= 1
                if depth == 0:
                    if token.string != ")":
                        break
                    return line_offsets[token.start[0] - 1] + token.start[1]
    except tokenize.TokenError as error:
        raise CallSyntaxError("unbalanced brackets or quotes", str(error.args[0])) from None
    except SyntaxError as error:
        raise CallSyntaxError("invalid call syntax", error.msg) from None
    raise CallSyntaxError("unbalanced brackets or quotes")


def _exact(number_text: str) -> Decimal | None:
    try:
        return Decimal(number_text)
    except (InvalidOperation, ValueError):
        return None


class _JsonWords(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in JSON_WORDS:
            return ast.copy_location(ast.Constant(JSON_WORDS[node.id]), node)
        return node


def _literal(node: ast.AST, function: str, argument: str, source: str) -> Any:
    """The JSON value of one argument, or :class:`CallSyntaxError`.

    A number is written to JSON as Python's float holds it; one whose written digits a 64-bit float
    cannot hold (``1.0000000000000000001`` would become ``1.0``, 20 significant digits lose the last
    ones) is an error rather than a silently changed ground truth: the reward compares numbers by their
    exact decimal value (:mod:`verl_ext.rewards.toolace`), so a response copying the digits would score 0.
    """
    try:
        value = ast.literal_eval(_JsonWords().visit(node))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallSyntaxError("an argument is not a literal value", f"'{argument}' of '{function}'") from None
    for constant in ast.walk(node):
        if isinstance(constant, ast.Constant) and type(constant.value) is float and math.isfinite(constant.value):
            written = ast.get_source_segment(source, constant) or ""
            if _exact(written) is not None and _exact(written) != _exact(repr(constant.value)):
                raise CallSyntaxError(
                    "a number a 64-bit float cannot hold exactly", f"{written[:40]} in '{argument}' of '{function}'"
                )
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise CallSyntaxError(
            "an argument has no JSON form (set, bytes, inf, ...)", f"'{argument}' of '{function}'"
        ) from None
