"""Batch arithmetic: the batch sizes and counts a training step divides by, and the divisions it makes.

With P = ``data.train_batch_size`` prompts, K = ``actor_rollout_ref.rollout.n`` responses each, mini-batches of
B = ``ppo_mini_batch_size`` prompts and W = ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` trainer ranks, a
step needs

    P, B, K, W, ppo_epochs >= 1      P mod B = 0      (P K) mod W = 0      (B K) mod W = 0

and each fixed micro-batch size must divide the per-rank share it splits: (B K) / W for the actor's update,
(P K) / W for the log-prob passes. verl asserts some of these only inside its workers (after Ray started) and
skips others with ``use_dynamic_bsz``; :func:`check_batch_arithmetic` names the key first, in the driver
(:mod:`verl_ext.driver_checks`).
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from verl_ext.config_values import reject, require_int

# Batch sizes and counts a step divides by: each must be an integer >= 1 before any arithmetic.
BATCH_KEYS = (
    "data.train_batch_size",
    "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.ppo_epochs",
    "actor_rollout_ref.rollout.n",
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
)


def check_batch_arithmetic(config) -> None:
    """What verl skips with ``use_dynamic_bsz`` but a step needs: counts >= 1, whole mini-batches, responses
    split evenly over the data-parallel ranks."""
    sizes = {key: require_int(key, _value(config, key), 1) for key in BATCH_KEYS}
    prompts = sizes["data.train_batch_size"]
    mini_batch = sizes["actor_rollout_ref.actor.ppo_mini_batch_size"]
    if prompts % mini_batch:
        reject(
            "data.train_batch_size",
            prompts,
            f"a multiple of actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch}",
            "Otherwise the last mini-batch would be partial (the papers take one step per batch: make them equal).",
        )
    group = sizes["actor_rollout_ref.rollout.n"]
    ranks = sizes["trainer.nnodes"] * sizes["trainer.n_gpus_per_node"]
    if (prompts * group) % ranks:
        reject(
            "data.train_batch_size",
            prompts,
            f"a number whose responses per step (x actor_rollout_ref.rollout.n={group} = {prompts * group}) split "
            f"evenly over trainer.nnodes x trainer.n_gpus_per_node = {ranks} GPUs",
        )
    if (mini_batch * group) % ranks:
        reject(
            "actor_rollout_ref.actor.ppo_mini_batch_size",
            mini_batch,
            f"a number whose responses (x actor_rollout_ref.rollout.n={group} = {mini_batch * group}) split evenly "
            f"over trainer.nnodes x trainer.n_gpus_per_node = {ranks} GPUs",
            "verl's actor workers split each mini-batch over the data-parallel ranks (an assertion inside the "
            "workers, after Ray started).",
        )
    check_micro_batches(config, per_rank_step=prompts * group // ranks, per_rank_mini_batch=mini_batch * group // ranks)


# (micro-batch key, the dynamic-batch key that turns it off, which per-rank batch it splits)
MICRO_BATCHES = (
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.actor.use_dynamic_bsz", "mini_batch"),
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
     "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", "step"),
    ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz", "step"),
)
REFERENCE_MICRO_BATCH = MICRO_BATCHES[2][0]


def check_micro_batches(config, per_rank_step: int, per_rank_mini_batch: int) -> None:
    """Fixed micro-batches must split each rank's share whole: verl's workers assert it (``prepare_micro_batches``)
    only after Ray and the engines started. A rank's share is ``responses / (nnodes x n_gpus_per_node)``: a
    micro-batch size that fits one GPU count can leave a remainder at another."""
    from verl.trainer.ppo.utils import need_reference_policy

    shares = {"mini_batch": per_rank_mini_batch, "step": per_rank_step}
    for key, dynamic_key, share in MICRO_BATCHES:
        size = _value(config, key)
        if size is None or _value(config, dynamic_key) is True:
            continue
        if key == REFERENCE_MICRO_BATCH and not need_reference_policy(config):
            continue  # no reference policy: the value is never read
        size = require_int(key, size, 1)
        if shares[share] % size:
            what = "mini-batch (ppo_mini_batch_size" if share == "mini_batch" else "step (data.train_batch_size"
            reject(
                key,
                size,
                f"a divisor of each rank's responses per {what} x rollout.n / (trainer.nnodes x "
                f"trainer.n_gpus_per_node)) = {shares[share]}",
                "verl's workers split a rank's share into micro-batches of this size and assert that none is partial.",
            )


def _value(config, key: str) -> Any:
    return OmegaConf.select(config, key, default=None)  # None where the key is missing
