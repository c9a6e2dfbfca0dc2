"""The algorithms the lab compares, by the names of the run scripts, each mapped to verl overrides.

A choice is written ``NAME`` or ``NAME@EPS_LOW_EPS_HIGH`` (``rec_oneside_nois@0.6_2.0``: REC-OneSide-NoIS
with the enlarged clipping range). The names and their meaning are those of ``run_scripts/lib/presets.sh``
(``verl_ext_algorithm``), so a lab result and a GPU run of the same name train the same objective:

==================  ==========================  =====================================================
name                algorithm.adv_estimator     actor_rollout_ref.actor.policy_loss.loss_mode
==================  ==========================  =====================================================
reinforce           rec                         rec_reinforce (no clipping)
grpo                grpo (std-normalised)       rec_oneside_is (the paper's GRPO: eq. 8's gradient)
rec_* (six)         rec                         the same name
rec_gspo_is/_nois   rec                         the same name, seq-mean-token-mean aggregation
opmd, asymre        rec                         the same name, beta = 0.1
red_drop            red_drop                    rec_reinforce
red_weight          rec                         red_weight, T = 1
offpolicy_grpo      grpo                        offpolicy_grpo (pi_k recomputed, alpha as IS weights)
==================  ==========================  =====================================================

REC-Ring's outer margins are the paper's (0.6, 2.0) whatever the inner range (a range wider than them
is rejected by verl-ext's config checks, naming the keys). Every loss but ``offpolicy_grpo`` gets pi_old = the behaviour policy (``bypass_mode=true``, the recipe's
default, stated again so every run says it); see ``docs/algorithms.md``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from verl_ext.catalog import POLICY_LOSSES

DEFAULT_EPSILONS = (0.2, 0.2)
ENLARGED_EPSILONS = (0.6, 2.0)

# name -> (estimator, loss mode, has a clipping range)
ALGORITHMS: dict[str, tuple[str, str, bool]] = {
    "reinforce": ("rec", "rec_reinforce", False),
    "grpo": ("grpo", "rec_oneside_is", True),
    **{name: ("rec", name, True) for name in POLICY_LOSSES if name.startswith(("rec_oneside", "rec_twoside", "rec_ring", "rec_gspo"))},
    "opmd": ("rec", "opmd", False),
    "asymre": ("rec", "asymre", False),
    "red_drop": ("red_drop", "rec_reinforce", False),
    "red_weight": ("rec", "red_weight", False),
    "offpolicy_grpo": ("grpo", "offpolicy_grpo", True),
}

_SPEC = re.compile(r"^(?P<name>[a-z_]+)(?:@(?P<low>[^_@]+)_(?P<high>[^_@]+))?$")


@dataclass(frozen=True)
class AlgorithmChoice:
    """One algorithm of the lab: a name of :data:`ALGORITHMS` and, for a clipped one, its (eps_low, eps_high)."""

    name: str
    epsilons: Optional[tuple[float, float]] = None  # None: not clipped

    @property
    def estimator(self) -> str:
        return ALGORITHMS[self.name][0]

    @property
    def loss_mode(self) -> str:
        return ALGORITHMS[self.name][1]

    @property
    def label(self) -> str:
        """``rec_oneside_nois`` with the default range, ``rec_oneside_nois@0.6_2.0`` with another."""
        if self.epsilons is None or self.epsilons == DEFAULT_EPSILONS:
            return self.name
        return f"{self.name}@{_number(self.epsilons[0])}_{_number(self.epsilons[1])}"

    def overrides(self) -> list[str]:
        low, high = self.epsilons or DEFAULT_EPSILONS
        overrides = [
            f"algorithm.adv_estimator={self.estimator}",
            f"actor_rollout_ref.actor.policy_loss.loss_mode={self.loss_mode}",
            f"actor_rollout_ref.actor.clip_ratio_low={low}",
            f"actor_rollout_ref.actor.clip_ratio_high={high}",
        ]
        if self.estimator == "grpo":
            overrides.append("algorithm.norm_adv_by_std_in_grpo=true")
        if self.name in ("rec_ring_is", "rec_ring_nois"):
            overrides += [
                f"actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low={ENLARGED_EPSILONS[0]}",
                f"actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high={ENLARGED_EPSILONS[1]}",
            ]
        if self.name in ("rec_gspo_is", "rec_gspo_nois"):
            overrides.append("actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean")
        if self.name in ("opmd", "asymre"):
            overrides.append("actor_rollout_ref.actor.policy_loss.reg_coef=0.1")
        if self.name == "red_weight":
            overrides.append("actor_rollout_ref.actor.policy_loss.weight_temperature=1.0")
        if self.name == "offpolicy_grpo":
            overrides += [
                "algorithm.rollout_correction.bypass_mode=false",
                "algorithm.rollout_correction.rollout_is=token",
                "algorithm.rollout_correction.rollout_is_threshold=1e6",
            ]
        else:
            overrides.append("algorithm.rollout_correction.bypass_mode=true")
        return overrides


def _number(value: float) -> str:
    return f"{value:g}"


def parse_algorithm(spec: str, default_epsilons: tuple[float, float] = DEFAULT_EPSILONS) -> AlgorithmChoice:
    """``"rec_oneside_nois@0.6_2.0"`` -> AlgorithmChoice; a clipped name without ``@`` gets ``default_epsilons``.

    Raises ValueError naming the spec and the allowed names on an unknown name, a malformed range, or a
    range given to an algorithm that has none.
    """
    match = _SPEC.match(spec.strip())
    name = spec.strip().split("@", 1)[0]
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {spec!r}; allowed: {', '.join(ALGORITHMS)} (clipped ones take @EPS_LOW_EPS_HIGH)")
    if match is None:
        raise ValueError(f"algorithm {spec!r}: write the clipping range as NAME@EPS_LOW_EPS_HIGH, e.g. rec_oneside_nois@0.6_2.0")
    clipped = ALGORITHMS[name][2]
    if match.group("low") is None:
        return AlgorithmChoice(name, _checked_epsilons(spec, default_epsilons) if clipped else None)
    if not clipped:
        raise ValueError(f"algorithm {spec!r}: {name!r} has no clipping range (@EPS_LOW_EPS_HIGH applies to grpo, rec_*, offpolicy_grpo)")
    try:
        epsilons = (float(match.group("low")), float(match.group("high")))
    except ValueError:
        raise ValueError(f"algorithm {spec!r}: the clipping range must be two numbers, e.g. rec_oneside_nois@0.6_2.0") from None
    return AlgorithmChoice(name, _checked_epsilons(spec, epsilons))


def _checked_epsilons(spec: str, epsilons: tuple[float, float]) -> tuple[float, float]:
    low, high = epsilons
    if not (math.isfinite(low) and 0.0 <= low <= 1.0):
        raise ValueError(f"algorithm {spec!r}: epsilon_low must be in [0, 1], got {low}")
    if not (math.isfinite(high) and high >= 0.0):
        raise ValueError(f"algorithm {spec!r}: epsilon_high must be >= 0, got {high}")
    return (float(low), float(high))


def parse_algorithms(text: str, default_epsilons: tuple[float, float] = DEFAULT_EPSILONS) -> list[AlgorithmChoice]:
    """A comma-separated list of specs (``--algorithms``); duplicates are an error."""
    specs = [part for part in (piece.strip() for piece in text.split(",")) if part]
    if not specs:
        raise ValueError(f"--algorithms: no algorithm given; allowed: {', '.join(ALGORITHMS)}")
    choices = [parse_algorithm(spec, default_epsilons) for spec in specs]
    labels = [choice.label for choice in choices]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ValueError(f"--algorithms: {', '.join(duplicates)} given twice")
    return choices
