"""A bad run is refused by the launching process itself, as verl's driver would refuse it, before anything is written
or started, with the key and what is allowed on the last lines; and on the platform the run will use (a CPU run on
verl's CPU platform: every CPU-topology check applies). Ray's start and the child process are tripwires here:
reaching either fails the test."""

import psutil
import pytest

from tests.run_scripts.scripts import planned_runs, script_environment
from verl_ext import preflight
from verl_ext.staleness.config import engine_pool_overrides

SPLIT = ("trainer.v1.trainer_mode=delayed_sync", *engine_pool_overrides(1, 1, "gloo"))
# (the quickstart's overrides, what the last line of the refusal names)
REFUSED = {
    "unknown loss": (("actor_rollout_ref.actor.policy_loss.loss_mode=nope",),
                     "actor_rollout_ref.actor.policy_loss.loss_mode='nope' is not a registered policy loss. Allowed: ["),
    "a loss key to a loss that does not read it": (("actor_rollout_ref.actor.policy_loss.m2_threshold=0.1",),
                                                   "actor_rollout_ref.actor.policy_loss.m2_threshold"),
    "the split with a cache-freeing engine": ((*SPLIT, "actor_rollout_ref.rollout.free_cache_engine=true"),
                                              "actor_rollout_ref.rollout.free_cache_engine=True is invalid: allowed values are false"),
}


class Tripwire(Exception):
    pass


@pytest.fixture
def nothing_starts(monkeypatch):
    """Ray's start and the launcher's child process raise if reached."""
    import ray

    from verl_ext.runs.launch import ChildProcess

    def tripwire(*args, **kwargs):
        raise Tripwire("reached")

    monkeypatch.setattr(ray, "init", tripwire)
    monkeypatch.setattr(ChildProcess, "execute", tripwire)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_the_quickstart_refuses_a_bad_override_before_anything_is_written_or_started(tmp_path, tiny_assets, capsys,
                                                                                     nothing_starts, case):
    from verl_ext.cpu import quickstart

    overrides, message = REFUSED[case]
    out = tmp_path / "out"
    status = quickstart.main(["--steps", "2", "--out", str(out), "--assets", str(tiny_assets), "--", *overrides])
    assert status == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in last, last
    assert not out.exists()


def test_the_gpu_smoke_on_the_cpu_backend_refuses_as_the_quickstart_does(tmp_path, tiny_assets, capsys, nothing_starts):
    from verl_ext.gpu import smoke

    overrides, message = REFUSED["unknown loss"]
    status = smoke.main(["--backend", "cpu", "--steps", "2", "--out", str(tmp_path / "out"), "--assets", str(tiny_assets),
                         "--", *overrides])
    assert status == 2 and message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_a_cpu_smoke_is_checked_on_the_cpu_platform_as_its_driver_will_run_it(tmp_path):
    """trainer.device stays cpu, so the CPU-topology checks apply: two nodes with the engine on its own pool, and more
    trainer ranks than this machine's memory holds, are refused by the dry run as by the real driver; two nodes
    colocated pass (the launcher starts their local cluster)."""
    most = int((psutil.virtual_memory().total / 2**30 - 5) / 1.5) + 1  # verl_ext.cpu_runtime.topology.check_memory's bound
    too_many = next(ranks for ranks in (2, 4, 8, 16, 32) if ranks > most) if most < 32 else None
    if too_many is None:
        pytest.skip("this machine holds 32 trainer ranks (the most the CPU smoke's batch divides over)")
    plain, two_nodes, split_two_nodes, many = (
        planned_runs(tmp_path, "run", "gsm8k", "rec_oneside_nois", *extra, VERL_EXT_CPU_SMOKE="1", **env)[0]
        for extra, env in (((), {}), (("trainer.nnodes=2",), {}), (("trainer.nnodes=2",), {"ENGINE_GPUS_PER_NODE": "1"}),
                           ((f"trainer.n_gpus_per_node={too_many}",), {})))
    with preflight.memoised_config_files():
        results = {name: preflight.check_run(cell.title, cell.composed)
                   for name, cell in (("plain", plain), ("two nodes", two_nodes), ("split", split_two_nodes), ("many", many))}
    assert results["plain"].ok and results["plain"].settings["trainer.device"] == "cpu", results["plain"].error
    assert results["two nodes"].ok, results["two nodes"].error
    assert not results["split"].ok
    assert "trainer.nnodes=2 is invalid: allowed values are 1 on a CPU run with the rollout engine on its own pool" in results["split"].error
    assert not results["many"].ok and f"trainer.n_gpus_per_node={too_many} is invalid" in results["many"].error
    from verl.plugin.platform import platform_manager

    assert platform_manager._current_platform is None or platform_manager._current_platform.device_name != "cpu"


def test_the_cpu_smoke_checks_every_run_before_the_first_trains(tmp_path, capsys):
    """A grid whose second run is bad: nothing is started, not even the first run (the real mode's order)."""
    from verl_ext.experiments.__main__ import main
    from verl_ext.experiments.modes import Tools

    def measure(*args, **kwargs):
        raise Tripwire("a run was started")

    environ = script_environment(tmp_path, VERL_EXT_CPU_SMOKE="1", VERL_EXT_TINY_ASSETS=str(tmp_path / "tiny"),
                                 ALGORITHMS="m2po,grpo", SETTINGS="offline")
    status = main(["figure", "gsm8k-high-staleness", "actor_rollout_ref.actor.policy_loss.m2_threshold=0.1"], environ,
                  Tools(measure=measure, count_gpus=lambda: 0, environ=environ))
    assert status == 2
    err = capsys.readouterr().err
    assert "preflight: 1 of 2 run configuration(s) passed; failed: gsm8k-high-staleness/grpo-offline (cpu smoke)" in err
    assert not (tmp_path / "outputs" / "cpu-smoke" / "metrics").exists() and not (tmp_path / "tiny").exists()
