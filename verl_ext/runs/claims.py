"""What a run's name claims it trains, checked against the config it composes; and what its description records.

A run built from the presets (:meth:`verl_ext.runs.run.Run.from_preset`) is named, described (``<name>.run.json``)
and plotted by the preset, setting, learning rate, seed and zero-variance masking it was built from. Its own
overrides (a figure's, the user's) come after those layers and may set the same keys: a run named
``grpo-sync_interval_20`` given ``trainer.v1.delayed_sync.sync_interval=1`` would train on-policy under a name that
says otherwise. The rule (docs/run-scripts.md, "Names say what runs"): **the name is the truth; a config that
contradicts it is refused**, after composition and before anything is written or started
(:meth:`verl_ext.runs.compose.ComposedRun.check`, so on every path: the run scripts and ``verl-ext
run|sweep|figure``, the dry run, the lab, the quickstart, the GPU smoke). The refusal names the key, the value the
name claims, the value the config has, and the override that set it; to train something else, name it (the
algorithm's ``@EPS_LOW_EPS_HIGH``, the setting, the learning rate and the seed each have their own argument).

What a name claims (:func:`claims`), for a run built from a preset:

==============================================  ==============================================================
keys                                            claimed value
==============================================  ==============================================================
``algorithm.adv_estimator``, ``..loss_mode``    the preset's estimator and policy loss (a ``loss_mode`` naming one
                                                of verl's own losses is the documented way to train it on the
                                                preset's estimator and setting: not a contradiction, recorded)
``actor.clip_ratio_low`` / ``_high``            the clipping range, for a clipped preset (``@EPS_LOW_EPS_HIGH``
                                                or the default (0.2, 0.2))
``trainer.v1.trainer_mode`` and the             the setting's (``delayed_sync``, m, n, offline), for a name with
``trainer.v1.delayed_sync`` schedule            a setting; a name without one (the quickstart's, a benchmark's)
                                                claims no schedule: its description records the one that ran
``..delayed_sync.zero_variance_masking``        on when the name has ``-zvm``, else off
``actor_rollout_ref.actor.optim.lr``            the learning rate, when the name has one (``-lr``)
the seed keys                                   the seed, when the name has one (``-seed``)
==============================================  ==============================================================

A run of plain overrides (no preset) claims nothing: its name is the caller's.

:func:`recorded_values` is what ``<name>.run.json`` (and the lab's run record) records of the composed config
(:data:`RECORDED_KEYS` and every key the run's preset sets): what ran, not only the preset's name;
:func:`describe` builds the description. Its curve's label and row (what ``verl-ext plot`` draws) are the name's
parts, which the check above proved the config trains.

One exception, documented with the smoke modes (docs/run-scripts.md): what a backend sets *over* the run's overrides
(a CPU or GPU smoke swaps in the tiny model, its data and its learning rate) is the backend's deliberate swap, not a
contradiction; the description's ``config`` then records the swapped value.

Pure: nothing here imports verl or torch (it reads the resolved config, a plain dict).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from verl_ext.algorithms.presets import ESTIMATOR_KEY, POLICY_LOSS_KEY, number_label
from verl_ext.algorithms.registry import EPSILONS, POLICY_LOSSES
from verl_ext.run_description import RunDescription
from verl_ext.overrides import override_key
from verl_ext.runs.run import LEARNING_RATE_KEY, SEED_KEYS, RunRefused
from verl_ext.staleness.setting import CONFIG_KEY, MODE_KEY, TRAINER_MODE

if TYPE_CHECKING:
    from verl_ext.runs.run import Run

SCHEDULE_KEYS = (f"{CONFIG_KEY}.sync_interval", f"{CONFIG_KEY}.sync_offset", f"{CONFIG_KEY}.offline")
MASKING_KEY = f"{CONFIG_KEY}.zero_variance_masking"
# what every <name>.run.json records of the composed config (with the keys the run's preset sets), when present
RECORDED_KEYS = (
    ESTIMATOR_KEY, POLICY_LOSS_KEY, *EPSILONS, LEARNING_RATE_KEY, MODE_KEY, *SCHEDULE_KEYS, MASKING_KEY,
    *SEED_KEYS, "actor_rollout_ref.rollout.n", "data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_epochs", "actor_rollout_ref.actor.loss_agg_mode",
    "algorithm.rollout_correction.bypass_mode", "trainer.total_training_steps", "actor_rollout_ref.model.path",
    "data.train_files",
)
BACKEND_OVER = "the backend's layer over the run's overrides (a smoke's tiny model)"  # a layer's name in compose
REFUSED = "its name says what it trains, and its composed config trains something else"
ADVICE = ("Name the run for what it trains instead (the algorithm's @EPS_LOW_EPS_HIGH, the setting, the learning "
          "rate and the seed each have their own argument), or drop the override.")


@dataclass(frozen=True)
class Claim:
    """A key's value as the run's name says it."""

    key: str
    value: Any
    what: str  # which part of the name says it
    also_allows: Optional[Callable[[Any], bool]] = None  # other values the name admits (None: only ``value``)

    def kept_by(self, actual: Any) -> bool:
        return _same(self.value, actual) or (self.also_allows is not None and self.also_allows(actual))


def _one_of_verls_losses(loss_mode: Any) -> bool:
    """A ``loss_mode`` verl-ext does not provide: one of verl's own, trained on the preset's estimator and setting
    (docs/algorithms.md), which the description records."""
    return loss_mode not in POLICY_LOSSES


def claims(run: "Run") -> list[Claim]:
    """What ``run``'s name claims (module docstring); empty for a run not built from a preset."""
    if run.algorithm is None:
        return []
    algorithm = run.algorithm
    said = [Claim(ESTIMATOR_KEY, algorithm.estimator, f"the algorithm {algorithm.label}"),
            Claim(POLICY_LOSS_KEY, algorithm.loss_mode, f"the algorithm {algorithm.label}",
                  also_allows=_one_of_verls_losses)]
    if algorithm.epsilons is not None:
        said += [Claim(key, value, f"the algorithm {algorithm.label} (its clipping range)")
                 for key, value in zip(EPSILONS, algorithm.epsilons)]
    if run.setting is not None:
        setting = run.setting
        said += [Claim(MODE_KEY, TRAINER_MODE, f"the setting {setting.label}"),
                 *(Claim(key, value, f"the setting {setting.label}")
                   for key, value in zip(SCHEDULE_KEYS, (setting.sync_interval, setting.sync_offset, setting.offline)))]
    said.append(Claim(MASKING_KEY, run.zero_variance_masking,
                      "the name's -zvm" if run.zero_variance_masking else "the name (no -zvm)"))
    if run.learning_rate is not None:
        said.append(Claim(LEARNING_RATE_KEY, run.learning_rate, f"the name's -lr{number_label(run.learning_rate)}"))
    if run.seed is not None:
        said += [Claim(key, run.seed, f"the name's -seed{run.seed}") for key in SEED_KEYS]
    return said


def value_at(resolved: dict, key: str, missing: Any = None) -> Any:
    """``resolved["a"]["b"]`` for ``"a.b"``; ``missing`` when a part is absent."""
    node: Any = resolved
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return missing
        node = node[part]
    return node


_MISSING = object()


def _same(claimed: Any, actual: Any) -> bool:
    if isinstance(claimed, bool) or isinstance(actual, bool):
        return type(claimed) is type(actual) and claimed == actual
    if isinstance(claimed, (int, float)) and isinstance(actual, (int, float)):
        return float(claimed) == float(actual) or math.isclose(claimed, actual, rel_tol=1e-12)
    return claimed == actual


def contradictions(run: "Run", resolved: dict) -> list[tuple[Claim, Any]]:
    """The claims of ``run``'s name that its resolved config does not keep, with the value it has instead. A key
    the config lacks is no contradiction (verl's own ``ppo_trainer`` has no ``trainer.v1.delayed_sync`` block)."""
    found = []
    for claim in claims(run):
        actual = value_at(resolved, claim.key, _MISSING)
        if actual is not _MISSING and not claim.kept_by(actual):
            found.append((claim, actual))
    return found


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return number_label(value)
    return repr(value) if isinstance(value, str) else str(value)


def who_set(key: str, layers: Sequence[tuple[str, Sequence[str]]]) -> tuple[Optional[str], str]:
    """Which layer set ``key`` last (its ``what``; None when no override sets it), and a sentence naming the
    override and the layer (``layers``: (what, overrides), in merge order)."""
    for what, overrides in reversed(layers):
        for item in reversed(list(overrides)):
            if override_key(item) == key:
                return what, f"set by the override {item!r} in {what}"
    return None, "no override sets it: the config's default or an interpolation"


def check_claims(run: "Run", layers: Sequence[tuple[str, Sequence[str]]], resolved: dict) -> None:
    """:class:`RunRefused` when ``resolved``, the config ``run`` composed to from ``layers`` ((what, overrides), in merge
    order), contradicts what the run's name claims (module docstring): one line per key, naming the value claimed,
    the value composed and the override that set it. A key the
    backend sets over the run's overrides (:data:`BACKEND_OVER`: a smoke's tiny model and its learning rate) is
    the backend's documented swap, not a contradiction; the description records the value that ran."""
    lines = []
    for claim, actual in contradictions(run, resolved):
        layer, source = who_set(claim.key, layers)
        if layer != BACKEND_OVER:
            lines.append(f"{claim.key}: {claim.what} says {_shown(claim.value)}, the composed config has "
                         f"{_shown(actual)}; {source}")
    if lines:
        raise RunRefused(run.name, "\n  ".join([*lines, ADVICE]), what=REFUSED)


def _recordable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no inf or nan
    return str(value)  # a list or a mapping: its text


def recorded_values(run: "Run", resolved: dict) -> dict[str, Any]:
    """The composed values a description records: :data:`RECORDED_KEYS` and every key ``run``'s preset (and
    setting) sets, those the config has, in that order."""
    keys = list(RECORDED_KEYS)
    if run.algorithm is not None:
        keys += [override_key(item) for item in run.algorithm.overrides()]
    values = {}
    for key in dict.fromkeys(keys):
        value = value_at(resolved, key, _MISSING)
        if value is not _MISSING:
            values[key] = _recordable(value)
    return values


def describe(run: "Run", resolved: dict, cpu_smoke: bool = False) -> RunDescription:
    """``<name>.run.json`` of a run whose config composed to ``resolved`` and passed :func:`check_claims`: its
    curve's label and row are its name's parts, which the config was checked to train, and ``config`` records
    :func:`recorded_values` (with a smoke's swapped learning rate, where a smoke swapped it)."""
    return replace(run.description(cpu_smoke=cpu_smoke), config=recorded_values(run, resolved))
