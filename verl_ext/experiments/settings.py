"""The staleness settings of the REC paper (Appendix B.2), each written one way.

A setting is (m, n, offline): weights are pushed to the rollout every m = ``sync_interval`` steps, each batch
is consumed n = ``sync_offset`` steps after the weights it was generated with were pushed, and ``offline``
never pushes after the start. verl-ext runs it with ``trainer.v1.trainer_mode=delayed_sync``
(``docs/staleness.md``). Its name, in every command, run name and table:

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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from verl_ext.staleness.schedule import StalenessSchedule

ALIASES = {"mixed": "sync_interval_16_offset_8"}
FORMS = "on_policy, sync_interval_M, sync_offset_N, sync_interval_M_offset_N, offline"
_SETTING = re.compile(r"^(?:on_policy|offline|sync_interval_(\d{1,9})(?:_offset_(\d{1,9}))?|sync_offset_(\d{1,9}))$")


@dataclass(frozen=True)
class Setting:
    """A staleness setting: m = sync_interval, n = sync_offset, offline."""

    sync_interval: int = 1
    sync_offset: int = 0
    offline: bool = False

    def __post_init__(self):
        StalenessSchedule(self.sync_interval, self.sync_offset, self.offline)  # raises on a bad value, naming it

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
        return [
            "trainer.v1.trainer_mode=delayed_sync",
            f"trainer.v1.delayed_sync.sync_interval={self.sync_interval}",
            f"trainer.v1.delayed_sync.sync_offset={self.sync_offset}",
            f"trainer.v1.delayed_sync.offline={str(self.offline).lower()}",
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
