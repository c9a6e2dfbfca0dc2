"""delayed_sync with the rollout engine on its own pool (``actor_rollout_ref.hybrid_engine=false``), end to end:
verl's real ``main_ppo`` on the CPU backend, 1 trainer rank + 1 standalone rollout replica (a logical GPU each),
weights through the ``gloo`` checkpoint engine (verl's ``CheckpointEngineManager``, as a GPU run with ``nccl``).

Two runs share one Ray start-up (:class:`CPURaySession` with 2 logical GPUs), made by :func:`background_runs`
while the rest of the suite runs (tests/background_runs.py): (3, 1) with overlap over 5 steps, checkpoints at
global steps 3 (mid-interval, written while version 2 generates) and 5 (the last, = version 5); and a resume
from the mid-interval one. Evidence: verl's file logger (every step's metrics) and the CPU rollout's event log
(every push, with the checksum of the weights the engine then holds), compared with the checksum of the
checkpoints' actor weights. The split's other real runs are folded into existing modules: offline without
overlap (with zero-variance masking) in tests/staleness/test_e2e_cpu.py, and zero staleness against verl's
``sync`` mode in tests/cpu/test_e2e_main_ppo.py.
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from verl_ext import metric_names
from verl_ext.checkpoint_backends import CPU_BACKEND
from verl_ext.staleness.config import engine_pool_overrides
from verl_ext.staleness.schedule import StalenessSchedule

pytestmark = pytest.mark.e2e

STEPS = 5
RESUME_AT = 3  # steps 0-2 done; written inside step 2, while version 2 may still be generating steps 3-4
SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
TRAIN_BATCH_SIZE, ROLLOUT_N = 4, 2
SMALL_BATCHES = (
    f"data.train_batch_size={TRAIN_BATCH_SIZE}",
    f"actor_rollout_ref.rollout.n={ROLLOUT_N}",
    f"actor_rollout_ref.actor.ppo_mini_batch_size={TRAIN_BATCH_SIZE}",
    f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={TRAIN_BATCH_SIZE * ROLLOUT_N}",
    f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={TRAIN_BATCH_SIZE * ROLLOUT_N}",
)
# 1 trainer GPU (the CPU profile's) + 1 engine GPU: Ray needs both
RAY_GPUS = ("+ray_kwargs.ray_init.num_gpus=2",)
SPLIT = (
    "trainer.v1.trainer_mode=delayed_sync",
    *engine_pool_overrides(1, 1, CPU_BACKEND),  # 1 engine GPU, resident, weights over gloo
    *RAY_GPUS,
    *SMALL_BATCHES,
)
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
OVERLAP = ("trainer.v1.delayed_sync.overlap=true",)
GLOO_WEIGHT_BYTES = metric_names.GLOO_WEIGHT_BYTES  # the gloo engine's metric of each push


def background_runs(root):
    """The two runs, in a child process while the rest of the suite runs."""
    from verl_ext.cpu import launch
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    dumps = {name: root / "dumps" / name for name in ("overlap", "resumed")}
    with launch.CPURaySession(root / "runs", assets, ray_overrides=RAY_GPUS) as session:
        overlap = session.run(
            launch.CPURun(
                name="split_3_1_overlap",
                steps=STEPS,
                overrides=(*SPLIT, *KNOBS, *OVERLAP, "trainer.save_freq=3", f"trainer.rollout_data_dir={dumps['overlap']}"),
            )
        ).raise_for_error()
        resumed = session.run(
            launch.CPURun(
                name="split_3_1_overlap_resumed",
                steps=STEPS,
                overrides=(
                    *SPLIT, *KNOBS, *OVERLAP,
                    "trainer.resume_mode=resume_path",
                    f"trainer.resume_from_path={overlap.checkpoint_dir / f'global_step_{RESUME_AT}'}",
                    "trainer.save_freq=5",
                    f"trainer.rollout_data_dir={dumps['resumed']}",
                ),
            )
        ).raise_for_error()
    for result in (overlap, resumed):
        print(f"{result.run.name}: {result.wall_seconds:.0f} s")
    return {
        "overlap": overlap,
        "resumed": resumed,
        "dumps": dumps,
        "assets": assets,
        # checksums of the actor weights in the checkpoints (computed here, where the checkpoints are)
        "checkpoint_checksums": {
            name: {step: actor_checkpoint_checksum(result.checkpoint_dir / f"global_step_{step}", assets)
                   for step in steps}
            for name, result, steps in (("overlap", overlap, (RESUME_AT, STEPS)), ("resumed", resumed, (STEPS,)))
        },
        "initial_checksum": initial_model_checksum(assets),
    }


def initial_model_checksum(assets: Path) -> str:
    """The checksum the rollout reports for the tiny model as it is on disk (what version 0 must be)."""
    import torch
    from transformers import AutoModelForCausalLM

    from verl_ext.cpu.weight_checksum import weight_checksum

    model = AutoModelForCausalLM.from_pretrained(str(assets / "model"), dtype=torch.float32)
    return weight_checksum(model.named_parameters())


def actor_checkpoint_checksum(folder: Path, assets: Path) -> str:
    """The checksum the rollout would report after a push of the actor weights saved in ``folder``
    (verl's FSDP checkpoint of world size 1, loaded into the model as the rollout holds it)."""
    import torch
    from transformers import AutoModelForCausalLM

    from verl_ext.cpu.weight_checksum import weight_checksum

    (shard,) = (folder / "actor").glob("model_world_size_1_rank_0.pt")
    state = torch.load(shard, map_location="cpu", weights_only=False)
    state = {name: (tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor) for name, tensor in state.items()}
    model = AutoModelForCausalLM.from_pretrained(str(assets / "model"), dtype=torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)  # tied to the embedding
    return weight_checksum(model.named_parameters())


@pytest.fixture(scope="module")
def runs(request):
    pytest.importorskip("verl_ext.cpu.launch")
    return request.getfixturevalue("background_results")


def per_step(result, key: str) -> dict[int, float]:
    """``{0-based step: value}`` of a logged metric (verl logs global_steps = step + 1)."""
    return {record["step"] - 1: record[key] for record in result.steps if key in record}


def pushes(result) -> list[dict]:
    return [event for event in result.events if event["event"] == "update_weights"]


def served_after_each_push(result) -> list[int]:
    """Requests served with each push's weights: an event records those served since the previous event, so a
    push's own record counts for the push before it; the last push's requests (resident engine) are in no event."""
    served: list[int] = []
    for event in result.events:
        if served:
            served[-1] += event.get("requests_served", 0)
        if event["event"] == "update_weights":
            served.append(0)
    return served


def check_pushes_are_the_only_weight_changes(result) -> None:
    """No generation refused or aborted; a checksum appears only through a push; the engine never sleeps."""
    assert not [event for event in result.events if event["event"] in ("generate_rejected", "update_aborted")]
    assert not [event for event in result.events if event["event"] in ("sleep", "wake_up")]
    current = None
    for event in result.events:
        if event["event"] == "update_weights":
            assert event["weight_checksum"] and event["weight_checksum"] != current
            current = event["weight_checksum"]
        elif event["weight_checksum"] is not None:
            assert event["weight_checksum"] == current, event


def rollout_dump(directory: Path, step: int) -> Counter:
    with open(directory / f"{step + 1}.jsonl") as file:
        return Counter((row["input"], row["output"], row["score"]) for row in map(json.loads, file))


SCHEDULE_METRICS = ("staleness/lag", "staleness/behaviour_version", "staleness/weight_syncs", "staleness/synced")


def test_lags_and_versions_are_the_schedules(runs):
    result = runs["overlap"]
    rows = SCHEDULE.preview(STEPS)
    assert per_step(result, "staleness/lag") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/behaviour_version") == {row.step: row.behaviour_version for row in rows}
    assert per_step(result, "training/off_policy/trajectory_staleness/mean") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/synced") == {row.step: float(row.synced) for row in rows}
    assert per_step(result, "staleness/weight_syncs")[STEPS - 1] == SCHEDULE.sync_count(STEPS)


def test_every_push_reaches_the_engine_through_the_checkpoint_engine(runs):
    """The pushes are exactly the schedule's, each carried by the gloo engine (its metric at every sync point),
    and the engine then holds exactly the actor's weights of that version: version 0 is the model on disk, version
    5 the actor weights of the checkpoint written at global step 5."""
    result = runs["overlap"]
    rows = SCHEDULE.preview(STEPS)
    assert [push["weight_version"] for push in pushes(result)] == [0] + [row.step + 1 for row in rows if row.synced]
    check_pushes_are_the_only_weight_changes(result)
    assert set(per_step(result, GLOO_WEIGHT_BYTES)) == {row.step for row in rows if row.synced}
    assert all(value > 0 for value in per_step(result, GLOO_WEIGHT_BYTES).values())
    by_version = {push["weight_version"]: push["weight_checksum"] for push in pushes(result)}
    assert by_version[0] == runs["initial_checksum"]
    assert by_version[STEPS] == runs["checkpoint_checksums"]["overlap"][STEPS]
    # each version's weights generated exactly its scheduled batches (data.train_batch_size x rollout.n each)
    requests = TRAIN_BATCH_SIZE * ROLLOUT_N
    assert served_after_each_push(result)[:-1] == [
        len(SCHEDULE.steps_generated_with(push["weight_version"], STEPS)) * requests for push in pushes(result)[:-1]
    ]


def test_generation_runs_while_the_trainer_trains(runs):
    """After the start-up (whose generation nothing can hide), most of the engine's work is hidden behind training."""
    hidden = per_step(runs["overlap"], "staleness/generation_hidden_s")
    busy = per_step(runs["overlap"], "staleness/engine_busy_s")
    print(f"generation hidden per step: {hidden}; engine busy: {busy}")
    assert set(hidden) == set(range(STEPS))
    after_start = range(1, STEPS)
    assert sum(busy[step] for step in after_start) > 0
    assert sum(hidden[step] for step in after_start) > 0.3 * sum(busy[step] for step in after_start)


def test_resume_mid_interval_continues_exactly(runs):
    overlap, resumed = runs["overlap"], runs["resumed"]
    for key in SCHEDULE_METRICS:
        expected = {step: value for step, value in per_step(overlap, key).items() if step >= RESUME_AT}
        assert per_step(resumed, key) == expected, key
    # the batches of steps 3-4 come back from the checkpoint as generated (it waited for them)
    for step in range(RESUME_AT, STEPS):
        assert rollout_dump(runs["dumps"]["resumed"], step) == rollout_dump(runs["dumps"]["overlap"], step)
    # no push at the resume (version 2's batches were in the checkpoint); version 5 is trained from the
    # checkpoint on the same batches: the same weights as without the interruption, and the actor's
    assert [push["weight_version"] for push in pushes(resumed)] == [STEPS]
    version_5 = {push["weight_version"]: push["weight_checksum"] for push in pushes(overlap)}[STEPS]
    assert pushes(resumed)[0]["weight_checksum"] == version_5 == runs["checkpoint_checksums"]["resumed"][STEPS]
    check_pushes_are_the_only_weight_changes(resumed)
