"""The ``trainer.v1.delayed_sync`` config block and the checks that reject a config the mode cannot run.

Read and checked by :func:`delayed_sync_config_from`, which the trainer calls first thing in its
constructor: in verl's single controller (the TaskRunner), before any worker group, rollout server or
reward worker exists. Every error names the config key and the values it accepts.
"""

from dataclasses import dataclass, fields
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_ext.staleness.schedule import StalenessSchedule

TRAINER_MODE = "delayed_sync"
CONFIG_KEY = f"trainer.v1.{TRAINER_MODE}"


@dataclass(frozen=True)
class DelayedSyncConfig:
    """``trainer.v1.delayed_sync``: the staleness knobs (see :mod:`verl_ext.staleness.schedule`)."""

    # m: weights reach the rollout engine every sync_interval gradient steps
    sync_interval: int = 1
    # n: each batch is consumed sync_offset steps after the push of the weights that generated it
    sync_offset: int = 0
    # never push weights after the initial ones: every batch comes from the initial policy
    offline: bool = False
    # log staleness/behaviour_minus_current_log_prob: one extra actor forward pass per step when
    # algorithm.rollout_correction.bypass_mode is true (otherwise verl's own pi_old forward is reused)
    measure_mismatch: bool = True
    # off-policy GRPO's zero-variance masking: leave out of each step's batch every prompt group whose
    # rewards are all equal, without drawing new prompts (the step trains on the other groups)
    zero_variance_masking: bool = False

    def schedule(self) -> StalenessSchedule:
        return StalenessSchedule(
            sync_interval=self.sync_interval, sync_offset=self.sync_offset, offline=self.offline
        )


_ALLOWED = {
    "sync_interval": "an integer >= 1",
    "sync_offset": "an integer >= 0",
    "offline": "true or false",
    "measure_mismatch": "true or false",
    "zero_variance_masking": "true or false",
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _reject(key: str, value: Any, allowed: str, why: str = "") -> None:
    message = f"{key}={value!r} is invalid: allowed values are {allowed}."
    if why:
        message += f" {why}"
    raise ValueError(message)


def read_delayed_sync_block(block: Any) -> DelayedSyncConfig:
    """Check the ``trainer.v1.delayed_sync`` block alone (missing keys take their defaults)."""
    if block is None:
        return DelayedSyncConfig()
    if isinstance(block, DictConfig):
        block = OmegaConf.to_container(block, resolve=True)
    if not isinstance(block, dict):
        _reject(CONFIG_KEY, block, "a mapping with keys " + ", ".join(_ALLOWED))
    unknown = sorted(set(block) - set(_ALLOWED))
    if unknown:
        raise ValueError(
            f"{CONFIG_KEY} has unknown key(s) {', '.join(unknown)}: allowed keys are {', '.join(_ALLOWED)}."
        )
    values = {field.name: block.get(field.name, field.default) for field in fields(DelayedSyncConfig)}
    if not _is_int(values["sync_interval"]) or values["sync_interval"] < 1:
        _reject(f"{CONFIG_KEY}.sync_interval", values["sync_interval"], _ALLOWED["sync_interval"])
    if not _is_int(values["sync_offset"]) or values["sync_offset"] < 0:
        _reject(f"{CONFIG_KEY}.sync_offset", values["sync_offset"], _ALLOWED["sync_offset"])
    for key in ("offline", "measure_mismatch", "zero_variance_masking"):
        if not isinstance(values[key], bool):
            _reject(f"{CONFIG_KEY}.{key}", values[key], _ALLOWED[key])
    return DelayedSyncConfig(**values)


def delayed_sync_config_from(config: DictConfig) -> DelayedSyncConfig:
    """Validate a full verl config for ``trainer.v1.trainer_mode=delayed_sync`` and return its block.

    Besides the block's own values, rejects the verl features this mode cannot honour: a rollout that is
    not colocated with the actor, no behaviour log-probs from the rollout, and the replay-buffer features
    that generate extra prompts in the middle of a step (the rollout engine is asleep then, without weights).
    """
    mode = OmegaConf.select(config, "trainer.v1.trainer_mode")
    if mode != TRAINER_MODE:
        _reject("trainer.v1.trainer_mode", mode, f"'{TRAINER_MODE}' for this trainer")
    block = read_delayed_sync_block(OmegaConf.select(config, CONFIG_KEY))

    requirements = [
        (
            "actor_rollout_ref.hybrid_engine",
            True,
            "true",
            "delayed_sync drives the colocated (hybrid engine) rollout.",
        ),
        (
            "actor_rollout_ref.rollout.calculate_log_probs",
            True,
            "true",
            "The behaviour policy's log-probs are pi_old for the loss and the staleness mismatch metric.",
        ),
        (
            "algorithm.filter_groups.enable",
            False,
            "false with delayed_sync",
            (
                "Group filtering refills prompts mid-step, when the rollout engine holds no weights; "
                f"{CONFIG_KEY}.zero_variance_masking=true removes zero-variance groups without refilling."
            ),
        ),
        (
            "trainer.v1.sampler.sync_refill_failed_groups",
            False,
            "false with delayed_sync",
            "Refilling failed groups generates mid-step, when the rollout engine holds no weights.",
        ),
        (
            "skip.rollout_tq.enable",
            False,
            "false with delayed_sync",
            "Rollout skipping replays batches per step and bypasses the schedule.",
        ),
    ]
    for key, required, allowed, why in requirements:
        value = OmegaConf.select(config, key, default=required)
        if value != required:
            _reject(key, value, allowed, why)
    for key in ("trainer.v1.sampler.custom_sampler.path", "trainer.v1.sampler.custom_sampler.name"):
        value = OmegaConf.select(config, key, default=None)
        if value:
            _reject(key, value, "null with delayed_sync", "The mode selects each step's batch itself.")
    if block.zero_variance_masking:
        _check_zero_variance_masking(config)
    return block


def _check_zero_variance_masking(config: DictConfig) -> None:
    """Masking reads each group's rewards when the batch is sampled, and needs groups of two or more."""
    why = f"with {CONFIG_KEY}.zero_variance_masking=true"
    reward_model_enabled = bool(OmegaConf.select(config, "reward.reward_model.enable", default=False))
    separate_pool = bool(OmegaConf.select(config, "reward.reward_model.enable_resource_pool", default=False))
    if reward_model_enabled and not separate_pool:
        _reject(
            "reward.reward_model.enable_resource_pool",
            False,
            f"true {why} when reward.reward_model.enable=true",
            "A colocated reward model scores the batch only after it is sampled; masking needs the rewards at "
            "sampling time (rule-based rewards, or a reward model in its own resource pool).",
        )
    group_size = OmegaConf.select(config, "actor_rollout_ref.rollout.n", default=1)
    if not _is_int(group_size) or group_size < 2:
        _reject(
            "actor_rollout_ref.rollout.n",
            group_size,
            f"an integer >= 2 {why}",
            "A group of one response has no reward variance to measure.",
        )
