"""The staleness setting (m, n, offline) of the REC paper (Appendix B.2): the one value, its one check, its one name.

A setting is (m, n, offline): weights are pushed to the rollout every m = ``sync_interval`` steps, each batch
is consumed n = ``sync_offset`` steps after the weights it was generated with were pushed, and ``offline``
never pushes after the start. verl-ext runs it with ``trainer.v1.trainer_mode=delayed_sync``
(``docs/staleness.md``). What it means step by step (which version generates each batch, the lag) is
:class:`verl_ext.staleness.schedule.StalenessSchedule`, a setting with that arithmetic; the
``trainer.v1.delayed_sync`` block (:mod:`verl_ext.staleness.config`) checks its three keys with
:func:`check_setting` and turns into one. Its name, in every command, run name and table:

==============================  =====================  ======================================================
name                            (m, n)                 meaning
==============================  =====================  ======================================================
``on_policy``                   (1, 0)                 a fresh push before every batch (verl's ``sync``)
``sync_interval_M``             (M, 0)                 weights pushed every M steps
``sync_offset_N``               (1, N)                 every batch N steps stale
``sync_interval_M_offset_N``    (M, N)                 both
``offline``                     --                     every batch from the initial policy (stress test)
==============================  =====================  ======================================================

Alias (resolved on input): ``mixed`` = ``sync_interval_16_offset_8`` (Figure 2's caption).

The rule, checked once (:func:`check_setting`): m is an integer >= 1, n an integer >= 0, offline true or false,
and offline keeps m = 1 and n = 0 (it never pushes after the start, so any other m or n would be silently
ignored).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from verl_ext.config_values import reject, require_bool, require_int

# verl's trainer mode that runs a setting, and its config block (the keys sync_interval, sync_offset, offline)
TRAINER_MODE = "delayed_sync"
CONFIG_KEY = f"trainer.v1.{TRAINER_MODE}"
MODE_KEY = "trainer.v1.trainer_mode"  # the key that picks verl's trainer mode

ALIASES = {"mixed": "sync_interval_16_offset_8"}
FORMS = "on_policy, sync_interval_M, sync_offset_N, sync_interval_M_offset_N, offline"
_SETTING = re.compile(r"^(?:on_policy|offline|sync_interval_(\d{1,9})(?:_offset_(\d{1,9}))?|sync_offset_(\d{1,9}))$")


def check_setting(sync_interval: Any, sync_offset: Any, offline: Any, prefix: str = "") -> None:
    """Raise :class:`verl_ext.config_values.ConfigError` (a ValueError) unless (m, n, offline) is a setting.

    ``prefix`` is where the three keys live, for the message: ``""`` for a :class:`Setting`,
    ``"trainer.v1.delayed_sync."`` for the config block.
    """
    require_int(f"{prefix}sync_interval", sync_interval, 1)
    require_int(f"{prefix}sync_offset", sync_offset, 0)
    require_bool(f"{prefix}offline", offline)
    if offline and (sync_interval, sync_offset) != (1, 0):
        changed, default = ("sync_interval", 1) if sync_interval != 1 else ("sync_offset", 0)
        reject(
            f"{prefix}{changed}",
            sync_interval if changed == "sync_interval" else sync_offset,
            f"{default} (the default) with {prefix}offline=true",
            "Offline never pushes weights after the start, so sync_interval and sync_offset would be silently "
            "ignored: drop them, or set offline=false for the delayed schedule they describe.",
        )


@dataclass(frozen=True)
class Setting:
    """A staleness setting: m = sync_interval, n = sync_offset, offline (checked by :func:`check_setting`)."""

    sync_interval: int = 1
    sync_offset: int = 0
    offline: bool = False

    def __post_init__(self):
        check_setting(self.sync_interval, self.sync_offset, self.offline)

    @property
    def label(self) -> str:
        """The setting's one name (table above)."""
        if self.offline:
            return "offline"
        interval, offset = self.sync_interval, self.sync_offset
        if (interval, offset) == (1, 0):
            return "on_policy"
        if offset == 0:
            return f"sync_interval_{interval}"
        if interval == 1:
            return f"sync_offset_{offset}"
        return f"sync_interval_{interval}_offset_{offset}"

    def overrides(self) -> list[str]:
        """The ``trainer.v1.delayed_sync`` overrides that run this setting."""
        return [
            f"trainer.v1.trainer_mode={TRAINER_MODE}",
            f"{CONFIG_KEY}.sync_interval={self.sync_interval}",
            f"{CONFIG_KEY}.sync_offset={self.sync_offset}",
            f"{CONFIG_KEY}.offline={str(self.offline).lower()}",
        ]


ON_POLICY = Setting()
OFFLINE = Setting(offline=True)


def parse_setting(text: str) -> Setting:
    """A setting's name (or an alias) -> Setting; ValueError naming the forms allowed."""
    name = ALIASES.get(text.strip(), text.strip())
    match = _SETTING.match(name)
    if match is None:
        aliases = ", ".join(f"{alias} = {value}" for alias, value in ALIASES.items())
        raise ValueError(f"unknown setting {text!r}; allowed: {FORMS} (M >= 1, N >= 0, at most 9 digits; aliases: {aliases})")
    if name == "offline":
        return OFFLINE
    interval, offset, offset_only = match.groups()
    try:
        return Setting(int(interval or 1), int(offset or offset_only or 0))
    except ValueError as error:
        raise ValueError(f"setting {text!r}: {error}") from None


def parse_settings(text: str) -> list[Setting]:
    """Names separated by commas or spaces (``--settings``, ``SETTINGS=``); a repeat is an error."""
    settings = [parse_setting(part) for part in re.split(r"[,\s]+", text) if part]
    if not settings:
        raise ValueError(f"no setting given; allowed: {FORMS}")
    labels = [setting.label for setting in settings]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(f"settings: {', '.join(repeated)} given twice")
    return settings
