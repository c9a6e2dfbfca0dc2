"""delayed_sync with the rollout engine on its own pool (``actor_rollout_ref.hybrid_engine=false``, the
explorer/trainer split), end to end: verl's real ``main_ppo`` on the CPU backend, the trainer's workers without a
rollout, verl's standalone rollout replica on a logical GPU of its own, weights through the ``gloo`` checkpoint
engine (verl's ``CheckpointEngineManager``, as a GPU run with ``nccl``).

The whole module is the extended tier (``pytest -m extended``, which CI runs after the README's command;
docs/testing.md). Two runs in one Ray start-up (:class:`CPURaySession` of 2 trainer + 1 engine logical GPUs), made by
:func:`background_runs` while the rest of the suite runs (tests/background_runs.py):

- "2 + 1": (3, 1) with ``overlap`` over 5 steps, two trainer ranks (FSDP2 over gloo; actor rank 0 sends, rank 1
  walks the collective weight generator) and one engine replica; checkpoints at global steps 3 (mid-interval,
  written while version 2 may still be generating steps 3-4) and 5 (the last: version 5's weights);
- its resume from the mid-interval checkpoint (2 + 1).

They train verl's own loss ``vanilla`` (PPO's clip; the resume must reproduce its run, so the same loss) with
pi_old = the behaviour policy (verl-ext's losses under delayed_sync are covered by tests/staleness/test_e2e_cpu.py),
one epoch per batch so that the loss's ppo_kl is measured before the update. (Offline mode on the split, "1 + 1",
was a third run: offline is tests/staleness/test_e2e_cpu.py's, the 1 + 1 split tests/cpu/test_e2e_main_ppo.py's;
the suite's time pays for one run of each.)

Evidence: verl's file logger (every step's metrics), the CPU rollout's event log (every push with the checksum
of the weights that arrived and of those the engine then holds), the checkpoints' actor weights (sharded over
the two ranks, joined: :mod:`verl_ext.cpu_runtime.sharded_checkpoint`) and the model file. Zero staleness on the split,
which must be verl's ``sync`` number for number, is a run of tests/cpu/test_e2e_main_ppo.py's session (beside
the sync run it is compared with).
"""

from pathlib import Path

import pytest

from tests.background_runs import print_costs
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
from verl_ext import metric_names
from verl_ext.checkpoint_backends import CPU_BACKEND
from verl_ext.staleness.config import engine_pool_overrides

# the extended tier (CI's second session, `pytest -m extended`): the README's command stays within its 20 minutes
# (docs/testing.md); its default session keeps the split at zero staleness (tests/cpu/test_e2e_main_ppo.py)
pytestmark = [pytest.mark.e2e, pytest.mark.extended]
BACKGROUND_MINUTES = 6  # how long background_runs took (two cores, under the suite's load): the queue's order
BACKGROUND_PEAK_GIB = 7  # the memory its runs take at their peak (PSS), for the queue's pairing

STEPS = 5
RESUME_AT = 3  # steps 0-2 done; written inside step 2, while version 2 may still be generating steps 3-4
TRAINER_RANKS, ENGINE_GPUS = 2, 1
SPLIT = (
    "trainer.v1.trainer_mode=delayed_sync",
    *engine_pool_overrides(1, ENGINE_GPUS, CPU_BACKEND),  # the engine's own logical GPU, resident, weights over gloo
    *SMALL_BATCHES,
)
TWO_TRAINER_RANKS = (f"trainer.n_gpus_per_node={TRAINER_RANKS}",)
KNOBS = ("trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
OVERLAP = ("trainer.v1.delayed_sync.overlap=true",)
# verl's own losses, one per run (the resume must reproduce its run: the same loss)
VERL_LOSSES = {"overlap": "vanilla", "resumed": "vanilla"}


def loss(run: str) -> str:
    return f"actor_rollout_ref.actor.policy_loss.loss_mode={VERL_LOSSES[run]}"


def background_runs(root):
    """The run and its resume, in a child process while the rest of the suite runs."""
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.runs.run import Run
    from verl_ext.cpu_runtime.topology import Topology
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    dumps = {name: root / "dumps" / name for name in ("overlap", "resumed")}
    topology = Topology(1, TRAINER_RANKS, engine_gpus=ENGINE_GPUS)
    with CPURaySession(root / "runs", assets, topology=topology) as session:
        overlap = session.run(
            Run(
                name="split_3_1_overlap",
                steps=STEPS,
                overrides=(*SPLIT, *TWO_TRAINER_RANKS, *KNOBS, *OVERLAP, loss("overlap"), "trainer.save_freq=3",
                           f"trainer.rollout_data_dir={dumps['overlap']}"),
            )
        ).raise_for_error()
        resumed = session.run(
            Run(
                name="split_3_1_overlap_resumed",
                steps=STEPS,
                overrides=(
                    *SPLIT, *TWO_TRAINER_RANKS, *KNOBS, *OVERLAP, loss("resumed"),
                    "trainer.resume_mode=resume_path",
                    f"trainer.resume_from_path={overlap.checkpoint_dir / f'global_step_{RESUME_AT}'}",
                    "trainer.save_freq=5",
                    f"trainer.rollout_data_dir={dumps['resumed']}",
                ),
            )
        ).raise_for_error()
    results = {"overlap": overlap, "resumed": resumed}
    print_costs(results.values())
    return {**results, "dumps": dumps, "assets": assets}


def topology_of(result):
    """The run's trainer.nnodes x trainer.n_gpus_per_node (and the engine's pool), from its overrides."""
    from verl_ext.cpu_runtime.topology import Topology

    return Topology.from_overrides(result.run.overrides)


@pytest.fixture(scope="module")
def runs(request):
    pytest.importorskip("verl_ext.cpu.ray_session")
    return request.getfixturevalue("background_results")



def pushes(result) -> list[dict]:
    """The run's pushes to its one engine replica (:func:`push_rounds` checks the replicas the run should have)."""
    from verl_ext.rollout_events import push_rounds

    return push_rounds(result.events, topology_of(result).rollout_replicas)



def check_pushes_are_the_only_weight_changes(result) -> None:
    """No generation refused or aborted; a checksum appears only through a push; the engine never sleeps."""
    assert not [event for event in result.events if event["event"] in ("update_aborted", "sleep", "wake_up")]
    check_checksums_change_only_at_pushes(result, topology_of(result).rollout_replicas)



def model_file_checksum(assets: Path) -> str:
    """The checksum of the tiny model as it is on disk: what version 0 must be."""
    import safetensors.torch

    from verl_ext.cpu_runtime.weight_checksum import weight_checksum

    weights = {}
    for path in sorted((assets / "model").glob("*.safetensors")):
        weights.update(safetensors.torch.load_file(path))
    return weight_checksum(weights)


SCHEDULE_METRICS = ("staleness/lag", "staleness/behaviour_version", "staleness/weight_syncs", "staleness/synced")


def test_lags_and_versions_are_the_schedules(runs):
    result = runs["overlap"]
    rows = SCHEDULE.preview(STEPS)
    assert per_step(result, "staleness/lag") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/behaviour_version") == {row.step: row.behaviour_version for row in rows}
    assert per_step(result, "training/off_policy/trajectory_staleness/mean") == {row.step: row.lag for row in rows}
    assert per_step(result, "staleness/synced") == {row.step: float(row.synced) for row in rows}
    assert per_step(result, "staleness/weight_syncs")[STEPS - 1] == SCHEDULE.sync_count(STEPS)


def test_two_trainer_ranks_and_one_engine_replica(runs):
    """2 + 1: the actor is sharded over two ranks (one checkpoint file each) and the rollout is one standalone
    replica -- the trainer's workers hold none (a colocated one per rank would log events of replicas 0 and 1)."""
    from verl_ext.rollout_events import replica_nodes
    from verl_ext.cpu_runtime.sharded_checkpoint import checkpoint_world_size

    for name in ("overlap", "resumed"):
        assert len(replica_nodes(runs[name].events)) == ENGINE_GPUS, name
    actor = runs["overlap"].checkpoint_dir / f"global_step_{STEPS}" / "actor"
    assert checkpoint_world_size(actor) == TRAINER_RANKS
    assert sorted(path.name for path in actor.glob("model_world_size_*.pt")) == [
        f"model_world_size_{TRAINER_RANKS}_rank_{rank}.pt" for rank in range(TRAINER_RANKS)
    ]


def test_every_push_reaches_the_engine_through_the_checkpoint_engine(runs):
    """The pushes are exactly the schedule's, each carried by the gloo engine (its metric at every sync point),
    and the engine then holds exactly the actor's weights of that version: version 0 is the model file, version 5
    the actor weights the two trainer ranks saved at global step 5 (their shards joined)."""
    from verl_ext.cpu_runtime.sharded_checkpoint import actor_checkpoint_checksum

    result = runs["overlap"]
    rows = SCHEDULE.preview(STEPS)
    assert [push["weight_version"] for push in pushes(result)] == [0] + [row.step + 1 for row in rows if row.synced]
    check_pushes_are_the_only_weight_changes(result)
    assert set(per_step(result, metric_names.GLOO_WEIGHT_BYTES)) == {row.step for row in rows if row.synced}
    assert all(value > 0 for value in per_step(result, metric_names.GLOO_WEIGHT_BYTES).values())
    by_version = {push["weight_version"]: push for push in pushes(result)}
    assert by_version[0]["weight_checksum"] == model_file_checksum(runs["assets"])
    actor = result.checkpoint_dir / f"global_step_{STEPS}" / "actor"
    assert by_version[STEPS]["transfer_checksum"] == actor_checkpoint_checksum(actor)
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
    from verl_ext.cpu_runtime.sharded_checkpoint import actor_checkpoint_checksum

    assert [push["weight_version"] for push in pushes(resumed)] == [STEPS]
    version_5 = {push["weight_version"]: push["weight_checksum"] for push in pushes(overlap)}[STEPS]
    assert pushes(resumed)[0]["weight_checksum"] == version_5
    assert pushes(resumed)[0]["transfer_checksum"] == actor_checkpoint_checksum(
        resumed.checkpoint_dir / f"global_step_{STEPS}" / "actor")
    check_pushes_are_the_only_weight_changes(resumed)


def test_resumed_run_logs_the_uninterrupted_runs_numbers(runs):
    """From the step after the mid-interval checkpoint on, every logged number (rewards, loss, grad norm, clip
    fractions, lags, the gloo engine's bytes; not the timings) and the weights pushed at version 5 are those of
    the uninterrupted run, to the bit, at two trainer ranks."""
    from verl_ext.cpu.run_comparison import compare_results

    overlap, resumed = runs["overlap"], runs["resumed"]
    resumed_global_steps = range(RESUME_AT + 1, STEPS + 1)
    assert [record["step"] for record in resumed.steps] == list(resumed_global_steps)
    comparison = compare_results(overlap, resumed, steps=resumed_global_steps, versions=[STEPS])
    assert comparison.equal, comparison.report()
    assert comparison.compared_checksums == 1
    assert comparison.compared_values >= len(resumed_global_steps) * 40


@pytest.mark.parametrize("run", VERL_LOSSES)
def test_verls_loss_trained_on_the_behaviour_policys_log_probs(runs, run):
    """verl's loss ran (its metrics, not verl-ext's), every trained step had a gradient, and its pi_old was the
    behaviour policy: its ppo_kl, mean(log pi_old - log pi_theta) before the update, is 0 at lag 0 and far from 0
    on stale batches (pi_old recomputed by the actor would make it 0 at every step). (With two trainer ranks verl
    logs the mean of the ranks' own means, which differs from the behaviour-minus-current gap over the whole batch
    when the ranks hold different numbers of tokens.)"""
    result = runs[run]
    kl, grad_norms = per_step(result, "actor/ppo_kl"), per_step(result, "actor/grad_norm")
    lags, gap = per_step(result, "staleness/lag"), per_step(result, "staleness/behaviour_minus_current_log_prob")
    assert kl and set(kl) == set(grad_norms) and all(norm > 0 for norm in grad_norms.values())
    for record in result.steps:
        if "actor/ppo_kl" in record:
            assert "actor/pg_clipfrac_lower" in record and "actor/ratio_mean" not in record, record["step"]  # verl's
    stale = [step for step in kl if lags[step] > 0]
    assert stale and max(abs(kl[step]) for step in stale) > 1e-3
    assert all(abs(kl[step]) < 1e-3 for step in kl if lags[step] == 0)
    assert all(abs(gap[step]) < 1e-3 for step in kl if lags[step] == 0) and any(abs(gap[step]) > 1e-3 for step in stale)
