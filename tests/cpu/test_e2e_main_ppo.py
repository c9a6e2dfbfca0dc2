"""verl's real ``main_ppo`` on the CPU backend, one run per algorithm family, asserting on what verl logged.

Five runs on the tiny assets with the recipe config (``recipe/rec/config/rec_trainer.yaml``) and the CPU
profile, made by :func:`background_runs` in a child process while the rest of the suite runs
(tests/background_runs.py). ``rec`` + ``opmd`` goes through the quickstart (``python -m
verl.trainer.main_ppo`` in a child process with its own Ray, as a user runs it), started first and left
running beside the other four, which share one Ray start-up (:class:`verl_ext.cpu.launch.CPURaySession`):

- ``rec`` + ``rec_oneside_nois`` for 2 steps, saving a checkpoint at step 2;
- that run resumed from its checkpoint for one more step with ``red_weight`` (a checkpoint holds weights,
  optimizer and data position, not the loss: one run checks both the resume and red_weight's step);
- ``red_drop`` + ``rec_reinforce`` with the actor recomputing pi_old (``bypass_mode=false``), so that
  verl logs its rollout-vs-actor probability difference;
- the first run's algorithm again with zero staleness, ``delayed_sync`` (1, 0), and the rollout engine on its own
  pool (``hybrid_engine=false``, its own logical GPU, weights through verl-ext's ``gloo`` checkpoint engine):
  step for step the batches and pushes of verl's ``sync`` mode in the first run.

Evidence comes from verl's file logger (every step's metrics) and the CPU rollout's event log (every
weight push with the checksum of the weights the rollout then holds), never from exit codes alone.
"""

import pytest
import torch

pytestmark = pytest.mark.e2e

ALGORITHM = "algorithm.adv_estimator={} actor_rollout_ref.actor.policy_loss.loss_mode={}"
FAMILIES = {
    "rec_oneside_nois": ("rec", "rec_oneside_nois", ()),
    "red_drop": ("red_drop", "rec_reinforce", ("algorithm.rollout_correction.bypass_mode=false",)),
    "red_weight": ("rec", "red_weight", ()),
    "opmd": ("rec", "opmd", ()),
}
STEPS = 2


def algorithm_overrides(family: str) -> tuple[str, ...]:
    estimator, loss, extra = FAMILIES[family]
    return (*ALGORITHM.format(estimator, loss).split(), *extra)


RESUMED_FAMILY = "red_weight"  # trained by the resumed run: step STEPS + 1 only
RAY_GPUS = ("+ray_kwargs.ray_init.num_gpus=2",)  # the split run: 1 trainer + 1 engine logical GPU
ZERO_STALENESS_SPLIT = (
    "trainer.v1.trainer_mode=delayed_sync",
    "trainer.v1.delayed_sync.sync_interval=1",
    "trainer.v1.delayed_sync.sync_offset=0",
)


def trained_steps(family: str) -> list[int]:
    return [STEPS + 1] if family == RESUMED_FAMILY else list(range(1, STEPS + 1))


def background_runs(root):
    """The four runs (in a child process, see the module docstring); the quickstart beside the session."""
    from concurrent.futures import ThreadPoolExecutor

    from verl_ext.checkpoint_backends import CPU_BACKEND
    from verl_ext.cpu.launch import CPURaySession, CPURun
    from verl_ext.cpu.quickstart import run_quickstart
    from verl_ext.staleness.config import engine_pool_overrides
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    results = {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        quickstart = pool.submit(
            run_quickstart, steps=STEPS, estimator="rec", loss="opmd", out=root / "quickstart", assets=assets, echo=False
        )
        with CPURaySession(root / "cpu_e2e", assets, ray_overrides=RAY_GPUS) as session:
            first = session.run(
                CPURun("rec_oneside_nois", steps=STEPS, overrides=(
                    *algorithm_overrides("rec_oneside_nois"), "trainer.save_freq=2",
                    f"trainer.rollout_data_dir={root / 'dumps' / 'sync'}"))
            )
            results["rec_oneside_nois"] = first.raise_for_error()
            results["resumed"] = results[RESUMED_FAMILY] = session.run(
                CPURun(
                    "rec_oneside_nois_resumed_red_weight",
                    steps=STEPS + 1,
                    checkpoint_dir=first.checkpoint_dir,
                    overrides=(*algorithm_overrides(RESUMED_FAMILY), "trainer.resume_mode=auto"),
                )
            ).raise_for_error()
            results["red_drop"] = session.run(
                CPURun("red_drop", steps=STEPS, overrides=algorithm_overrides("red_drop"))
            ).raise_for_error()
            results["split_1_0"] = session.run(
                CPURun("rec_oneside_nois_split_1_0", steps=STEPS, overrides=(
                    *algorithm_overrides("rec_oneside_nois"), *ZERO_STALENESS_SPLIT,
                    *engine_pool_overrides(1, 1, CPU_BACKEND), *RAY_GPUS,
                    f"trainer.rollout_data_dir={root / 'dumps' / 'split_1_0'}"))
            ).raise_for_error()
            results["dumps"] = root / "dumps"
        result, summary = quickstart.result()
        results["opmd"], results["opmd_summary"] = result.raise_for_error(), summary
    return results


@pytest.fixture(scope="module")
def runs(background_results):
    return background_results


def expected_loss_metrics(loss_mode: str) -> set[str]:
    """The metric names verl-ext's loss reports (``actor/<name>``), read off the loss itself."""
    from verl_ext.catalog import Hyperparameters, policy_loss_spec

    spec = policy_loss_spec(loss_mode)
    shape = (4, 3)
    terms = spec.compute(
        torch.zeros(shape), torch.zeros(shape), torch.tensor([[1.0] * 3, [-1.0] * 3] * 2), torch.ones(shape), None,
        Hyperparameters(0.2, 0.2, 0.6, 2.0, 0.1, 1.0),
    )
    return {f"actor/{name}" for name in terms.metrics}


def pushes(result) -> list[dict]:
    return [event for event in result.events if event["event"] == "update_weights"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_step_trains_with_our_loss(runs, family):
    result = runs[family]
    steps = result.steps
    assert [step["step"] for step in steps] == trained_steps(family)
    for step in steps:
        assert step["actor/grad_norm"] > 0, step["step"]
        assert 0.0 <= step["critic/score/mean"] <= 1.0
    missing = expected_loss_metrics(FAMILIES[family][1]) - set(steps[-1])
    assert not missing, f"{family}: loss metrics not logged: {sorted(missing)}"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_rollout_checksum_changes_at_every_weight_push(runs, family):
    result = runs[family]
    events = result.events
    assert not [event for event in events if event["event"] == "generate_rejected"]
    # the start-up push (version 0, or the checkpoint's), then one after every training step
    trained = trained_steps(family)
    assert [push["weight_version"] for push in pushes(result)] == list(range(trained[0] - 1, trained[-1] + 1))
    checksums = [push["weight_checksum"] for push in pushes(result)]
    assert all(checksums) and all(a != b for a, b in zip(checksums, checksums[1:]))
    # colocated with the trainer, the rollout discards its weights at every sleep (vLLM level 2) ...
    sleeps = [event for event in events if event["event"] == "sleep"]
    assert sleeps and all(event["weights"] == "discarded" and event["level"] == 2 for event in sleeps)
    # ... and every push that follows refills them from nothing
    assert all(push["previous_checksum"] is None for push in pushes(result))
    from verl_ext.cpu.profile import DEFAULTS

    served = [event["requests_served"] for event in sleeps]
    assert served[-len(trained):] == [DEFAULTS["train_batch_size"] * DEFAULTS["rollout_n"]] * len(trained)


@pytest.mark.parametrize("family", ["rec_oneside_nois", "red_weight", "opmd"])
def test_rollout_log_probs_are_pi_old_and_agree_with_the_actor(runs, family):
    """bypass_mode=true: pi_old is the rollout's log-probs; before the update the ratio is pi_theta/pi_old = 1."""
    for step in runs[family].steps:
        if "actor/ratio_max" in step:
            assert abs(step["actor/ratio_max"] - 1.0) < 1e-4, step["step"]
        assert abs(step["actor/ppo_kl"]) < 1e-5, step["step"]


def test_rollout_log_probs_agree_with_the_actors_recomputation(runs):
    """bypass_mode=false: verl recomputes pi_old with the actor and logs its difference from the rollout's."""
    for step in runs["red_drop"].steps:
        assert step["training/rollout_probs_diff_valid"] == 1
        assert step["training/rollout_probs_diff_max"] < 1e-4, step["step"]
        assert step["training/rollout_actor_probs_pearson_corr"] > 0.9999


def test_checkpoint_resume_continues_the_step_count_and_the_weights(runs):
    first, resumed = runs["rec_oneside_nois"], runs["resumed"]
    assert (first.checkpoint_dir / f"global_step_{STEPS}").is_dir()
    # the resumed run logs only the step after the checkpoint
    assert [step["step"] for step in resumed.steps] == [STEPS + 1]
    assert resumed.steps[0]["actor/grad_norm"] > 0
    # its start-up push carries the checkpoint's weights: the ones the first run pushed after its last step
    resumed_pushes = pushes(resumed)
    assert resumed_pushes[0]["weight_version"] == STEPS
    assert resumed_pushes[0]["weight_checksum"] == pushes(first)[-1]["weight_checksum"]
    assert [push["weight_version"] for push in resumed_pushes] == [STEPS, STEPS + 1]
    assert resumed_pushes[1]["weight_checksum"] != resumed_pushes[0]["weight_checksum"]


def test_quickstart_summary_is_measured(runs):
    summary = runs["opmd_summary"]
    assert summary["steps"] == STEPS and summary["last_step"] == STEPS
    assert 0.0 <= summary["reward_start"] <= 1.0 and 0.0 <= summary["reward_end"] <= 1.0
    assert summary["steps_per_second"] > 0 and summary["startup_seconds"] > 0 and summary["cpu_seconds"] > 10
    assert summary["peak_pss_gib"] > 0.5 and summary["peak_rss_gib"] >= summary["peak_pss_gib"]
    assert summary["command"][1:3] == ["-m", "verl.trainer.main_ppo"]


def dumped_prompts(directory, step: int) -> list[str]:
    """The prompts verl dumped for 1-based ``step`` (``trainer.rollout_data_dir``), sorted."""
    import json

    with open(directory / f"{step}.jsonl") as file:
        return sorted(json.loads(line)["input"] for line in file)


def test_zero_staleness_on_its_own_pool_takes_verls_sync_steps(runs):
    """delayed_sync (1, 0) with the engine on its own pool: the prompts of each step, lag 0 and a push after every
    step, as verl's sync mode (the first run, same algorithm); the pushes go through the gloo checkpoint engine and
    the first carries the same weights as sync's."""
    from verl_ext import metric_names

    sync, split = runs["rec_oneside_nois"], runs["split_1_0"]
    for step in range(1, STEPS + 1):
        assert dumped_prompts(runs["dumps"] / "split_1_0", step) == dumped_prompts(runs["dumps"] / "sync", step), step
    for result in (sync, split):
        assert [record[metric_names.TRAJECTORY_STALENESS_MEAN] for record in result.steps] == [0.0] * STEPS
    assert [record[metric_names.LAG] for record in split.steps] == [0.0] * STEPS
    assert [push["weight_version"] for push in pushes(split)] == [push["weight_version"] for push in pushes(sync)] == [0, 1, 2]
    assert pushes(split)[0]["weight_checksum"] == pushes(sync)[0]["weight_checksum"]
    assert [record["step"] for record in split.steps if metric_names.GLOO_WEIGHT_BYTES in record] == list(range(1, STEPS + 1))
    assert not [event for event in split.events if event["event"] in ("sleep", "wake_up", "generate_rejected")]
