"""Hydra override lists: the key an override sets, merging lists so that a key set later wins, and writing a
string (a path, a name) as an override value that Hydra reads back unchanged.

Every layer that composes a run (profile, algorithm, setting, the CPU or GPU smoke profile, the user's own
overrides) produces a list of ``key=value`` strings; :func:`merge_overrides` joins them in that order.
"""

from __future__ import annotations

import re
from typing import Iterable

# Characters an override value may hold unquoted. Hydra reads a value of one token by its type (``1e3``, ``inf``
# a float, ``10`` an int, ``true`` a bool, ``null`` None, ``gpt2`` a string) and a value of several tokens as
# their text: so a plain value is a string when it holds a "/" (several tokens), or starts with a letter or "_"
# (a word, or a word and more tokens) and is not one of Hydra's typed words.
_PLAIN = re.compile(r"[A-Za-z0-9_/.+@%-]+")
_TYPED_WORDS = {"null", "true", "false", "inf", "nan"}
INTERPOLATION = "${"


def hydra_string(text: str) -> str:
    r"""``text`` written as a Hydra override value that composes to exactly ``text``, a ``str``.

    A path or a name of plain characters is written as it is (``/data/gsm8k/train.parquet``, ``grpo-on_policy``),
    anything else (``gpt2-1/x y``, ``1e3``, ``true``, ``a=b``, ``/données``) in Hydra's
    single quotes (override grammar, "Quoted values"): a quote inside becomes ``\'``, and a run of backslashes
    right before a quote (the closing one included) is doubled, because Hydra un-escapes backslashes only there.
    So ``'``, ``[``, ``{``, ``#``, ``,``, ``=``, spaces and any non-ASCII letter are carried.

    ``${`` cannot be carried: OmegaConf reads it as an interpolation, and its escape ``\${`` does not survive
    ``OmegaConf.resolve``, which verl's TaskRunner runs on the composed config (the escaped text becomes an
    interpolation again). ValueError then: the caller names the variable (:mod:`.environment` refuses it first).
    """
    if INTERPOLATION in text:
        raise ValueError(f"{text!r} contains '${{': OmegaConf (verl's config) would read it as an interpolation")
    if _PLAIN.fullmatch(text) and ("/" in text or (re.match(r"[A-Za-z_]", text) and text.lower() not in _TYPED_WORDS)):
        return text
    body = re.sub(r"(\\*)'", lambda match: match.group(1) * 2 + "\\'", text)
    body = re.sub(r"(\\+)$", lambda match: match.group(1) * 2, body)
    return f"'{body}'"


def override_key(override: str) -> str:
    """``"+a.b=1"`` -> ``"a.b"``: the config key an override sets (without ``+``, ``++`` or ``~``)."""
    return override.split("=", 1)[0].lstrip("+~")


def override_value(overrides: Iterable[str], key: str) -> str | None:
    """The last value ``overrides`` give ``key`` (``+key`` too) as written, or None."""
    value = None
    for override in overrides:
        if "=" in override and override_key(override) == key:
            value = override.split("=", 1)[1]
    return value


def parsed_value(override: str):
    """The value ``override`` sets, as Hydra reads it (a quoted string unquoted, ``null`` None, ``12`` an int);
    None for a deletion (``~key``). Hydra's override parser, imported here (no verl, no torch)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_override(override)
    return None if parsed.is_delete() else parsed.value()


def merge_overrides(*groups: Iterable[str]) -> list[str]:
    """Concatenate override lists; a key set again later replaces the earlier entry (last one wins).

    A later plain ``key=value`` for a key an earlier group added with ``+key=...`` keeps the ``+`` (the key
    is not in verl's config, so Hydra needs it).
    """
    merged: dict[str, str] = {}
    for group in groups:
        for override in group:
            key = override_key(override)
            if key in merged and merged[key].startswith("+") and not override.startswith(("+", "~")):
                override = "+" + override
            merged.pop(key, None)
            merged[key] = override
    return list(merged.values())


def hydra_list(items: Iterable[str]) -> str:
    """``["console", "file"]`` -> ``"[console,file]"`` (a Hydra list value)."""
    return "[" + ",".join(items) + "]"
