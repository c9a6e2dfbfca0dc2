"""delayed_sync end to end: verl's real ``main_ppo`` on the CPU backend (tiny model, transformers rollout).

The CPU rollout keeps vLLM's contract (``free_cache_engine=True``: sleep discards the weights, generating
before the next push raises) and logs every weight event with a checksum of the weights it holds
(:mod:`verl_ext.cpu.rollout_events`). Four runs share one Ray start-up (:class:`CPURaySession`):
(3, 1) over 7 steps; the same with ``overlap=true`` (a resident engine generating in the background: the
rollout server and the trainer's actor are separate processes, so the overlap is real) and checkpoints; a
resume from the overlap run's mid-interval checkpoint; and offline with zero-variance masking (a reward
that is constant for the odd prompts, tests/staleness/odd_count_reward.py) with the rollout engine on its own
pool (``hybrid_engine=false``: a standalone replica on its own logical GPU, weights through verl-ext's ``gloo``
checkpoint engine; the split's other runs are in tests/staleness/test_e2e_split.py). :func:`background_runs`
makes them in a child process while the rest of the suite runs (tests/background_runs.py).
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.staleness import odd_count_reward
from verl_ext import metric_names
from verl_ext.checkpoint_backends import CPU_BACKEND
from verl_ext.staleness.config import engine_pool_overrides
from verl_ext.staleness.schedule import StalenessSchedule

pytestmark = pytest.mark.e2e

STEPS = 7
# global step of the checkpoint resumed from: steps 0-2 done, between the syncs after steps 1 and 4; written
# inside step 2, while version 2 may still be generating the batches of steps 3-5 in the background
RESUME_AT = 3
OFFLINE_STEPS = 3
SCHEDULE = StalenessSchedule(sync_interval=3, sync_offset=1)
# 4 prompts x 2 responses per step (the CPU profile's 8 x 4 is for learning; here only the schedule matters)
TRAIN_BATCH_SIZE, ROLLOUT_N = 4, 2
SMALL_BATCHES = (
    f"data.train_batch_size={TRAIN_BATCH_SIZE}",
    f"actor_rollout_ref.rollout.n={ROLLOUT_N}",
    f"actor_rollout_ref.actor.ppo_mini_batch_size={TRAIN_BATCH_SIZE}",
    f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={TRAIN_BATCH_SIZE * ROLLOUT_N}",
    f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={TRAIN_BATCH_SIZE * ROLLOUT_N}",
)
COMMON = (
    "trainer.v1.trainer_mode=delayed_sync",
    "actor_rollout_ref.rollout.free_cache_engine=True",  # vLLM's contract: sleep discards the weights
    *SMALL_BATCHES,
)
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
OVERLAP = ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=False")
# the offline run's engine on its own pool: 1 trainer + 1 engine logical GPU (the session starts Ray with both)
RAY_GPUS = ("+ray_kwargs.ray_init.num_gpus=2",)
ENGINE_ON_OWN_POOL = (*engine_pool_overrides(1, 1, CPU_BACKEND), *RAY_GPUS)
ZERO_VARIANCE_MASKING = (
    "trainer.v1.delayed_sync.zero_variance_masking=true",
    f"reward.custom_reward_function.path={Path(odd_count_reward.__file__).resolve()}",
    "reward.custom_reward_function.name=compute_score",
)


def background_runs(root):
    """The four runs, in a child process while the rest of the suite runs (tests/background_runs.py)."""
    from verl_ext.cpu import launch
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    dumps = {name: root / "dumps" / name for name in ("uninterrupted", "overlap", "resumed", "offline")}
    with launch.CPURaySession(root / "runs", assets, ray_overrides=RAY_GPUS) as session:
        uninterrupted = session.run(
            launch.CPURun(
                name="delayed_3_1",
                steps=STEPS,
                overrides=(*COMMON, *KNOBS, "trainer.save_freq=2", f"trainer.rollout_data_dir={dumps['uninterrupted']}"),
            )
        ).raise_for_error()
        overlap = session.run(
            launch.CPURun(
                name="delayed_3_1_overlap",
                steps=STEPS,
                overrides=(*COMMON, *KNOBS, *OVERLAP, "trainer.save_freq=3", f"trainer.rollout_data_dir={dumps['overlap']}"),
            )
        ).raise_for_error()
        checkpoint = overlap.checkpoint_dir / f"global_step_{RESUME_AT}"
        resumed = session.run(
            launch.CPURun(
                name="delayed_3_1_overlap_resumed",
                steps=STEPS,
                overrides=(
                    *COMMON,
                    *KNOBS,
                    *OVERLAP,
                    "trainer.resume_mode=resume_path",
                    f"trainer.resume_from_path={checkpoint}",
                    f"trainer.rollout_data_dir={dumps['resumed']}",
                ),
            )
        ).raise_for_error()
        offline = session.run(
            launch.CPURun(
                name="offline",
                steps=OFFLINE_STEPS,
                overrides=(
                    *COMMON,
                    "trainer.v1.delayed_sync.offline=true",
                    *ZERO_VARIANCE_MASKING,
                    *ENGINE_ON_OWN_POOL,
                    f"trainer.rollout_data_dir={dumps['offline']}",
                ),
            )
        ).raise_for_error()
    for result in (uninterrupted, overlap, resumed, offline):
        print(f"{result.run.name}: {result.wall_seconds:.0f} s")
    return {"uninterrupted": uninterrupted, "overlap": overlap, "resumed": resumed, "offline": offline, "dumps": dumps}


@pytest.fixture(scope="module")
def runs(request):
    pytest.importorskip("verl_ext.cpu.launch")
    return request.getfixturevalue("background_results")


def per_step(result, key: str) -> dict[int, float]:
    """``{0-based step: value}`` of a logged metric (verl logs global_steps = step + 1)."""
    return {record["step"] - 1: record[key] for record in result.steps if key in record}


def requests_per_batch() -> int:
    """One rollout request per response: data.train_batch_size x actor_rollout_ref.rollout.n."""
    return TRAIN_BATCH_SIZE * ROLLOUT_N


def pushes(result) -> list[dict]:
    return [event for event in result.events if event["event"] == "update_weights"]


def served_after_each_push(result) -> list[int]:
    """Requests the rollout served with the weights of each push (until the next push). An event records
    the requests served since the previous event, so a push's own record counts for the push before it;
    a resident engine (no sleep event) records the last push's requests nowhere."""
    served: list[int] = []
    for event in result.events:
        if served:
            served[-1] += event.get("requests_served", 0)
        if event["event"] == "update_weights":
            served.append(0)
    return served


def check_checksums_change_only_at_pushes(result) -> None:
    """Weights with a checksum appear only through a push; between pushes they stay or are discarded."""
    assert not [event for event in result.events if event["event"] == "generate_rejected"]
    current = None
    for event in result.events:
        if event["event"] == "update_weights":
            assert event["weight_checksum"] and event["weight_checksum"] != current
            current = event["weight_checksum"]
        elif event["weight_checksum"] is not None:
            assert event["weight_checksum"] == current, event


def rollout_dump(directory: Path, step: int) -> Counter:
    """The (prompt, response, score) triples verl dumped for 0-based ``step`` (file named by global step)."""
    with open(directory / f"{step + 1}.jsonl") as file:
        return Counter((row["input"], row["output"], row["score"]) for row in map(json.loads, file))


def test_logged_lags_and_versions_equal_the_schedule(runs):
    result = runs["uninterrupted"]
    rows = SCHEDULE.preview(STEPS)
    assert per_step(result, "staleness/lag") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/behaviour_version") == {row.step: row.behaviour_version for row in rows}
    assert per_step(result, "training/off_policy/trajectory_staleness/mean") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/synced") == {row.step: float(row.synced) for row in rows}
    assert per_step(result, "staleness/weight_syncs")[STEPS - 1] == SCHEDULE.sync_count(STEPS)
    mismatch = per_step(result, "staleness/behaviour_minus_current_log_prob")
    assert set(mismatch) == set(range(STEPS))
    # lag 0: the actor recomputes the rollout's own log-probs (float32 on both sides)
    assert abs(mismatch[0]) < 1e-3


def test_weights_reach_the_rollout_exactly_at_sync_points(runs):
    result = runs["uninterrupted"]
    rows = SCHEDULE.preview(STEPS)
    # the start-up push, then one per sync point, labelled with the version pushed
    assert [push["weight_version"] for push in pushes(result)] == [0] + [row.step + 1 for row in rows if row.synced]
    assert len(pushes(result)) == 1 + SCHEDULE.sync_count(STEPS)
    check_checksums_change_only_at_pushes(result)
    # each version generated exactly its scheduled batches, in one wake (data.train_batch_size x rollout.n each)
    assert served_after_each_push(result) == [
        len(SCHEDULE.steps_generated_with(push["weight_version"], STEPS)) * requests_per_batch()
        for push in pushes(result)
    ]


def prompts_of(dump: Counter) -> Counter:
    return Counter(prompt for prompt, _response, _score in dump.elements())


SCHEDULE_METRICS = ("staleness/lag", "staleness/behaviour_version", "staleness/weight_syncs", "staleness/synced")


def test_overlap_keeps_the_schedule_prompts_and_pushes(runs):
    """overlap=true: the same lags, versions, pushes and prompts per step as without overlap; each push's
    weights served exactly its scheduled batches (a push under a generation would move requests from one
    push to the next); the engine never slept."""
    plain, overlap = runs["uninterrupted"], runs["overlap"]
    for key in SCHEDULE_METRICS:
        assert per_step(overlap, key) == per_step(plain, key), key
    for step in range(STEPS):
        assert prompts_of(rollout_dump(runs["dumps"]["overlap"], step)) == prompts_of(
            rollout_dump(runs["dumps"]["uninterrupted"], step)
        ), step
    assert [push["weight_version"] for push in pushes(overlap)] == [push["weight_version"] for push in pushes(plain)]
    check_checksums_change_only_at_pushes(overlap)
    # (the last push's requests are in no event of a resident engine; its batches' stamps are checked by
    # staleness/behaviour_version above: a push in the middle would mix versions in a batch)
    assert served_after_each_push(overlap)[:-1] == served_after_each_push(plain)[:-1]
    assert not [event for event in overlap.events if event["event"] in ("sleep", "wake_up")]  # resident
    assert [event for event in plain.events if event["event"] == "sleep"]  # the plain run's engine sleeps


def test_overlap_hides_generation_behind_training(runs):
    hidden = {name: per_step(runs[name], "staleness/generation_hidden_s") for name in ("uninterrupted", "overlap")}
    waits = {name: per_step(runs[name], "staleness/wait_for_batch_s") for name in ("uninterrupted", "overlap")}
    print(f"generation hidden per step: {hidden}; wait for the batch: {waits}")
    assert set(hidden["overlap"]) == set(range(STEPS))
    assert sum(hidden["overlap"].values()) > 0.1
    assert sum(hidden["overlap"].values()) > 2 * sum(hidden["uninterrupted"].values())
    assert all(value == 0.0 for value in waits["uninterrupted"].values())  # generated at the sync point


def test_resume_mid_interval_continues_the_uninterrupted_run(runs):
    overlap, resumed = runs["overlap"], runs["resumed"]
    resumed_steps = range(RESUME_AT, STEPS)
    for key in SCHEDULE_METRICS:
        expected = {step: value for step, value in per_step(overlap, key).items() if step in resumed_steps}
        assert per_step(resumed, key) == expected, key
    # the batches of steps 3-5 come back from the checkpoint as they were generated (prompts, responses,
    # scores): the checkpoint waited for them; step 6's batch takes the next prompts of the restored dataloader
    for step in (3, 4, 5):
        assert rollout_dump(runs["dumps"]["resumed"], step) == rollout_dump(runs["dumps"]["overlap"], step)
    assert prompts_of(rollout_dump(runs["dumps"]["resumed"], 6)) == prompts_of(rollout_dump(runs["dumps"]["overlap"], 6))
    # no push at the resume (version 2's batches were in the checkpoint); the sync after step 4 pushes
    # version 5, trained from the checkpoint on the same batches: the same weights as without the interruption
    assert [push["weight_version"] for push in pushes(resumed)] == [5]
    version_5 = {push["weight_version"]: push["weight_checksum"] for push in pushes(overlap)}[5]
    assert pushes(resumed)[0]["weight_checksum"] == version_5
    check_checksums_change_only_at_pushes(resumed)


def test_offline_never_pushes_after_the_start(runs):
    """Offline, with the engine on its own pool and without overlap: one push (through the gloo checkpoint
    engine), every batch generated at the start by the initial weights while the trainer waited."""
    result = runs["offline"]
    assert [push["weight_version"] for push in pushes(result)] == [0]
    assert per_step(result, "staleness/lag") == {step: step for step in range(OFFLINE_STEPS)}
    assert per_step(result, "staleness/behaviour_version") == {step: 0 for step in range(OFFLINE_STEPS)}
    check_checksums_change_only_at_pushes(result)
    # a standalone engine never sleeps; no push at any step (the gloo engine logs one at each push)
    assert not [event for event in result.events if event["event"] in ("sleep", "wake_up")]
    assert not per_step(result, metric_names.GLOO_WEIGHT_BYTES)
    # without overlap every batch was generated before the first step, while the trainer waited: nothing hidden
    busy = per_step(result, "staleness/engine_busy_s")
    assert per_step(result, "staleness/wait_for_generation_s")[0] > 0.9 * busy[0] > 0
    assert sum(per_step(result, "staleness/generation_hidden_s").values()) < 0.05 * sum(busy.values())


def test_zero_variance_masking_trains_on_the_other_groups(runs):
    """Offline run with masking: the odd prompts' groups (constant reward) never reach the actor; the real
    FSDP worker trains on the rest, padded by verl to whole mini-batches; a step with no group left
    makes no update."""
    result = runs["offline"]
    removed = per_step(result, "staleness/zero_variance_groups_removed")
    assert set(removed) == set(range(OFFLINE_STEPS))
    responses_per_mini_batch = TRAIN_BATCH_SIZE * ROLLOUT_N  # ppo_mini_batch_size x rollout.n
    trained_group_counts = []
    for step in range(OFFLINE_STEPS):
        dump = runs["dumps"]["offline"] / f"{step + 1}.jsonl"
        if removed[step] == TRAIN_BATCH_SIZE:
            assert not dump.exists()  # nothing trained, nothing dumped
            trained_group_counts.append(0)
            continue
        rows = [json.loads(line) for line in dump.read_text().splitlines()]
        real = [row for row in rows if not row["uid"].startswith("pad")]
        groups = Counter(row["uid"].split("_", 1)[0] for row in real)
        assert set(groups.values()) == {ROLLOUT_N}
        assert len(groups) + removed[step] == TRAIN_BATCH_SIZE
        assert all(odd_count_reward.target_count(row["gts"]) % 2 == 0 for row in real)  # odd ones all removed
        assert len(rows) - len(real) == -len(real) % responses_per_mini_batch  # verl's zero-loss padding
        trained_group_counts.append(len(groups))
    grad_norms = per_step(result, "actor/grad_norm")
    assert sorted(grad_norms) == [step for step in range(OFFLINE_STEPS) if trained_group_counts[step] > 0]
    assert all(norm > 0 for norm in grad_norms.values())
    # the run covered a partial batch (padding on the real worker)
    assert any(0 < count < TRAIN_BATCH_SIZE for count in trained_group_counts), trained_group_counts
