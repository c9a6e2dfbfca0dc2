"""delayed_sync end to end on verl's distributed path: real ``main_ppo`` on the CPU backend, two trainer ranks
on two Ray nodes. The whole module is the extended tier (``pytest -m extended``, which CI runs after the README's
command; docs/testing.md).

Four runs have world size 2 on a local cluster of two Ray nodes (``trainer.nnodes=2``,
:mod:`verl_ext.cpu.local_cluster`): two FSDP2 ranks over gloo, one rollout replica per rank on its rank's
node, two agent-loop workers over which verl splits each batch, sharded checkpoints (one file per rank).
The CPU rollout keeps vLLM's contract (``free_cache_engine=True``: sleep discards the weights, generating
before the next push raises) and logs every weight event of every replica with a checksum of the weights it
holds (:mod:`verl_ext.rollout_events`). They share the cluster (:class:`CPURaySession`) with one short
run at world size 1 (below): (3, 1) over 7 steps; the same with ``overlap=true`` (a resident engine generating in the background: the
rollout servers and the trainer's actors are separate processes, so the overlap is real) and checkpoints; a
resume from the overlap run's mid-interval checkpoint; and offline with off-policy GRPO and zero-variance
masking (a reward that is constant for the odd prompts, tests/staleness/odd_count_reward.py). :func:`background_runs` makes
them in a child process while the rest of the suite runs (tests/background_runs.py).

Data-parallel invariance in the real loop: the first step of the uninterrupted run (REC-OneSide-NoIS, the
behaviour policy as pi_old) is made again at world size 1, in the same session (``delayed_3_1_ws1``, one step);
every loss's data-parallel invariance through verl's ``ppo_loss`` is also checked without Ray
(tests/algorithms/test_through_verl_ppo_loss.py).
The offline run (off-policy GRPO in decoupled mode: pi_k recomputed by the two ranks, the rollout's log-probs as
importance weights) shows verl's recomputation against the rollout: equal at lag 0, apart at every later lag. Every run takes two epochs over its batch (``ppo_epochs=2``), so that
step 1's loss and clip fraction are not trivially those of pi_theta = pi_old.

At every push, every replica must hold the same weights as every other (version, checksum of what arrived,
checksum of what it holds: :func:`verl_ext.rollout_events.push_rounds`), and those are the actor's: the
initial model file at version 0, the sharded checkpoint of the trainer ranks at a version a checkpoint holds
(:mod:`verl_ext.cpu_runtime.sharded_checkpoint`).

With the CPU backend's seeding (the rollout's per-request seeds, the canonical batch order) the overlap run
must train exactly as the run without overlap, and the resumed run exactly as the uninterrupted one: the
same logged numbers at every step and the same weights at every push (:mod:`verl_ext.cpu.run_comparison`),
at world size 2 on two nodes as at world size 1.
"""

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.background_runs import print_costs
from tests.recipe_config import OFFPOLICY_GRPO_OVERRIDES
from tests.staleness import odd_count_reward
from tests.staleness.e2e_runs import (
    ROLLOUT_N,
    SCHEDULE,
    SMALL_BATCHES,
    TRAIN_BATCH_SIZE,
    check_checksums_change_only_at_pushes,
    per_step,
    rollout_dump,
    served_after_each_push,
)
from verl_ext.rollout_events import push_rounds, replica_nodes

# the extended tier (CI's second session, `pytest -m extended`): the README's command stays within its 20 minutes
# (docs/testing.md); its default session keeps one real overlap run (tests/staleness/test_e2e_lora_multiturn.py)
# and the trainer's overlap and resume rules without Ray (tests/staleness/test_overlap_trainer.py, test_trainer_mode.py)
pytestmark = [pytest.mark.e2e, pytest.mark.extended]
BACKGROUND_MINUTES = 14  # how long background_runs took (two cores, under the suite's load): the queue's order
BACKGROUND_PEAK_GIB = 8  # the memory its runs take at their peak (PSS), for the queue's pairing

STEPS = 7
# global step of the checkpoint resumed from: steps 0-2 done, between the syncs after steps 1 and 4; written
# inside step 2, while version 2 may still be generating the batches of steps 3-5 in the background
RESUME_AT = 3
OFFLINE_STEPS = 3
NODES, RANKS = 2, 2
TOPOLOGY = (f"trainer.nnodes={NODES}", f"trainer.n_gpus_per_node={RANKS // NODES}")
# two epochs over each batch: the second sees pi_theta != pi_old, so step 1's loss and clip fraction say something
TWO_EPOCHS = "actor_rollout_ref.actor.ppo_epochs=2"
COMMON_WS1 = (
    "trainer.v1.trainer_mode=delayed_sync",
    "actor_rollout_ref.rollout.free_cache_engine=True",  # vLLM's contract: sleep discards the weights
    *SMALL_BATCHES,
    TWO_EPOCHS,
)
COMMON = (*COMMON_WS1, *TOPOLOGY)
# the uninterrupted run's checkpoints: global_step_2 holds version 2, which the sync after step 1 pushes
UNINTERRUPTED_SAVE_FREQ = 2
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
# the uninterrupted run also measures the log-prob mismatch with a separate forward pass (as it was measured before
# the update measured it), to compare the two in one run; the other runs make no such pass
MISMATCH_FORWARD_PASS = "trainer.v1.delayed_sync.mismatch_forward_pass=true"
GAP = "staleness/behaviour_minus_current_log_prob"
GAP_FORWARD_PASS = "staleness/behaviour_minus_current_log_prob_forward_pass"
OVERLAP = ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=False")
ZERO_VARIANCE_MASKING = (
    "trainer.v1.delayed_sync.zero_variance_masking=true",
    f"reward.custom_reward_function.path={Path(odd_count_reward.__file__).resolve()}",
    "reward.custom_reward_function.name=compute_score",
)
# the offline run: off-policy GRPO in decoupled mode, with zero-variance masking (its documented setting)
OFFLINE = (
    "trainer.v1.delayed_sync.offline=true",
    *ZERO_VARIANCE_MASKING,
    "actor_rollout_ref.actor.policy_loss.loss_mode=offpolicy_grpo",
    *OFFPOLICY_GRPO_OVERRIDES,
)


def background_runs(root):
    """The five runs, in a child process while the rest of the suite runs
    (tests/background_runs.py)."""
    import time

    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.runs.run import Run
    from verl_ext.cpu_runtime.topology import Topology
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    dumps = {name: root / "dumps" / name for name in ("uninterrupted", "overlap", "resumed", "offline")}
    started = time.perf_counter()
    with CPURaySession(root / "runs", assets, topology=Topology(NODES, RANKS // NODES)) as session:
        cluster_start = time.perf_counter() - started
        uninterrupted = session.run(
            Run(
                name="delayed_3_1",
                steps=STEPS,
                overrides=(*COMMON, *KNOBS, f"trainer.save_freq={UNINTERRUPTED_SAVE_FREQ}", MISMATCH_FORWARD_PASS,
                           f"trainer.rollout_data_dir={dumps['uninterrupted']}"),
            )
        ).raise_for_error()
        overlap = session.run(
            Run(
                name="delayed_3_1_overlap",
                steps=STEPS,
                overrides=(*COMMON, *KNOBS, *OVERLAP, "trainer.save_freq=3", f"trainer.rollout_data_dir={dumps['overlap']}"),
            )
        ).raise_for_error()
        checkpoint = overlap.checkpoint_dir / f"global_step_{RESUME_AT}"
        resumed = session.run(
            Run(
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
            Run(
                name="offline",
                steps=OFFLINE_STEPS,
                overrides=(*COMMON, *OFFLINE, f"trainer.rollout_data_dir={dumps['offline']}"),
            )
        ).raise_for_error()
        # the same first step with one trainer rank (one node of the cluster)
        uninterrupted_ws1 = session.run(
            Run(name="delayed_3_1_ws1", steps=1, overrides=(*COMMON_WS1, *KNOBS))
        ).raise_for_error()
    print(f"two-node cluster and Ray: {cluster_start:.0f} s")
    results = {"uninterrupted": uninterrupted, "overlap": overlap, "resumed": resumed, "offline": offline,
               "uninterrupted_ws1": uninterrupted_ws1}
    print_costs(results.values())
    return {**results, "dumps": dumps, "assets": assets, "cluster_start_seconds": cluster_start}


@pytest.fixture(scope="module")
def runs(request):
    pytest.importorskip("verl_ext.cpu.ray_session")
    return request.getfixturevalue("background_results")



def requests_per_batch() -> int:
    """One rollout request per response: data.train_batch_size x actor_rollout_ref.rollout.n."""
    return TRAIN_BATCH_SIZE * ROLLOUT_N


def pushes(result) -> list[dict]:
    """The run's pushes, one per round to both replicas, which hold identical weights after each (else it raises)."""
    return push_rounds(result.events, RANKS)




def served_by_all_replicas(result) -> list[int]:
    return [sum(counts) for counts in zip(*(served_after_each_push(result, replica) for replica in range(RANKS)))]




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


def test_the_mismatch_taken_in_the_update_is_the_separate_forward_passes(runs):
    """Same run, both ways: staleness/behaviour_minus_current_log_prob, taken inside the actor update (the first of
    two epochs, two ranks, the training forward pass), equals the separate forward pass over the whole batch (how
    it was measured before) at every step, to float rounding; at lags > 0 both are far from 0."""
    result = runs["uninterrupted"]
    update, forward_pass = per_step(result, GAP), per_step(result, GAP_FORWARD_PASS)
    assert set(update) == set(forward_pass) == set(range(STEPS))
    differences = {step: update[step] - forward_pass[step] for step in range(STEPS)}
    print(f"mismatch, update - forward pass: {differences}; forward pass: {forward_pass}")
    assert all(abs(differences[step]) <= 1e-6 + 1e-4 * abs(forward_pass[step]) for step in range(STEPS)), differences
    lagged = [row.step for row in SCHEDULE.preview(STEPS) if row.lag > 0]
    assert all(abs(forward_pass[step]) > 100 * (1e-6 + 1e-4 * abs(forward_pass[step])) for step in lagged), forward_pass


def test_the_mismatch_metric_makes_no_actor_pass_of_its_own(runs):
    """Without the separate pass (the overlap and resumed runs) the old_log_prob phase does no forward pass (pi_old
    is the rollout's log-probs, copied): a small fraction of the update's time, and far below what it is in the run
    that makes the pass (same batches, same machine)."""
    def phase(result, name):
        return per_step(result, f"timing_s/{name}")

    for name in ("overlap", "resumed"):
        old_log_prob, update = phase(runs[name], "old_log_prob"), phase(runs[name], "update_actor")
        assert set(per_step(runs[name], GAP)) == set(update) and GAP_FORWARD_PASS not in runs[name].steps[0]
        fractions = sorted(old_log_prob[step] / update[step] for step in update)
        print(f"{name}: timing_s/old_log_prob / timing_s/update_actor per step: {[round(f, 3) for f in fractions]}")
        assert fractions[len(fractions) // 2] < 0.15 and fractions[-1] < 0.5, fractions
    with_pass = sorted(phase(runs["uninterrupted"], "old_log_prob").values())
    without = sorted(phase(runs["overlap"], "old_log_prob").values())
    print(f"timing_s/old_log_prob medians: with the forward pass {with_pass[STEPS // 2]:.3f} s, without {without[STEPS // 2]:.3f} s")
    assert without[STEPS // 2] < with_pass[STEPS // 2] / 2


def test_weights_reach_the_rollout_exactly_at_sync_points(runs):
    result = runs["uninterrupted"]
    rows = SCHEDULE.preview(STEPS)
    # the start-up push, then one per sync point, labelled with the version pushed
    assert [push["weight_version"] for push in pushes(result)] == [0] + [row.step + 1 for row in rows if row.synced]
    assert len(pushes(result)) == 1 + SCHEDULE.sync_count(STEPS)
    check_checksums_change_only_at_pushes(result, RANKS)
    # each version generated exactly its scheduled batches, in one wake (data.train_batch_size x rollout.n each),
    # spread by verl's load balancer over both replicas
    assert served_by_all_replicas(result) == [
        len(SCHEDULE.steps_generated_with(push["weight_version"], STEPS)) * requests_per_batch()
        for push in pushes(result)
    ]
    assert all(sum(served_after_each_push(result, replica)) > 0 for replica in range(RANKS))


def test_every_replica_holds_the_actors_weights_after_each_push(runs):
    """The actor's weights, read independently of the rollout: version 0 is the model file both ranks loaded;
    version 2 is what the two trainer ranks saved in their sharded checkpoint after step 2 (one file per rank,
    joined). Both replicas received exactly those tensors (their transfer checksum, checked against the
    sender's) at the push of that version."""
    import safetensors.torch

    from verl_ext.cpu_runtime.sharded_checkpoint import actor_checkpoint_checksum, checkpoint_world_size
    from verl_ext.cpu_runtime.weight_checksum import weight_checksum

    result = runs["uninterrupted"]
    by_version = {push["weight_version"]: push for push in pushes(result)}
    model_file = {}
    for path in sorted((runs["assets"] / "model").glob("*.safetensors")):
        model_file.update(safetensors.torch.load_file(path))
    assert by_version[0]["weight_checksum"] == weight_checksum(model_file)
    actor = result.checkpoint_dir / f"global_step_{UNINTERRUPTED_SAVE_FREQ}" / "actor"
    assert checkpoint_world_size(actor) == RANKS
    assert sorted(path.name for path in actor.glob("model_world_size_*.pt")) == [
        f"model_world_size_{RANKS}_rank_{rank}.pt" for rank in range(RANKS)
    ]
    assert by_version[UNINTERRUPTED_SAVE_FREQ]["transfer_checksum"] == actor_checkpoint_checksum(actor)


def test_a_real_checkpoint_of_two_ranks_resumes_only_at_world_size_2(runs):
    """verl's real sharded checkpoint (and the trainer's state beside it), read by the driver's resume checks: at
    world size 2 it resumes (the resumed run did); at 1 or 4 the driver refuses it before Ray, naming the folder
    and both world sizes (verl failed inside Ray, after 113 s, naming a missing shard)."""
    from omegaconf import OmegaConf

    from verl_ext.checks.resume import check_resume
    from verl_ext.config_values import ConfigError
    from verl_ext.staleness.checkpoint_state import read_state

    folder = runs["overlap"].checkpoint_dir / f"global_step_{RESUME_AT}"
    assert read_state(folder).weight_pushes >= 1  # its counts pass the schedule's checks (the resumed run read them)

    def config(nnodes, per_node):
        return OmegaConf.create({
            "trainer": {"resume_mode": "resume_path", "resume_from_path": str(folder), "nnodes": nnodes,
                        "n_gpus_per_node": per_node, "default_local_dir": None},
            "actor_rollout_ref": {"actor": {"strategy": "fsdp2",
                                            "checkpoint": {"load_contents": ["model", "optimizer", "extra"]}}},
            "critic": {"enable": False}, "algorithm": {"adv_estimator": "grpo"},
        })

    check_resume(config(NODES, RANKS // NODES))
    for nnodes, per_node in ((1, 1), (2, 2)):
        with pytest.raises(ConfigError) as raised:
            check_resume(config(nnodes, per_node))
        message = str(raised.value)
        assert str(folder) in message and f"saved at world size {RANKS}" in message
        assert f"asks for world size {nnodes * per_node}" in message


def test_the_two_ranks_and_their_replicas_ran_on_two_nodes(runs):
    """Each replica's server is pinned to its trainer rank's node: two replicas on two distinct Ray nodes, in
    every run (the resumed one included)."""
    for name in ("uninterrupted", "overlap", "resumed", "offline"):
        nodes = replica_nodes(runs[name].events)
        assert sorted(nodes) == list(range(RANKS)), name
        assert len(set(nodes.values())) == NODES and None not in nodes.values(), (name, nodes)


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
    check_checksums_change_only_at_pushes(overlap, RANKS)
    # (the last push's requests are in no event of a resident engine; its batches' stamps are checked by
    # staleness/behaviour_version above: a push in the middle would mix versions in a batch)
    assert served_by_all_replicas(overlap)[:-1] == served_by_all_replicas(plain)[:-1]
    assert not [event for event in overlap.events if event["event"] in ("sleep", "wake_up")]  # resident
    assert [event for event in plain.events if event["event"] == "sleep"]  # the plain run's engine sleeps


def test_overlap_trains_exactly_as_without_overlap(runs):
    """Overlap changes when batches are generated, never what: every logged number (rewards, losses, grad
    norms, lags, ...; not the timings) of every step, every generated response and every pushed weight
    checksum are those of the run without overlap."""
    from verl_ext.cpu.run_comparison import compare_results

    plain, overlap = runs["uninterrupted"], runs["overlap"]
    comparison = compare_results(plain, overlap, ignore=(GAP_FORWARD_PASS,))  # logged by the plain run only
    assert comparison.equal, comparison.report()
    assert comparison.compared_checksums == len(pushes(plain)) == 1 + SCHEDULE.sync_count(STEPS)
    assert comparison.compared_values >= STEPS * 40
    for step in range(STEPS):
        assert rollout_dump(runs["dumps"]["overlap"], step) == rollout_dump(runs["dumps"]["uninterrupted"], step), step


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
    check_checksums_change_only_at_pushes(resumed, RANKS)


def test_resumed_run_logs_the_uninterrupted_runs_numbers(runs):
    """Resumed mid-interval (with batches still generating when the checkpoint was written): from the step
    after the checkpoint on, every logged number and the pushed weights are those of the uninterrupted run,
    step 7 included, whose batch the resumed run generated itself (the same prompts, the same seeds)."""
    from verl_ext.cpu.run_comparison import compare_results

    overlap, resumed = runs["overlap"], runs["resumed"]
    resumed_global_steps = range(RESUME_AT + 1, STEPS + 1)
    assert [record["step"] for record in resumed.steps] == list(resumed_global_steps)
    comparison = compare_results(overlap, resumed, steps=resumed_global_steps, versions=[5])
    assert comparison.equal, comparison.report()
    assert comparison.compared_values >= len(resumed_global_steps) * 40
    assert rollout_dump(runs["dumps"]["resumed"], 6) == rollout_dump(runs["dumps"]["overlap"], 6)


def test_offline_never_pushes_after_the_start(runs):
    result = runs["offline"]
    assert [push["weight_version"] for push in pushes(result)] == [0]
    assert per_step(result, "staleness/lag") == {step: step for step in range(OFFLINE_STEPS)}
    assert per_step(result, "staleness/behaviour_version") == {step: 0 for step in range(OFFLINE_STEPS)}
    # every batch was generated at the start, with the initial weights
    assert served_by_all_replicas(result) == [OFFLINE_STEPS * requests_per_batch()]
    check_checksums_change_only_at_pushes(result, RANKS)


def test_verls_recomputation_of_pi_old_is_the_rollouts_at_lag_0_and_not_after(runs):
    """Decoupled mode (off-policy GRPO recomputes pi_k with the actor, ``bypass_mode=false``): verl compares its
    recomputation with the rollout's log-probs. At lag 0 (step 1: the initial weights on both sides, two ranks
    against the rollout replicas) they are equal to float rounding; at every later lag the actor has trained
    and the batch, generated at the start, is stale, which verl's comparison sees."""
    steps = {record["step"]: record for record in runs["offline"].steps}
    first = steps[1]
    assert first["staleness/lag"] == 0 and first["training/rollout_probs_diff_valid"] == 1
    assert first["training/rollout_probs_diff_max"] < 1e-4
    assert first["training/rollout_actor_probs_pearson_corr"] > 0.9999
    for step in range(2, OFFLINE_STEPS + 1):
        assert steps[step]["staleness/lag"] > 0
        assert steps[step]["training/rollout_probs_diff_max"] > 100 * max(first["training/rollout_probs_diff_max"], 1e-6)


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


# Metrics verl reduces per rank before it averages over the ranks (verl's Metric with MEAN aggregation: the
# loss's diagnostics, each a fraction or mean of the rank's own tokens; ratio_max, the mean of the ranks'
# maxima), and those that describe the ranks themselves (verl's batch balancing). Everything else logged at
# step 1 must agree between world sizes to float rounding.
PER_RANK = ("actor/pg_clipfrac", "actor/pg_clipfrac_positive", "actor/pg_clipfrac_negative", "actor/ppo_kl",
            "actor/ratio_mean", "actor/ratio_max", "global_seqlen/")


def test_step_1_is_the_same_at_world_size_1_and_2(runs):
    """The same first batch (same prompts, same per-request seeds, the same initial weights) trained by one rank
    and by two on two nodes: reward, advantages, lengths, the loss (verl's global token normalisation through
    ``global_batch_info``: each rank's share of the global mean), the entropy, the grad norm (of the reduced
    gradient), both epochs included, agree to float rounding (``REDUCTION_ORDER``: 1e-6 + 1e-5 relative)."""
    from verl_ext.cpu.run_comparison import REDUCTION_ORDER, compare_results

    one, two = runs["uninterrupted_ws1"], runs["uninterrupted"]
    comparison = compare_results(one, two, steps=[1], tolerance=REDUCTION_ORDER, compare_checksums=False,
                                 ignore=(*PER_RANK, "staleness/"))
    assert comparison.equal, comparison.report()
    assert comparison.compared_values >= 30
    step = two.steps[0]
    # the second epoch trained with pi_theta != pi_old: a loss and clipping to compare, not zeros
    assert abs(step["actor/pg_loss"]) > 1e-4 and step["actor/grad_norm"] > 0
    assert one.steps[0]["actor/pg_clipfrac"] > 0 and step["actor/pg_clipfrac"] > 0
    assert step["staleness/lag"] == one.steps[0]["staleness/lag"] == 0.0


def rank_fractions(fraction_ws1: float, epochs: int, tokens: tuple[int, int]) -> set[float]:
    """What verl logs at world size 2 for a clip fraction that is ``fraction_ws1`` at world size 1, over all ways
    the same clipped tokens can fall on two ranks holding ``tokens`` response tokens.

    At world size 1 the loss logs c / N per epoch (c clipped of N tokens; the first epoch clips none:
    pi_theta = pi_old), verl averages the epochs: f1 = c / (E N). At world size 2 each rank logs its own
    c_r / n_r and verl averages ranks, then epochs: f2 = (c_0 / n_0 + c_1 / n_1) / (2 E), c_0 + c_1 = c.
    """
    n0, n1 = tokens
    clipped = round(fraction_ws1 * epochs * (n0 + n1))
    assert abs(clipped - fraction_ws1 * epochs * (n0 + n1)) < 1e-3, "not a whole number of clipped tokens"
    return {(c0 / n0 + (clipped - c0) / n1) / (2 * epochs)
            for c0 in range(max(0, clipped - n1), min(clipped, n0) + 1)}


def test_the_clip_fraction_is_verls_mean_over_ranks_of_the_same_clipped_tokens(runs):
    """``actor/pg_clipfrac`` is not the same number at world size 2: verl averages each rank's fraction of its
    own tokens, and the ranks hold 3 +- a few tokens apart. It is what the same clipped tokens give under that
    reduction: the logged value is one of the splits of world size 1's clipped count over the two ranks'
    token counts (verl logs each rank's tokens, prompt + response, as global_seqlen/balanced_min and _max;
    every prompt has the same length and every rank holds the same number of responses)."""
    one, two = runs["uninterrupted_ws1"].steps[0], runs["uninterrupted"].steps[0]
    assert two["prompt_length/min"] == two["prompt_length/max"]
    prompt_tokens = int(two["prompt_length/min"]) * TRAIN_BATCH_SIZE * ROLLOUT_N // RANKS
    tokens = (int(two["global_seqlen/balanced_min"]) - prompt_tokens, int(two["global_seqlen/balanced_max"]) - prompt_tokens)
    assert sum(tokens) == round(one["response_length/mean"] * TRAIN_BATCH_SIZE * ROLLOUT_N)
    for name in ("actor/pg_clipfrac", "actor/pg_clipfrac_positive", "actor/pg_clipfrac_negative"):
        possible = rank_fractions(one[name], epochs=2, tokens=tokens)
        assert any(abs(two[name] - value) < 1e-6 for value in possible), (name, one[name], two[name], sorted(possible))
