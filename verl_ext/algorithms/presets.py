"""The algorithm presets: each name a user writes, mapped to an estimator, a policy loss and their settings.

A preset is picked by name (``verl-ext lab --algorithms``, ``run_scripts/run.sh PROFILE ALGORITHM``, the
figure scripts, ``ALGORITHMS=...``). The names are the names registered with verl (:mod:`verl_ext.algorithms.registry`),
plus ``grpo``, verl's own estimator name. A clipped preset takes another clipping range as
``NAME@EPS_LOW_EPS_HIGH`` (``rec_oneside_nois@0.6_2``: REC-OneSide-NoIS with the enlarged range).

==================  ==========================  ===========================================================
name                algorithm.adv_estimator     actor_rollout_ref.actor.policy_loss.loss_mode and settings
==================  ==========================  ===========================================================
every loss name     rec                         that loss (``rec_reinforce``, ``rec_oneside_is``, ...,
                                                ``opmd``, ``asymre``, ``red_weight``, ``topr``)
offpolicy_grpo      grpo                        offpolicy_grpo (pi_k recomputed, alpha as IS weights)
m2po                grpo (std-normalised)       m2po (tau_M2 = 0.04): the paper's advantages are GRPO's
red_drop            red_drop                    rec_reinforce (RED-Drop: the estimator drops, the loss is
                                                plain REINFORCE)
grpo                grpo (std-normalised)       rec_oneside_is: the REC paper's GRPO (section 4.1), whose
                                                gradient is eq. 8's (verl's ``vanilla`` adds dual-clip)
==================  ==========================  ===========================================================

Settings every preset states (so each run's config says them): the clipping range (default (0.2, 0.2)),
``norm_adv_by_std_in_grpo=true`` with the ``grpo`` estimator, every number the loss reads at the papers' value,
which is its declared default (:mod:`verl_ext.algorithms.hyperparameters`: REC-Ring's outer margins (0.6, 2.0),
beta = 0.1 for OPMD and AsymRE, T = 1 for RED-Weight, tau_M2 = 0.04 for M2PO), REC-GSPO's ``seq-mean-token-mean``
aggregation (its formula is a mean of token means, B.7), and pi_old: the behaviour policy (``bypass_mode=true``)
for every loss but ``offpolicy_grpo``, which recomputes pi_k and takes alpha as IS weights.

Aliases (documented, resolved to the name above before anything else, so run names use one spelling):
:data:`ALIASES`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from verl_ext.algorithms.hyperparameters import CLIPPING_RANGE, allowed_of, default_of, key_of, symbol_of
from verl_ext.algorithms.registry import EPSILONS, ESTIMATORS, POLICY_LOSSES

DEFAULT_EPSILONS = tuple(default_of(name) for name in CLIPPING_RANGE)

# The registered names the presets pair up beyond "each loss with its paper's estimator" (each defined once, on
# its function; checked below to be registered).
GRPO = "grpo"  # verl's estimator (std-normalised group advantages); not registered by verl-ext
REC_ESTIMATOR = "rec"  # A = r - group mean (rec_advantage.py)
RED_DROP = "red_drop"  # RED-Drop's estimator (red_drop.py)
PLAIN_REINFORCE = "rec_reinforce"  # REINFORCE without importance weights (reinforce.py)
PAPER_GRPO_LOSS = "rec_oneside_is"  # REC-OneSide-IS (rec.py): with GRPO's advantages, the REC paper's GRPO

# Other names users may write, and the preset they mean.
ALIASES = {"reinforce": PLAIN_REINFORCE}

POLICY_LOSS_KEY = "actor_rollout_ref.actor.policy_loss.loss_mode"
ESTIMATOR_KEY = "algorithm.adv_estimator"


@dataclass(frozen=True)
class AlgorithmPreset:
    """An estimator + policy loss pair and the settings the papers run it with."""

    name: str
    estimator: str
    loss: str

    @property
    def clipped(self) -> bool:
        """Whether the loss reads a clipping range (and so accepts ``@EPS_LOW_EPS_HIGH``)."""
        return set(EPSILONS) <= set(POLICY_LOSSES[self.loss].keys)

    def settings(self) -> list[str]:
        """The preset's overrides other than the estimator, the loss and the clipping range."""
        spec = POLICY_LOSSES[self.loss]
        out = []
        if self.estimator == GRPO:
            out.append("algorithm.norm_adv_by_std_in_grpo=true")
        # the numbers the loss reads, at the papers' values (their declared defaults); the clipping range is the
        # choice's own (overrides())
        out += [f"{key_of(name)}={default_of(name)}" for name in spec.reads
                if name not in CLIPPING_RANGE and isinstance(default_of(name), float)]
        if spec.paper_loss_agg_mode is not None:
            out.append(f"actor_rollout_ref.actor.loss_agg_mode={spec.paper_loss_agg_mode}")
        if spec.old_log_prob == "current_and_behaviour":
            # r = pi/alpha needs pi_k (recomputed old_log_prob) and alpha (rollout log-probs as IS weights r')
            out += [
                "algorithm.rollout_correction.bypass_mode=false",
                "algorithm.rollout_correction.rollout_is=token",
                "algorithm.rollout_correction.rollout_is_threshold=1e6",
            ]
        else:
            # pi_old = the behaviour policy (the recipe's default, repeated here so every run states it)
            out.append("algorithm.rollout_correction.bypass_mode=true")
        return out


def _presets() -> dict[str, AlgorithmPreset]:
    presets = {
        name: AlgorithmPreset(name, GRPO if spec.grpo_advantages else REC_ESTIMATOR, name) for name, spec in POLICY_LOSSES.items()
    }
    presets[RED_DROP] = AlgorithmPreset(RED_DROP, RED_DROP, PLAIN_REINFORCE)
    presets[GRPO] = AlgorithmPreset(GRPO, GRPO, PAPER_GRPO_LOSS)
    for preset in presets.values():
        if preset.loss not in POLICY_LOSSES or preset.estimator not in {*ESTIMATORS, GRPO}:
            raise ValueError(f"preset {preset.name!r} names an unregistered loss or estimator: {preset}")
    return presets


ALGORITHMS: dict[str, AlgorithmPreset] = _presets()

_SPEC = re.compile(r"^(?P<name>[a-z_0-9]+)(?:@(?P<low>[^_@]+)_(?P<high>[^_@]+))?$")


def number_label(value: float) -> str:
    """How a number is written in names: ``2.0`` -> ``2``, ``6e-4`` -> ``0.0006``, ``2e-6`` -> ``2e-06``; a number
    that six significant digits do not hold exactly keeps all its digits (two numbers never share a name)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


@dataclass(frozen=True)
class AlgorithmChoice:
    """A preset and, for a clipped one, its (eps_low, eps_high)."""

    name: str
    epsilons: Optional[tuple[float, float]] = None  # None: not clipped

    @property
    def preset(self) -> AlgorithmPreset:
        return ALGORITHMS[self.name]

    @property
    def estimator(self) -> str:
        return self.preset.estimator

    @property
    def loss_mode(self) -> str:
        return self.preset.loss

    @property
    def label(self) -> str:
        """``rec_oneside_nois`` with the default range, ``rec_oneside_nois@0.6_2`` with another."""
        if self.epsilons is None or self.epsilons == DEFAULT_EPSILONS:
            return self.name
        return f"{self.name}@{number_label(self.epsilons[0])}_{number_label(self.epsilons[1])}"

    def overrides(self) -> list[str]:
        low, high = self.epsilons or DEFAULT_EPSILONS
        return [
            f"{ESTIMATOR_KEY}={self.estimator}",
            f"{POLICY_LOSS_KEY}={self.loss_mode}",
            f"{EPSILONS[0]}={low}",
            f"{EPSILONS[1]}={high}",
            *self.preset.settings(),
        ]


def allowed_names() -> str:
    aliases = ", ".join(f"{alias} = {name}" for alias, name in ALIASES.items())
    return f"{', '.join(ALGORITHMS)} (aliases: {aliases}; clipped ones take @EPS_LOW_EPS_HIGH)"


def parse_algorithm(spec: str, default_epsilons: tuple[float, float] = DEFAULT_EPSILONS) -> AlgorithmChoice:
    """``"rec_oneside_nois@0.6_2.0"`` -> AlgorithmChoice; a clipped name without ``@`` gets ``default_epsilons``.

    Raises ValueError naming the spec and the allowed names on an unknown name, a malformed range, or a
    range given to an algorithm that has none.
    """
    text = spec.strip()
    written = text.split("@", 1)[0]
    name = ALIASES.get(written, written)
    if name not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {spec!r}; allowed: {allowed_names()}")
    match = _SPEC.match(text)
    if match is None:
        raise ValueError(f"algorithm {spec!r}: write the clipping range as NAME@EPS_LOW_EPS_HIGH, e.g. rec_oneside_nois@0.6_2")
    clipped = ALGORITHMS[name].clipped
    if match.group("low") is None:
        return AlgorithmChoice(name, _checked_epsilons(spec, default_epsilons) if clipped else None)
    if not clipped:
        clipped_names = ", ".join(n for n, preset in ALGORITHMS.items() if preset.clipped)
        raise ValueError(f"algorithm {spec!r}: {name!r} has no clipping range (@EPS_LOW_EPS_HIGH applies to {clipped_names})")
    try:
        epsilons = (float(match.group("low")), float(match.group("high")))
    except ValueError:
        raise ValueError(f"algorithm {spec!r}: the clipping range must be two numbers, e.g. rec_oneside_nois@0.6_2") from None
    return AlgorithmChoice(name, _checked_epsilons(spec, epsilons))


def algorithm_argument(text: str) -> str:
    """argparse ``type=`` of a command's ``--algorithm``: ``text`` when it names a preset, else the error of
    :func:`parse_algorithm` while the command line is parsed."""
    import argparse

    try:
        parse_algorithm(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _checked_epsilons(spec: str, epsilons: tuple[float, float]) -> tuple[float, float]:
    for name, value in zip(CLIPPING_RANGE, epsilons):
        allowed = allowed_of(name)
        if not allowed.admits(value):
            raise ValueError(f"algorithm {spec!r}: {symbol_of(name)} must be {allowed.bounds}, got {value}")
    return (float(epsilons[0]), float(epsilons[1]))


def parse_algorithms(text: str, default_epsilons: tuple[float, float] = DEFAULT_EPSILONS) -> list[AlgorithmChoice]:
    """A list of specs separated by commas or spaces (``--algorithms``, ``ALGORITHMS=``); a repeat is an error."""
    specs = [part for part in re.split(r"[,\s]+", text) if part]
    if not specs:
        raise ValueError(f"no algorithm given; allowed: {allowed_names()}")
    choices = [parse_algorithm(spec, default_epsilons) for spec in specs]
    labels = [choice.label for choice in choices]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ValueError(f"algorithms: {', '.join(duplicates)} given twice")
    return choices
