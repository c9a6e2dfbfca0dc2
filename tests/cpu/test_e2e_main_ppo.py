"""verl's real ``main_ppo`` on the CPU backend, one run per algorithm family, asserting on what verl logged.

Two runs (four with the extended tier) on the tiny assets with the recipe config
(``recipe/rec/config/rec_trainer.yaml``) and the CPU profile, made by :func:`background_runs` in a child process
while the rest of the suite runs (tests/background_runs.py):

- **the quickstart**, exactly the README's ``python -m verl_ext.cpu.quickstart -- trainer.n_gpus_per_node=2`` (its
  default algorithm, REC-OneSide-NoIS; ``python -m verl.trainer.main_ppo`` in a child process with its own Ray, as a
  user runs it: two FSDP2 ranks over gloo, two rollout replicas), verl's ``sync`` trainer for 2 steps;
- beside it, in one Ray start-up (:class:`verl_ext.cpu.ray_session.CPURaySession` of two logical GPUs), **the same
  run with ``trainer.v1.trainer_mode=delayed_sync`` at (m, n) = (1, 0)**: zero staleness, which must be the
  quickstart's ``sync`` run number for number (the same seed: the rollout's per-request seeds, verl_ext.seeding; the
  same batch order, verl_ext.batch_order), at two ranks: the project's headline exactness claim on the default
  (colocated) path, in the default suite, against the very run a user starts first;
- ``extended`` (made and checked under ``pytest -m extended``, not in the default suite, whose time pays for the two
  above): ``rec`` + ``red_weight`` under ``sync`` at one rank for 2 steps, saving a checkpoint at step 2; that run
  resumed from its checkpoint for one more step with ``opmd`` (a checkpoint holds weights, optimizer and data
  position, not the loss: one run checks both the resume and OPMD's step; OPMD's default-suite run is the multi-turn
  one, tests/staleness/test_e2e_lora_multiturn.py); and its (1, 0) with the rollout engine on its own pool
  (``actor_rollout_ref.hybrid_engine=false``: a standalone replica on its own logical GPU, the trainer's workers
  hold no rollout, weights through verl-ext's ``gloo`` checkpoint engine): the explorer/trainer split at zero
  staleness, which must be verl's ``sync`` number for number too, and push over gloo exactly the weights sync's
  colocated rollout received (with the split's other runs, tests/staleness/test_e2e_split.py).

Evidence comes from verl's file logger (every step's metrics) and the CPU rollout's event log (every
weight push with the checksum of the weights the rollout then holds), never from exit codes alone.
"""

import re

import pytest

from tests.background_runs import default_runs_wanted, extended_runs_wanted, print_costs
from verl_ext.algorithms.registry import loss_metric_names
from verl_ext.cpu.quickstart import DEFAULT_ALGORITHM

pytestmark = pytest.mark.e2e
BACKGROUND_MINUTES = {"default": 6, "extended": 5}  # how long background_runs took (two cores, under load): the queue's order
# the memory its runs take at their peak (PSS), for the queue's pairing: the quickstart beside its delayed_sync run
# (two ranks each: 6.8 and 6.7 GiB) in the default tier; the extended tier alone makes the one-rank run, its resume and
# the split, one at a time
BACKGROUND_PEAK_GIB = {"default": 13.5, "extended": 6}

ALGORITHM = "algorithm.adv_estimator={} actor_rollout_ref.actor.policy_loss.loss_mode={}"
FAMILIES = {
    "rec_oneside_nois": ("rec", "rec_oneside_nois", ()),
    "red_weight": ("rec", "red_weight", ()),
    "opmd": ("rec", "opmd", ()),
}
STEPS = 2
QUICKSTART_FAMILY = DEFAULT_ALGORITHM  # the quickstart's own default: what a user's first run trains
QUICKSTART_TOPOLOGY = ("trainer.n_gpus_per_node=2",)  # the README's multi-rank quickstart
FIRST_FAMILY = "red_weight"  # the extended tier's one-rank sync run, resumed and compared with the split
RESUMED_FAMILY = "opmd"  # trained by the resumed run (extended tests): step STEPS + 1 only
EXTENDED_FAMILIES = (FIRST_FAMILY, RESUMED_FAMILY)
# delayed_sync with no staleness: a push after every step, each batch generated right after it
ZERO_STALENESS = (
    "trainer.v1.trainer_mode=delayed_sync",
    "trainer.v1.delayed_sync.sync_interval=1",
    "trainer.v1.delayed_sync.sync_offset=0",
)
# the split: 1 trainer rank + 1 standalone engine replica, resident, weights over gloo
SPLIT_ENGINE_GPUS = 1


def algorithm_overrides(family: str) -> tuple[str, ...]:
    estimator, loss, extra = FAMILIES[family]
    return (*ALGORITHM.format(estimator, loss).split(), *extra)


def trained_steps(family: str) -> list[int]:
    return [STEPS + 1] if family == RESUMED_FAMILY else list(range(1, STEPS + 1))


def background_runs(root):
    """The quickstart and, beside it, its delayed_sync (1, 0) run in a session (in a child process, see the module
    docstring). A session of the extended tier alone (``pytest -m extended``) makes only what its tests read: the
    one-rank run, its resume and the split."""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    import ray  # noqa: F401 -- before the session sets the CPU profile's environment, as in a user's program

    from tests.listening_sockets import ListeningSockets
    from verl_ext.checkpoint_backends import CPU_BACKEND
    from verl_ext.cpu.ray_session import CPURaySession
    from verl_ext.cpu.quickstart import quickstart_run, run_quickstart
    from verl_ext.cpu_runtime.topology import Topology
    from verl_ext.runs.run import Run
    from verl_ext.staleness.config import engine_pool_overrides
    from verl_ext.tiny.assets import build_tiny_assets

    assets = root / "assets"
    build_tiny_assets(assets)
    default, extended = default_runs_wanted(), extended_runs_wanted()
    results = {}
    with ListeningSockets() as sockets, ThreadPoolExecutor(max_workers=1) as pool:
        quickstart = None if not default else pool.submit(
            run_quickstart, steps=STEPS, out=root / "quickstart", assets=assets, echo=False,
            extra_overrides=QUICKSTART_TOPOLOGY,
        )
        # two logical GPUs: the delayed_sync run's two trainer ranks, or the split's trainer rank and engine
        with CPURaySession(root / "cpu_e2e", assets, topology=Topology(1, 2)) as session:
            if default:
                twin = quickstart_run(STEPS, extra_overrides=(*QUICKSTART_TOPOLOGY, *ZERO_STALENESS))
                results["delayed_sync_1_0"] = session.run(
                    dataclasses.replace(twin, name=f"{twin.name}_delayed_sync_1_0")).raise_for_error()
            if extended:
                first = session.run(Run(FIRST_FAMILY, steps=STEPS, overrides=(
                    *algorithm_overrides(FIRST_FAMILY), "trainer.save_freq=2",
                    f"trainer.rollout_data_dir={root / 'dumps' / 'sync'}")))
                results[FIRST_FAMILY] = first.raise_for_error()
                results["resumed"] = results[RESUMED_FAMILY] = session.run(Run(
                    f"{FIRST_FAMILY}_resumed_{RESUMED_FAMILY}", steps=STEPS + 1, checkpoint_dir=first.checkpoint_dir,
                    overrides=(*algorithm_overrides(RESUMED_FAMILY), "trainer.resume_mode=auto"))).raise_for_error()
                results["split_1_0"] = session.run(Run(f"{FIRST_FAMILY}_split_1_0", steps=STEPS, overrides=(
                    *algorithm_overrides(FIRST_FAMILY), *ZERO_STALENESS,
                    *engine_pool_overrides(1, SPLIT_ENGINE_GPUS, CPU_BACKEND),
                    f"trainer.rollout_data_dir={root / 'dumps' / 'split_1_0'}"))).raise_for_error()
            results["dumps"] = root / "dumps"
        if quickstart is not None:
            result, summary = quickstart.result()
            results[QUICKSTART_FAMILY], results["quickstart_summary"] = result.raise_for_error(), summary
    results["listening"] = sockets.listeners
    print_costs(results[name] for name in (QUICKSTART_FAMILY, "delayed_sync_1_0", FIRST_FAMILY, "resumed", "split_1_0")
                if results.get(name))
    if default:
        results["refused_rerun"] = refused_rerun(root / "quickstart", assets)
    return results


REFUSED_OVERRIDE = "actor_rollout_ref.actor.policy_loss.loss_mode=nope"


def refused_rerun(out, assets) -> dict:
    """The quickstart again into the finished run's folder, with a bad override (issue 28's loss): refused in this
    process, before Ray or a child starts. What its folder held before and after, byte for byte."""
    import hashlib
    import time

    import ray

    from verl_ext.cpu.quickstart import run_quickstart
    from verl_ext.runs.run import RunRefused

    def files():
        return {str(path.relative_to(out)): hashlib.sha256(path.read_bytes()).hexdigest()
                for path in sorted(out.rglob("*")) if path.is_file()}

    before = files()
    started = time.perf_counter()
    try:
        run_quickstart(steps=STEPS, out=out, assets=assets, echo=False,
                       extra_overrides=(*QUICKSTART_TOPOLOGY, REFUSED_OVERRIDE))
        refusal = None
    except RunRefused as refused:
        refusal = str(refused)
    return {"before": before, "after": files(), "refusal": refusal, "seconds": time.perf_counter() - started,
            "ray_started": ray.is_initialized()}


@pytest.fixture(scope="module")
def runs(background_results):
    return background_results


def replicas(result) -> int:
    """One rollout replica per trainer rank; with the engine on its own pool, one per engine GPU."""
    from verl_ext.cpu_runtime.topology import Topology

    return Topology.from_overrides(result.run.overrides).rollout_replicas


def pushes(result) -> list[dict]:
    """One entry per push to every replica; all replicas hold the same weights after each (else it raises)."""
    from verl_ext.rollout_events import push_rounds

    return push_rounds(result.events, replicas(result))


def families(names) -> list:
    """``names`` as parameters, the extended tier's families marked ``extended`` (their runs are made only then)."""
    return [pytest.param(name, marks=pytest.mark.extended) if name in EXTENDED_FAMILIES else name for name in names]


@pytest.mark.parametrize("family", families(FAMILIES))
def test_every_step_trains_with_our_loss(runs, family):
    result = runs[family]
    steps = result.steps
    assert [step["step"] for step in steps] == trained_steps(family)
    for step in steps:
        assert step["actor/grad_norm"] > 0, step["step"]
        assert 0.0 <= step["critic/score/mean"] <= 1.0
    missing = loss_metric_names(FAMILIES[family][1]) - set(steps[-1])
    assert not missing, f"{family}: loss metrics not logged: {sorted(missing)}"


@pytest.mark.parametrize("family", families(FAMILIES))
def test_rollout_checksum_changes_at_every_weight_push(runs, family):
    result = runs[family]
    events = result.events
    assert not [event for event in events if event["event"] == "generate_rejected"]
    # the start-up push (version 0, or the checkpoint's), then one after every training step
    trained = trained_steps(family)
    assert [push["weight_version"] for push in pushes(result)] == list(range(trained[0] - 1, trained[-1] + 1))
    checksums = [push["weight_checksum"] for push in pushes(result)]
    assert all(checksums) and all(a != b for a, b in zip(checksums, checksums[1:]))
    # colocated with the trainer, every replica discards its weights at every sleep (vLLM level 2) ...
    sleeps = [event for event in events if event["event"] == "sleep"]
    assert sleeps and all(event["weights"] == "discarded" and event["level"] == 2 for event in sleeps)
    # ... and every push that follows refills them from nothing
    assert all(event["previous_checksum"] is None for event in events if event["event"] == "update_weights")
    from verl_ext.cpu.profile import DEFAULTS

    # each step's requests (prompts x responses), spread over the replicas by verl's load balancer
    served = [[event["requests_served"] for event in sleeps if event["replica_rank"] == rank] for rank in range(replicas(result))]
    per_step = [sum(counts) for counts in zip(*(replica[-len(trained):] for replica in served))]
    assert per_step == [DEFAULTS["train_batch_size"] * DEFAULTS["rollout_n"]] * len(trained)
    assert all(sum(replica) > 0 for replica in served)


@pytest.mark.parametrize("family", families(FAMILIES))
def test_rollout_log_probs_are_pi_old_and_agree_with_the_actor(runs, family):
    """bypass_mode=true: pi_old is the rollout's log-probs; before the update the ratio is pi_theta/pi_old = 1."""
    for step in runs[family].steps:
        if "actor/ratio_max" in step:
            assert abs(step["actor/ratio_max"] - 1.0) < 1e-4, step["step"]
        assert abs(step["actor/ppo_kl"]) < 1e-5, step["step"]


@pytest.mark.extended
def test_checkpoint_resume_continues_the_step_count_and_the_weights(runs):
    first, resumed = runs[FIRST_FAMILY], runs["resumed"]
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
    summary = runs["quickstart_summary"]
    assert summary["steps"] == STEPS and summary["last_step"] == STEPS
    assert (summary["nnodes"], summary["n_gpus_per_node"], summary["world_size"]) == (1, 2, 2)
    assert 0.0 <= summary["reward_start"] <= 1.0 and 0.0 <= summary["reward_end"] <= 1.0
    assert summary["steps_per_second"] > 0 and summary["startup_seconds"] > 0 and summary["cpu_seconds"] > 10
    assert summary["peak_pss_gib"] > 0.5 and summary["peak_rss_gib"] >= summary["peak_pss_gib"]
    assert summary["command"][1:3] == ["-m", "verl.trainer.main_ppo"]
    assert "trainer.n_gpus_per_node=2" in summary["command"] and "+ray_kwargs.ray_init.num_gpus=2" in summary["command"]


def test_a_refused_rerun_into_the_quickstarts_folder_leaves_the_earlier_run_byte_for_byte(runs):
    """Issue 28: a rerun with a bad override once deleted the last run's metrics and events and overwrote its log.
    Now it is refused in the launching process (no Ray, no child, nothing written, the key on the last line) and
    every file of the earlier run -- metrics, log, weight events, summary -- is as it was."""
    rerun = runs["refused_rerun"]
    assert rerun["refusal"] is not None and not rerun["ray_started"]
    assert "loss_mode='nope' is not a registered policy loss" in rerun["refusal"].splitlines()[-1]
    assert {"summary.json", f"verl_ext_cpu/{QUICKSTART_FAMILY}.jsonl", f"verl_ext_cpu/{QUICKSTART_FAMILY}/main_ppo.log",
            f"verl_ext_cpu/{QUICKSTART_FAMILY}/rollout_events.jsonl"} <= set(rerun["before"])
    assert rerun["after"] == rerun["before"]
    print(f"refused in {rerun['seconds']:.1f} s")


REPEATS_ALLOWED = 30  # "a few dozen": before, TransferQueue's thread warning came ~120 times per step


def console_lines(text: str) -> list[str]:
    """Lines as a reader compares them: colours, process ids and times left out."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    text = re.sub(r"pid=\d+", "pid=N", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[ T,]\d{2}:\d{2}:\d{2}([.,]\d+)?|\b[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+", "TIME", text)
    return text.splitlines()


def test_the_quickstarts_console_is_verls_progress_and_steps_then_the_summary(runs):
    """What the quickstart's default console shows (its echo of main_ppo's output, the log holding all of it, then the
    summary): no line more than a few dozen times -- TransferQueue's thread count is the machine's (the CPU profile's
    TQ_NUM_THREADS), verl's optional-engine import warnings are hidden in the driver and every Ray worker
    (PYTHONWARNINGS), verl's config dump is one line -- and each step's line is there."""
    import io
    from collections import Counter

    from verl_ext.cpu.quickstart import format_summary
    from verl_ext.runs.monitor import ConsoleEcho

    result, summary = runs[QUICKSTART_FAMILY], runs["quickstart_summary"]
    log = result.log_path.read_text(encoding="utf-8")
    # the TaskRunner and Ray's workers (at least the actor and the agent-loop worker) wrote to it
    assert {"TaskRunnerV1", "WorkerDict", "AgentLoopWorkerTQ"} <= set(re.findall(r"\((\w+) pid=\d+\)", log))
    for text in ("target_num_threads", "engine is not available", "Apex are not installed", "Apex is not installed"):
        assert text not in log, text
    console = io.StringIO()
    echo = ConsoleEcho(result.log_path, console)
    for line in log.splitlines(keepends=True):
        echo(line)
    console.write(format_summary(summary) + "\n")
    lines = console_lines(console.getvalue())
    for text in (log, console.getvalue()):
        repeated = Counter(line for line in console_lines(text) if line.strip()).most_common(3)
        assert repeated[0][1] <= REPEATS_ALLOWED, repeated
    assert len(lines) < len(console_lines(log)) - 500  # verl's config dump, in the log only
    assert [int(match[1]) for match in map(re.compile(r"\) step:(\d+) - ").search, lines) if match] == [1, 2]
    assert lines[-3].split() == ["log", str(result.log_path), "(all", "of", "verl's", "output)"]


def test_the_quickstart_ends_with_a_png_of_the_curves_it_logged(runs):
    """A PNG beside the metrics, readable by others as the umask says, its path on the summary's last line; every
    panel drawn is one the run logged (no empty "not logged" panels)."""
    import os

    import matplotlib.image

    from verl_ext.cpu.quickstart import format_summary
    from verl_ext.plotting import PANELS, load_runs, panel_series

    result, summary = runs[QUICKSTART_FAMILY], runs["quickstart_summary"]
    png = result.metrics_path.with_suffix(".png")
    assert summary["plot_path"] == str(png)
    assert matplotlib.image.imread(png).shape[1] > 3 * 300
    umask = os.umask(0)
    os.umask(umask)
    assert png.stat().st_mode & 0o777 == 0o666 & ~umask
    (run,) = load_runs([result.metrics_path])
    assert {"reward", "grad_norm", "mismatch"} <= set(summary["plot_panels"])
    assert all(panel_series(run, PANELS[name], 3)[0] for name in summary["plot_panels"])
    assert f"curves (PNG)           {png}" in format_summary(summary).splitlines()[-2]


def test_the_multi_rank_quickstart_sharded_the_actor_and_served_from_two_replicas(runs):
    """`quickstart -- trainer.n_gpus_per_node=2`: verl's FSDP2 engine ran with two ranks (its per-rank
    micro-batches are the CPU profile's, sized for two) and the rollout had a replica per rank."""
    from verl_ext.rollout_events import replica_nodes

    import re

    result = runs[QUICKSTART_FAMILY]
    assert sorted(replica_nodes(result.events)) == [0, 1]
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16" in runs["quickstart_summary"]["command"]
    # two trainer worker processes (Ray prefixes each worker's output with its class and pid)
    assert len(set(re.findall(r"\(WorkerDict pid=(\d+)", result.log_path.read_text()))) == 2


RAY_OF = ["main_ppo's own", "the in-process session's"]


def listeners_of(runs, ray: str) -> list:
    """The processes that listened in the quickstart's tree (its main_ppo child: the driver, its own Ray, the run's
    workers) or in the rest of the background child's (the in-process session's Ray and the run's workers)."""
    quickstart = ray == RAY_OF[0]
    return [listener for listener in runs["listening"] if ("verl.trainer.main_ppo" in listener.under) == quickstart]


def beyond_loopback(listeners) -> dict:
    """{"pid name": the addresses beyond loopback} of each process that listened beyond it."""
    from tests.listening_sockets import LOOPBACK

    return {f"{listener.pid} {listener.name}": sorted(listener.addresses - LOOPBACK) for listener in listeners
            if listener.addresses - LOOPBACK}


@pytest.mark.parametrize("ray", RAY_OF)
def test_every_socket_of_a_cpu_run_listens_on_loopback_only(runs, ray):
    """Ray's default node IP is the machine's network address: every socket of a Ray started with it listens on all
    interfaces (the GCS, the raylet's two servers, the agents, each worker); torch's env:// serves the trainer's
    rendezvous store (rank 0, a WorkerDict) on every interface whatever MASTER_ADDR says. On the CPU backend both
    listen on loopback only: the quickstart's ``main_ppo``, which starts its own Ray with the CPU profile's
    ``ray_kwargs.ray_init`` in a child process, and the in-process session (``CPURaySession``: the lab, the tests,
    the benchmarks), started in a process that imported Ray before the profile's environment was set. Sampled
    every 2 s in the whole process tree while the runs went on (tests/listening_sockets.py); a local cluster's
    nodes: tests/cpu/test_local_cluster.py."""
    listeners = listeners_of(runs, ray)
    names = [listener.name for listener in listeners]
    # its own GCS and raylet (the quickstart's Ray under its main_ppo child), the run's Ray workers, and the trainer's
    # two ranks (rank 0 serves the process group's store)
    assert "gcs_server" in names and "raylet" in names, names
    assert len([name for name in names if name.startswith("ray::")]) >= 2, names
    assert "ray::WorkerDict" in names, names
    outside = beyond_loopback(listeners)
    assert not outside, outside


def test_delayed_sync_at_zero_staleness_is_verls_sync_step_for_step(runs):
    """(m, n) = (1, 0) and verl's own sync trainer, same seed and data: every logged number of every step
    (reward, loss, grad norm, clip fractions, lengths, ...; not the timings and memory) and the checksum of
    the weights of every push are identical, to the bit."""
    from verl_ext.cpu.run_comparison import compare_results

    sync, delayed = runs[QUICKSTART_FAMILY], runs["delayed_sync_1_0"]
    assert [step["staleness/lag"] for step in delayed.steps] == [0.0] * STEPS  # it ran delayed_sync
    comparison = compare_results(sync, delayed, ignore=("staleness/",))  # only delayed_sync logs staleness/*
    assert comparison.equal, comparison.report()
    assert comparison.compared_checksums == STEPS + 1  # versions 0, 1, 2
    assert comparison.compared_values >= STEPS * 40
    # the runs trained: a rerun that generated nothing or never stepped would compare equal too
    assert all(step["actor/grad_norm"] > 0 for step in delayed.steps)


def dumped_rollouts(directory, step: int) -> list[tuple]:
    """The (prompt, response, score) rows verl dumped for 1-based ``step`` (``trainer.rollout_data_dir``), sorted."""
    import json

    with open(directory / f"{step}.jsonl") as file:
        return sorted((row["input"], row["output"], row["score"]) for row in map(json.loads, file))


@pytest.mark.extended
def test_zero_staleness_on_its_own_pool_is_verls_sync_step_for_step(runs):
    """The explorer/trainer split at (m, n) = (1, 0) -- the engine a standalone replica on its own logical GPU,
    the trainer's workers without a rollout, every push through the gloo checkpoint engine -- and verl's own sync
    trainer (colocated, in-process pushes), same seed and data: every logged number of every step, the checksum of
    the weights of every push (versions 0, 1, 2: the engine received over gloo exactly what sync's colocated
    rollout was given) and every generated response are identical, to the bit."""
    from verl_ext import metric_names
    from verl_ext.cpu.run_comparison import compare_results

    sync, split = runs[FIRST_FAMILY], runs["split_1_0"]
    assert [record[metric_names.LAG] for record in split.steps] == [0.0] * STEPS  # it ran delayed_sync
    # only delayed_sync logs staleness/*, only the split the gloo engine's own figures
    comparison = compare_results(sync, split, ignore=("staleness/", "checkpoint_engine/"))
    assert comparison.equal, comparison.report()
    assert comparison.compared_checksums == STEPS + 1
    assert comparison.compared_values >= STEPS * 40
    assert all(step["actor/grad_norm"] > 0 for step in split.steps)  # it trained
    for step in range(1, STEPS + 1):
        assert dumped_rollouts(runs["dumps"] / "split_1_0", step) == dumped_rollouts(runs["dumps"] / "sync", step), step
    # the split's path: one standalone replica that never sleeps, every push a gloo broadcast of the weights
    assert [push["weight_version"] for push in pushes(split)] == [push["weight_version"] for push in pushes(sync)] == [0, 1, 2]
    assert [record["step"] for record in split.steps if record.get(metric_names.GLOO_WEIGHT_BYTES, 0) > 0] == list(
        range(1, STEPS + 1))
    assert not [event for event in split.events if event["event"] in ("sleep", "wake_up", "generate_rejected")]
    assert [event for event in sync.events if event["event"] == "sleep"]  # sync's colocated engine sleeps
    # the weights of version 2 are the actor's: sync's checkpoint of step 2 holds them
    from verl_ext.cpu_runtime.sharded_checkpoint import actor_checkpoint_checksum

    assert pushes(split)[-1]["transfer_checksum"] == actor_checkpoint_checksum(sync.checkpoint_dir / f"global_step_{STEPS}" / "actor")
