"""The delayed_sync trainer inside verl's real v1 ``fit`` loop, with stand-ins for the GPU-only parts.

Real here: verl's PPOTrainer.fit/step/_step_once, TransferQueue (on a local Ray), the replay buffer, the
dataloader over a parquet file, the recipe's advantage estimator, verl's metrics and file logger, verl's
checkpoint save/load of the dataloader and TransferQueue, and the whole delayed_sync trainer. Stand-ins
(tests/staleness/stand_ins.py): the actor worker group, the colocated rollout with its checkpoint-engine
manager (sleep discards the weights), the agent loop, the reward workers. End-to-end runs of verl's
``main_ppo`` on the CPU backend are in test_e2e_cpu.py.
"""

import json
import logging
import os
import shutil

import pytest
from omegaconf import OmegaConf

from tests.recipe_config import compose_recipe
from tests.staleness.stand_ins import (
    SimulatedCrash,
    StandInActor,
    StandInAgentLoop,
    StandInCheckpointManager,
    StandInResourcePool,
    StandInRewardLoop,
    StandInRollout,
    log_prob_at,
)
from verl_ext.staleness.schedule import StalenessSchedule

TRAIN_BATCH_SIZE = 4
ROLLOUT_N = 2
STEPS = 7


@pytest.fixture(scope="module")
def transfer_queue():
    ray = pytest.importorskip("ray")
    import transfer_queue as tq

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    if started_ray:
        ray.shutdown()


@pytest.fixture(scope="module")
def dataset_file(tmp_path_factory):
    """64 prompts in verl's RL parquet format; extra_info.index identifies each prompt in the data stream."""
    from datasets import Dataset

    rows = [
        {
            "data_source": "staleness_test",
            "prompt": [{"role": "user", "content": f"count {index % 9 + 1}"}],
            "ability": "count",
            "reward_model": {"style": "rule", "ground_truth": str(index)},
            "extra_info": {"split": "train", "index": index},
        }
        for index in range(64)
    ]
    path = tmp_path_factory.mktemp("data") / "prompts.parquet"
    Dataset.from_list(rows).to_parquet(str(path))
    return path


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

    def __init__(self, config, tq, log_dir, experiment: str, crash_at_update: int | None = None):
        from verl_ext.staleness.trainer import DelayedSyncTrainer
        from verl_ext.tiny.tokenizer import build_tokenizer

        reset_transfer_queue(tq)
        config = OmegaConf.merge(config, {"trainer": {"experiment_name": experiment}})
        self.actor = StandInActor(crash_at_update=crash_at_update)
        self.rollout = StandInRollout(self.actor)
        self.agent_loop = StandInAgentLoop(self.rollout, n=ROLLOUT_N)
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
        self.crashed = False
        try:
            trainer.fit(self.agent_loop)
        except SimulatedCrash:
            self.crashed = True
        finally:
            tracking = getattr(trainer, "logger", None)
            if tracking is not None:
                tracking.finish()
        with open(os.path.join(log_dir, "staleness", f"{experiment}.jsonl")) as file:
            records = [json.loads(line) for line in file]
        # verl logs global_steps = l + 1 for training step l
        self.metrics = {record["step"] - 1: record["data"] for record in records if "staleness/lag" in record["data"]}

    def logged(self, key: str) -> dict[int, float]:
        return {step: values[key] for step, values in sorted(self.metrics.items())}

    def trained_indices(self) -> dict[int, list[int]]:
        """Dataset indices of the prompts trained at each step of this run."""
        return {self.start_step + update: indices for update, indices in enumerate(self.actor.trained_indices)}


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path / "logs"))
    return tmp_path / "logs"


def expected_rows(schedule: StalenessSchedule, steps: range):
    return {step: schedule.behaviour_version(step) for step in steps}


def test_verl_finds_the_mode_and_bad_values_fail_before_any_collaborator_exists(dataset_file, tmp_path):
    from verl.trainer.ppo.v1 import get_trainer_cls

    from verl_ext.staleness.trainer import DelayedSyncTrainer

    assert get_trainer_cls("delayed_sync") is DelayedSyncTrainer
    config = compose(dataset_file, tmp_path, "trainer.v1.delayed_sync.sync_offset=-1")
    with pytest.raises(ValueError, match=r"trainer.v1.delayed_sync.sync_offset=-1 is invalid: allowed values are"):
        DelayedSyncTrainer(config)  # raises before verl's constructor: no worker, Ray or TransferQueue needed


def test_interval_3_offset_1_follows_the_schedule(transfer_queue, dataset_file, tmp_path, log_dir):
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    config = compose(
        dataset_file, tmp_path, "trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1"
    )
    run = Run(config, transfer_queue, log_dir, "interval_3_offset_1")
    steps = range(STEPS)
    rows = schedule.preview(STEPS)

    assert run.logged("staleness/behaviour_version") == expected_rows(schedule, steps)
    assert run.logged("staleness/lag") == {row.step: row.lag for row in rows}
    # verl's own staleness metric (from the rollout's version stamps) agrees
    assert run.logged("training/off_policy/trajectory_staleness/mean") == {row.step: row.lag for row in rows}
    assert run.logged("staleness/synced") == {row.step: float(row.synced) for row in rows}
    cumulative = [sum(r.synced for r in rows[: step + 1]) for step in steps]
    assert list(run.logged("staleness/weight_syncs").values()) == cumulative

    # pushes: the initial one, then exactly after the sync points; each carries the weights it claims
    assert [push["label"] for push in run.rollout.pushes] == [0] + [row.step + 1 for row in rows if row.synced]
    assert all(push["weights"] == push["label"] for push in run.rollout.pushes)
    # every batch was generated by the weights its schedule names, and the loss saw them as pi_old
    generated_by = {group["uid"]: group["weights"] for group in run.agent_loop.generated}
    for step, uids in enumerate(run.actor.trained_uids):
        assert {generated_by[uid] for uid in uids} == {schedule.behaviour_version(step)}
        assert run.actor.pi_old_seen[step] == pytest.approx(log_prob_at(schedule.behaviour_version(step)))
    # the measured mismatch is the toy policy's 0.1 per version of lag
    mismatch = run.logged("staleness/behaviour_minus_current_log_prob")
    assert mismatch == pytest.approx({row.step: 0.1 * row.lag for row in rows})
    # no batch beyond the run was generated, none twice
    assert len(run.agent_loop.generated) == STEPS * TRAIN_BATCH_SIZE
    assert run.rollout.weights is None  # asleep (weights discarded) once training is over


def test_interval_1_offset_0_behaves_like_sync_mode(transfer_queue, dataset_file, tmp_path, log_dir):
    run = Run(compose(dataset_file, tmp_path), transfer_queue, log_dir, "interval_1_offset_0")
    assert run.logged("staleness/lag") == {step: 0 for step in range(STEPS)}
    # verl's sync mode: a push at start-up and after every step, each with the weights of that step
    assert [push["label"] for push in run.rollout.pushes] == list(range(STEPS + 1))
    assert all(push["weights"] == push["label"] for push in run.rollout.pushes)
    assert run.logged("staleness/behaviour_minus_current_log_prob") == pytest.approx({s: 0.0 for s in range(STEPS)})


@pytest.mark.parametrize(
    "overrides,forward_passes_per_step",
    [
        ((), 1),  # bypass mode: one forward pass, for the mismatch metric
        (("trainer.v1.delayed_sync.measure_mismatch=false",), 0),
        # decoupled mode: verl computes pi_old with the current actor; the metric reuses it
        (("algorithm.rollout_correction.bypass_mode=false",), 1),
    ],
)
def test_mismatch_costs_at_most_one_forward_pass(
    transfer_queue, dataset_file, tmp_path, log_dir, overrides, forward_passes_per_step
):
    config = compose(
        dataset_file, tmp_path, "trainer.v1.delayed_sync.sync_interval=2", "trainer.total_training_steps=4", *overrides
    )
    run = Run(config, transfer_queue, log_dir, "mismatch")
    assert run.logged("staleness/lag") == {0: 0, 1: 1, 2: 0, 3: 1}
    assert run.actor.forward_passes == 4 * forward_passes_per_step
    bypass = "algorithm.rollout_correction.bypass_mode=false" not in overrides
    for step, pi_old in enumerate(run.actor.pi_old_seen):
        # bypass: pi_old is the behaviour policy; decoupled: the current one (version = step)
        assert pi_old == pytest.approx(log_prob_at(2 * (step // 2) if bypass else step))
    if forward_passes_per_step:
        assert run.logged("staleness/behaviour_minus_current_log_prob") == pytest.approx({0: 0, 1: 0.1, 2: 0, 3: 0.1})
    else:
        assert "staleness/behaviour_minus_current_log_prob" not in run.metrics[0]


def test_offline_never_pushes_after_the_start(transfer_queue, dataset_file, tmp_path, log_dir):
    config = compose(dataset_file, tmp_path, "trainer.v1.delayed_sync.offline=true")
    run = Run(config, transfer_queue, log_dir, "offline")
    assert [push["label"] for push in run.rollout.pushes] == [0]
    assert run.logged("staleness/behaviour_version") == {step: 0 for step in range(STEPS)}
    assert run.logged("staleness/lag") == {step: step for step in range(STEPS)}
    assert run.logged("staleness/weight_syncs") == {step: 0 for step in range(STEPS)}
    assert {group["weights"] for group in run.agent_loop.generated} == {0}


def test_resume_mid_interval_continues_as_the_uninterrupted_run(transfer_queue, dataset_file, tmp_path, log_dir):
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    knobs = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
    uninterrupted = Run(compose(dataset_file, tmp_path / "a", *knobs), transfer_queue, log_dir, "uninterrupted")

    # checkpoints at global steps 2 and 4; crash during step 4 (0-based)
    interrupted_config = compose(dataset_file, tmp_path / "b", *knobs, "trainer.save_freq=2")
    crashed = Run(interrupted_config, transfer_queue, log_dir, "crashed", crash_at_update=4)
    assert crashed.crashed
    checkpoints = tmp_path / "b" / "checkpoints"
    assert (checkpoints / "global_step_4" / "transfer_queue").is_dir()

    # global step 4: steps 0-3 trained, the batches of steps 4 and 5 (version 2) wait in the checkpoint
    resumed = Run(interrupted_config, transfer_queue, log_dir, "resumed")
    assert resumed.start_step == 4
    for key in ("staleness/lag", "staleness/behaviour_version", "staleness/weight_syncs"):
        assert resumed.logged(key) == {s: v for s, v in uninterrupted.logged(key).items() if s >= 4}, key
    # no push at the resume (the engine is not needed before the next sync point), then the sync after step 4
    assert [push["label"] for push in resumed.rollout.pushes] == [5]
    # the data stream neither repeats nor skips: the resumed steps train on the uninterrupted run's prompts
    reference = uninterrupted.trained_indices()
    assert {**crashed.trained_indices(), **resumed.trained_indices()} == reference

    # global step 2: step 1 was a sync point whose batches are not in the checkpoint: the sync is redone
    shutil.rmtree(checkpoints / "global_step_4")
    (checkpoints / "latest_checkpointed_iteration.txt").write_text("2")
    redone = Run(interrupted_config, transfer_queue, log_dir, "resumed_at_2")
    assert redone.start_step == 2
    assert [push["label"] for push in redone.rollout.pushes] == [2, 5]
    assert all(push["weights"] == push["label"] for push in redone.rollout.pushes)
    for key in ("staleness/lag", "staleness/behaviour_version", "staleness/weight_syncs"):
        assert redone.logged(key) == {s: v for s, v in uninterrupted.logged(key).items() if s >= 2}, key
    assert redone.trained_indices() == {s: v for s, v in reference.items() if s >= 2}
    assert schedule.synced_after(1) and not schedule.synced_after(3)


def test_resume_without_the_generated_batches_warns_and_logs_the_true_lag(
    transfer_queue, dataset_file, tmp_path, log_dir, caplog
):
    knobs = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
    config = compose(dataset_file, tmp_path, *knobs, "trainer.save_freq=4")
    crashed = Run(config, transfer_queue, log_dir, "crashed_lost", crash_at_update=4)
    assert crashed.crashed
    shutil.rmtree(tmp_path / "checkpoints" / "global_step_4" / "transfer_queue")

    with caplog.at_level(logging.WARNING, logger="verl_ext.staleness.trainer"):
        resumed = Run(config, transfer_queue, log_dir, "resumed_lost")
    assert "lacks the generated batches of steps [4, 5]" in caplog.text
    # regenerated with the checkpoint's weights (version 4): lags 0 and 1 instead of the scheduled 2 and 3
    assert [push["label"] for push in resumed.rollout.pushes] == [4, 5]
    assert resumed.logged("staleness/behaviour_version") == {4: 4, 5: 4, 6: 5}
    assert resumed.logged("staleness/lag") == {4: 0, 5: 1, 6: 1}
    assert "the batch of step 4 was generated by version 4, the schedule says 2" in caplog.text


def test_validation_sees_the_current_weights_without_moving_the_training_pushes(
    transfer_queue, dataset_file, tmp_path, log_dir
):
    schedule = StalenessSchedule(sync_interval=3, sync_offset=1)
    config = compose(
        dataset_file,
        tmp_path,
        "trainer.v1.delayed_sync.sync_interval=3",
        "trainer.v1.delayed_sync.sync_offset=1",
        "trainer.val_before_train=true",
        "trainer.test_freq=3",
    )
    run = Run(config, transfer_queue, log_dir, "validation")
    assert run.logged("staleness/lag") == {row.step: row.lag for row in schedule.preview(STEPS)}
    validation = [group for group in run.agent_loop.generated if group["partition"] == "val"]
    # before training, after global steps 3 and 6, and after the last step (7)
    assert [group["weights"] for group in validation][:: len(validation) // 4] == [0, 3, 6, 7]
    # every validation group was generated by the weights of the step it validates (the current policy)
    assert all(group["weights"] == group["label"] for group in validation)
    train_groups = [group for group in run.agent_loop.generated if group["partition"] == "train"]
    assert all(group["weights"] in (0, 2, 5) for group in train_groups)
    # validation pushes (3, 6, 7) come on top of the training ones (0, 2, 5); the start-up push also
    # served the validation before training
    assert [push["label"] for push in run.rollout.pushes] == [0, 2, 3, 5, 6, 7]
    assert run.logged("staleness/weight_syncs")[STEPS - 1] == schedule.sync_count(STEPS)
