"""The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) in a text, braces balanced.

Used by the MATH/Guru reward and by ``data_prep.math`` (ground truth of the MATH-lighteval schema).
Literal braces ``\\{``/``\\}`` and the line break ``\\\\`` do not count as grouping braces. The search
is linear and stops after :data:`MAX_BOX_CHARS` characters, so a megabyte of unclosed braces costs
milliseconds.
"""

from __future__ import annotations

import re

BOX_COMMANDS = ("\\boxed", "\\fbox")
MAX_BOX_CHARS = 10_000

_GROUPING = re.compile(r"\\\\|\\[{}]|[{}]")


def last_boxed_content(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``/``\\fbox{...}`` (also ``\\boxed 5``); None if absent or unclosed."""
    start, command = max((text.rfind(c), c) for c in BOX_COMMANDS)
    if start < 0:
        return None
    position = start + len(command)
    window = text[position : position + MAX_BOX_CHARS]
    stripped = window.lstrip()
    if not stripped.startswith("{"):
        # "\boxed 5" form: the token after the space, up to whitespace or "$".
        if stripped == window or not stripped:  # "\boxedx" is another command; "\boxed" alone is no answer
            return None
        token = re.match(r"[^\s$]+", stripped)
        return token.group(0) if token else None
    opening = len(window) - len(stripped)
    depth = 0
    for match in _GROUPING.finditer(window, opening):
        brace = match.group(0)
        if brace == "{":
            depth += 1
        elif brace == "}":
            depth -= 1
            if depth == 0:
                return window[opening + 1 : match.start()]
    return None
