"""One call of verl's real v1 ``fit`` with the delayed_sync trainer and the stand-ins of stand_ins.py.

Real: verl's PPOTrainer.fit/step/_step_once, TransferQueue (on a local Ray, the ``transfer_queue``
fixture of conftest.py), the replay buffer, the dataloader over a parquet file, the recipe's advantage
estimator, verl's batch padding, metrics, file logger and checkpoint save/load, and the whole delayed_sync
trainer. Stand-ins: the actor worker group, the colocated rollout with its checkpoint-engine manager, the
agent loop (which also computes the rewards, as verl's streaming reward does), the reward workers.
"""

import json
import os

from omegaconf import OmegaConf

from tests.recipe_config import compose_recipe
from tests.staleness.stand_ins import (
    BackgroundAgentLoop,
    SimulatedCrash,
    StandInActor,
    StandInAgentLoop,
    StandInCheckpointManager,
    StandInResourcePool,
    StandInRewardLoop,
    StandInRollout,
    session_reward,
)

TRAIN_BATCH_SIZE = 4  # prompts per step (the recipe tests' data.train_batch_size)
ROLLOUT_N = 2  # responses per prompt (their actor_rollout_ref.rollout.n)
STEPS = 7


def reset_transfer_queue(tq) -> None:
    """Empty every partition, as a new process (a resumed run) finds it."""
    for partition, items in (tq.kv_list() or {}).items():
        if items:
            tq.kv_clear(keys=list(items), partition_id=partition)


def compose(dataset_file, tmp_path, *overrides):
    return compose_recipe(
        "trainer.v1.trainer_mode=delayed_sync",
        f"data.train_files={dataset_file}",
        f"data.val_files={dataset_file}",
        "data.val_max_samples=4",
        "data.max_prompt_length=64",
        "data.dataloader_num_workers=0",
        f"trainer.total_training_steps={STEPS}",
        "trainer.logger=[file]",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "trainer.save_freq=-1",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={tmp_path / 'checkpoints'}",
        "trainer.project_name=staleness",
        *overrides,
    )


class Run:
    """One call of verl's fit with the delayed_sync trainer; what the stand-ins and the logger saw."""

    def __init__(
        self,
        config,
        tq,
        log_dir,
        experiment: str,
        crash_at_update: int | None = None,
        reward=session_reward,
        background_seconds_per_group: float | None = None,
        seconds_per_update: float = 0.0,
        trained_tokens=None,
    ):
        """``background_seconds_per_group``: generate in a background thread, that long per prompt group
        (verl's real agent loop also returns before generating); None: at once, inside the submission.
        ``trained_tokens(index, session)``: how many response tokens the loss trains (default: all)."""
        from verl_ext.staleness.trainer import DelayedSyncTrainer
        from verl_ext.tiny.tokenizer import build_tokenizer

        reset_transfer_queue(tq)
        config = OmegaConf.merge(config, {"trainer": {"experiment_name": experiment}})
        self.actor = StandInActor(crash_at_update=crash_at_update, seconds_per_update=seconds_per_update)
        self.rollout = StandInRollout(self.actor, resident=config.actor_rollout_ref.rollout.free_cache_engine is False)
        n = config.actor_rollout_ref.rollout.n
        if background_seconds_per_group is None:
            self.agent_loop = StandInAgentLoop(self.rollout, n=n, reward=reward, trained_tokens=trained_tokens)
        else:
            self.agent_loop = BackgroundAgentLoop(self.rollout, n=n, reward=reward, trained_tokens=trained_tokens,
                                                  seconds_per_group=background_seconds_per_group)
        trainer = DelayedSyncTrainer(config)
        trainer.tokenizer, trainer.processor = build_tokenizer(), None
        trainer._init_dataloader()
        trainer._init_dump_executor()
        trainer.actor_rollout_wg = self.actor
        trainer.reward_loop_manager = StandInRewardLoop()
        trainer.resource_pool_manager = StandInResourcePool()
        trainer.checkpoint_manager = StandInCheckpointManager(self.rollout)
        # the end of verl's PPOTrainer._setup, then the on_init_end of PPOTrainer.init
        trainer.checkpoint_manager.sleep_replicas()
        trainer._load_checkpoint()
        self.start_step = trainer.global_steps
        trainer.on_init_end()
        self.trainer = trainer
        self.actor.current_step = lambda: trainer.global_steps - 1
        self.crashed = False
        try:
            trainer.fit(self.agent_loop)
        except SimulatedCrash:
            self.crashed = True
        finally:
            if isinstance(self.agent_loop, BackgroundAgentLoop):
                self.agent_loop.stop()
            tracking = getattr(trainer, "logger", None)
            if tracking is not None:
                tracking.finish()
        # what the run left in the TransferQueue's training partition (a finished run consumed everything)
        self.train_partition_left = dict((tq.kv_list("train") or {}).get("train", {}))
        with open(os.path.join(log_dir, "staleness", f"{experiment}.jsonl")) as file:
            records = [json.loads(line) for line in file]
        # verl logs global_steps = l + 1 for training step l
        self.metrics = {record["step"] - 1: record["data"] for record in records if "staleness/lag" in record["data"]}

    def logged(self, key: str) -> dict[int, float]:
        return {step: values[key] for step, values in sorted(self.metrics.items())}

    def trained_indices(self) -> dict[int, list[int]]:
        """Dataset indices of the prompts trained at each step of this run (steps without update left out)."""
        return dict(zip(self.actor.trained_steps, self.actor.trained_indices, strict=True))
