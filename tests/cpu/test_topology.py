"""The CPU backend's topology: the user's trainer.nnodes / trainer.n_gpus_per_node size the CPU profile, win over
it in every launcher, and what cannot run is refused in the driver before Ray starts, naming the key."""

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verl_ext.config_values import ConfigError
from verl_ext.cpu.backend import CPUBackend
from verl_ext.cpu.ray_session import CPURaySession
from verl_ext.runs.compose import compose
from verl_ext.runs.outputs import Outputs
from verl_ext.runs.run import Run
from verl_ext.cpu.profile import cpu_overrides, cpu_overrides_for, shell_profile
from verl_ext.cpu_runtime.topology import RAY_ADDRESS_ENV, Topology, check_cpu_topology
from verl_ext.driver_checks import check_run_config
from verl_ext.staleness.config import engine_pool_overrides

# real Ray nodes start here (tens of seconds on two cores, minutes when they are loaded): above pytest.ini's limit
pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
# the rollout engine on its own pool of one logical GPU (the explorer/trainer split), weights over gloo
SPLIT = ("trainer.v1.trainer_mode=delayed_sync", *engine_pool_overrides(1, 1, "gloo"))


def composed(tmp_path, tiny_assets, *overrides):
    return compose(Run("topology", overrides=overrides), CPUBackend(tiny_assets), Outputs(tmp_path)).config()


def test_topology_is_read_from_the_users_overrides_last_value_winning():
    assert Topology.from_overrides(["a=1"]) == Topology(1, 1)
    topology = Topology.from_overrides(["trainer.n_gpus_per_node=8", "trainer.nnodes=2", "trainer.n_gpus_per_node=2"])
    assert (topology.nnodes, topology.n_gpus_per_node, topology.world_size) == (2, 2, 4)
    for bad in ("trainer.n_gpus_per_node=two", "trainer.nnodes=0", "trainer.n_gpus_per_node=-1"):
        key = bad.split("=")[0]
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            Topology.from_overrides([bad])


def test_the_engines_own_pool_is_read_from_the_users_overrides():
    """``hybrid_engine=false``: the engine's logical GPUs are rollout.nnodes x rollout.n_gpus_per_node (verl's
    defaults: 0 nodes, the trainer's GPUs per node); colocated, none."""
    assert Topology.from_overrides(SPLIT) == Topology(1, 1, engine_gpus=1)
    split = Topology.from_overrides([*SPLIT, "trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.n_gpus_per_node=3"])
    assert (split.world_size, split.engine_gpus, split.gpus_per_node, split.rollout_replicas) == (2, 3, 5, 3)
    assert split.logical_cpus_per_node == 16 + 3 + 2 * 3
    assert Topology.from_overrides([*SPLIT, "actor_rollout_ref.hybrid_engine=true"]).engine_gpus == 0
    assert Topology.from_overrides(["actor_rollout_ref.hybrid_engine=false"]).engine_gpus == 0  # rollout.nnodes: 0
    assert Topology(1, 2).rollout_replicas == 2  # colocated: one replica per trainer rank


def test_the_profile_gives_ray_the_engines_logical_gpus(tiny_assets, tmp_path):
    """Composed as a CPU run with the split composes: Ray holds the trainer's GPUs and the engine's, and the
    logical CPUs of verl's bundles for both; the driver's checks accept it."""
    config = composed(tmp_path, tiny_assets, *SPLIT, "trainer.n_gpus_per_node=2")
    ray_init = OmegaConf.to_container(config.ray_kwargs.ray_init, resolve=True)
    assert ray_init["num_gpus"] == 3 and ray_init["num_cpus"] >= 3 * 2 + 2 * 1 + 1
    assert config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu * 2 == (
        config.actor_rollout_ref.actor.ppo_mini_batch_size * config.actor_rollout_ref.rollout.n)
    check_run_config(config)


def test_the_split_on_a_local_cluster_is_refused_naming_the_key(tiny_assets, tmp_path, monkeypatch):
    """A local cluster's nodes have the trainer's logical GPUs only: the engine's replica could never be placed."""
    monkeypatch.setenv(RAY_ADDRESS_ENV, "127.0.0.1:6399")
    config = composed(tmp_path, tiny_assets, *SPLIT, "trainer.nnodes=2")
    with pytest.raises(ConfigError, match=r"trainer\.nnodes=2 is invalid: .* the rollout engine on its own pool"):
        check_cpu_topology(config)


@pytest.mark.parametrize("nnodes, gpus", [(1, 1), (1, 2), (2, 1), (2, 2)])
def test_the_profile_is_sized_for_the_topology(tiny_assets, tmp_path, monkeypatch, nnodes, gpus):
    """Composed with verl's and the recipe's config: logical GPUs and CPUs per node, each rank's share of the
    mini-batch and of the step in one pass, one agent-loop worker per rank; one node starts its own Ray."""
    monkeypatch.setenv(RAY_ADDRESS_ENV, "127.0.0.1:6399")  # what a local cluster publishes
    config = composed(tmp_path, tiny_assets, f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={gpus}")
    world = nnodes * gpus
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node) == (nnodes, gpus)
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert actor.ppo_micro_batch_size_per_gpu * world == actor.ppo_mini_batch_size * rollout.n
    assert rollout.log_prob_micro_batch_size_per_gpu * world == config.data.train_batch_size * rollout.n
    assert rollout.agent.num_workers == world
    ray_init = OmegaConf.to_container(config.ray_kwargs.ray_init, resolve=True)
    if nnodes == 1:
        assert ray_init["address"] == "local" and ray_init["num_gpus"] == gpus
        assert ray_init["num_cpus"] >= 3 * gpus + 1  # verl's bundles take 3 logical CPUs each
    else:
        assert ray_init["address"] == "127.0.0.1:6399" and ray_init["num_cpus"] is None and "num_gpus" not in ray_init
    check_run_config(config)  # and verl-ext's driver checks accept it


def test_the_users_batch_sizes_size_the_micro_batches(tiny_assets, tmp_path):
    config = composed(tmp_path, tiny_assets, "trainer.n_gpus_per_node=2", "data.train_batch_size=4",
                      "actor_rollout_ref.rollout.n=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2")
    assert config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 2  # 2 prompts x 2 / 2 ranks
    assert config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu == 4
    check_run_config(config)


def test_a_world_size_that_does_not_divide_the_batch_is_refused_before_anything_starts(tiny_assets, tmp_path):
    with pytest.raises(ConfigError, match=r"trainer\.nnodes x trainer\.n_gpus_per_node = 1 x 3"):
        composed(tmp_path, tiny_assets, "trainer.n_gpus_per_node=3")


@pytest.mark.parametrize(
    "overrides, key",
    [
        # verl would fail in its workers, after Ray and the engines started
        (("trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32"),
         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
        (("trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32"),
         "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"),
        (("trainer.n_gpus_per_node=4", "actor_rollout_ref.rollout.n=2", "data.train_batch_size=8",
          "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"),
         None),  # 2 x 2 responses per mini-batch, 8 x 2 per step, over 4 ranks: fine
        (("trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.n=2", "data.train_batch_size=8",
          "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1"),
         "actor_rollout_ref.actor.ppo_mini_batch_size"),  # 4 responses per mini-batch over 8 ranks
        # the CPU rollout has one process per replica
        (("actor_rollout_ref.rollout.tensor_model_parallel_size=2",), "actor_rollout_ref.rollout.tensor_model_parallel_size"),
        (("trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=2"),
         "actor_rollout_ref.rollout.tensor_model_parallel_size"),
        # more GPUs than Ray is given (verl: "Total available GPUs ... " after Ray started)
        (("trainer.n_gpus_per_node=2", "+ray_kwargs.ray_init.num_gpus=1"), "ray_kwargs.ray_init.num_gpus"),
        # fewer logical CPUs than verl's bundles ask for (its placement group would wait forever)
        (("trainer.n_gpus_per_node=2", "ray_kwargs.ray_init.num_cpus=6"), "ray_kwargs.ray_init.num_cpus"),
        # several nodes but Ray started in the driver: verl would pack both "nodes" onto one
        (("trainer.nnodes=2",), "trainer.nnodes"),
        (("trainer.nnodes=2", "+ray_kwargs.ray_init.address=local"), "trainer.nnodes"),
        # the engine on its own pool: Ray must hold its logical GPU too (verl's replica would wait for it forever)
        ((*SPLIT, "trainer.n_gpus_per_node=2", "+ray_kwargs.ray_init.num_gpus=2"), "ray_kwargs.ray_init.num_gpus"),
        ((*SPLIT, "ray_kwargs.ray_init.num_cpus=5"), "ray_kwargs.ray_init.num_cpus"),  # 3 + 2 + 1 needed
        ((*SPLIT, "trainer.n_gpus_per_node=2"), None),
    ],
)
def test_what_cannot_run_is_refused_in_the_driver_naming_the_key(tiny_assets, tmp_path, monkeypatch, overrides, key):
    """Through the launcher (the profile sized for the run's keys, which come last) and as a shell user appends
    keys after the profile's array (sized for their topology): the same key is named, before Ray starts."""
    monkeypatch.delenv(RAY_ADDRESS_ENV, raising=False)
    launched = lambda: check_run_config(composed(tmp_path, tiny_assets, *overrides))  # noqa: E731
    topology_only = [o for o in overrides if o.split("=")[0] in ("trainer.nnodes", "trainer.n_gpus_per_node")
                     or o in SPLIT]
    profile = composed(tmp_path, tiny_assets, *topology_only)
    appended = OmegaConf.merge(profile, OmegaConf.from_dotlist([override.lstrip("+") for override in overrides]))
    if key is None:
        launched()
        check_run_config(appended)
        return
    for check in (launched, lambda: check_run_config(appended)):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            check()


def test_the_cpu_rollouts_options_are_checked_in_the_driver(tiny_assets, tmp_path):
    """Its server would fail (or, at max_batch_size=0, spin on empty batches) inside Ray."""
    key = "actor_rollout_ref.rollout.engine_kwargs.cpu"
    check_run_config(composed(tmp_path, tiny_assets, f"+{key}.max_batch_size=8"))
    for option, message in (("max_batch_size=0", "an integer >= 1"), ("max_batch=8", "one of the options")):
        with pytest.raises(ConfigError, match=rf"{key.replace('.', '[.]')}[.]{option} is invalid: .*{message}"):
            check_run_config(composed(tmp_path, tiny_assets, f"+{key}.{option}"))


def test_a_gpu_run_is_not_held_to_the_cpu_rules():
    """The topology checks of a CPU run read trainer.device=cpu; the rollout rule reads rollout.name=cpu."""
    config = OmegaConf.create({
        "trainer": {"device": "cuda", "nnodes": 2, "n_gpus_per_node": 8},
        "ray_kwargs": {"ray_init": {"num_cpus": None}},
        "actor_rollout_ref": {"rollout": {"name": "vllm", "tensor_model_parallel_size": 4}},
    })
    check_cpu_topology(config)


def test_plain_main_ppo_refuses_a_sharded_cpu_rollout_before_ray_starts(tiny_assets, tmp_path):
    """The real entry point, as a user types it with the shell profile: the driver's check stops it."""
    script = (
        f"export PYTHON={sys.executable} VERL_EXT_TINY_ASSETS={tiny_assets}; "
        f"source {REPO}/run_scripts/cpu/profile.sh trainer.n_gpus_per_node=2 && "
        f"{sys.executable} -m verl.trainer.main_ppo --config-path={REPO}/recipe/rec/config --config-name=rec_trainer "
        '"${VERL_EXT_CPU_OVERRIDES[@]}" actor_rollout_ref.rollout.tensor_model_parallel_size=2'
    )
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=2 is invalid" in output
    assert "ray init kwargs" not in output  # run_ppo never started Ray
    # the recipe's hydra block: no outputs/<date>/<time>/ (.hydra/, main_ppo.log) in the folder the user ran it from
    assert list(tmp_path.iterdir()) == []


def test_the_shell_profile_takes_the_topology_as_arguments(tiny_assets):
    """`source profile.sh trainer.n_gpus_per_node=2`: the array is sized for two ranks and repeats the topology,
    so the user's keys win though the array comes after them."""
    script = shell_profile(tiny_assets, ["trainer.n_gpus_per_node=2"]) + 'printf "%s\\n" "${VERL_EXT_CPU_OVERRIDES[@]}"'
    lines = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines == cpu_overrides(tiny_assets, topology=Topology(1, 2))
    assert "trainer.n_gpus_per_node=2" in lines and "+ray_kwargs.ray_init.num_gpus=2" in lines
    assert cpu_overrides_for(tiny_assets, ["trainer.n_gpus_per_node=2"]) == lines


def test_a_session_refuses_a_run_larger_than_its_cluster(tmp_path, tiny_assets):
    session = CPURaySession(tmp_path, tiny_assets, topology=Topology(1, 2))
    session.check_fits(Run("fits", overrides=("trainer.n_gpus_per_node=2",)))
    session.check_fits(Run("smaller"))
    with pytest.raises(ValueError, match="trainer.nnodes=2"):
        session.check_fits(Run("two_nodes", overrides=("trainer.nnodes=2",)))
    with pytest.raises(ValueError, match="trainer.n_gpus_per_node=4"):
        session.check_fits(Run("four", overrides=("trainer.n_gpus_per_node=4",)))
    # a run whose engine has its own logical GPU needs a session that counts it
    with pytest.raises(ValueError, match="1 engine GPU"):
        session.check_fits(Run("split", overrides=(*SPLIT, "trainer.n_gpus_per_node=2")))
    split_session = CPURaySession(tmp_path, tiny_assets, topology=Topology(1, 2, engine_gpus=1))
    split_session.check_fits(Run("split", overrides=(*SPLIT, "trainer.n_gpus_per_node=2")))
    split_session.check_fits(Run("colocated", overrides=("trainer.n_gpus_per_node=2",)))
    with pytest.raises(ValueError, match="2 engine GPU"):
        split_session.check_fits(Run("two_engines", overrides=(*SPLIT, "trainer.n_gpus_per_node=2",
                                                                   "actor_rollout_ref.rollout.n_gpus_per_node=2")))


def test_quickstart_refuses_a_topology_it_cannot_size_before_anything_starts(tmp_path, capsys):
    from verl_ext.cpu import quickstart

    status = quickstart.main(["--steps", "1", "--out", str(tmp_path / "out"), "--", "trainer.n_gpus_per_node=3"])
    assert status == 2
    assert "1 x 3 = 3 trainer ranks" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # no run folder: nothing started


def test_the_cpu_smoke_keeps_the_users_topology_not_the_gpu_default(tmp_path):
    """Run scripts append the CPU profile after the user's overrides (so a smoke run stays small): it repeats
    the topology the command line sets and is sized for it; without one it is world size 1, not the
    N_GPUS_PER_NODE=8 a GPU run defaults to."""
    from tests.run_scripts.scripts import override_value, planned_runs

    default, = planned_runs(tmp_path, "run", "gsm8k", "rec_oneside_nois", VERL_EXT_CPU_SMOKE="1")
    assert override_value(default.main_ppo_args, "trainer.n_gpus_per_node") == "1"
    two, = planned_runs(tmp_path, "run", "gsm8k", "rec_oneside_nois", "trainer.n_gpus_per_node=2", VERL_EXT_CPU_SMOKE="1")
    argv = two.main_ppo_args
    assert override_value(argv, "trainer.n_gpus_per_node") == "2"
    assert override_value(argv, "ray_kwargs.ray_init.num_gpus") == "2"
    assert override_value(argv, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == "16"  # 8 x 4 / 2


def test_a_two_node_cpu_smoke_runs_inside_a_local_cluster_that_is_gone_afterwards(tmp_path):
    """The experiments launcher starts a two-node cluster around such a run and gives main_ppo the variables
    that join it; main_ppo itself is replaced by a recorder (it would take minutes), the cluster is real."""
    from tests.background_runs import ahead_of_the_background_runs
    from tests.run_scripts.scripts import script_environment
    from verl_ext.cpu.local_cluster import cluster_processes, processes_with_variable
    from verl_ext.cpu_runtime.topology import RAY_ADDRESS_ENV
    from verl_ext.experiments.__main__ import main
    from verl_ext.experiments.modes import Tools

    seen = []

    def this_clusters(token):
        """The local-cluster processes that carry this cluster's token (another test's cluster, started
        meanwhile by a background run, carries its own)."""
        return set(cluster_processes()) & set(processes_with_variable("RAY_AUTH_TOKEN", token))

    def measure(argv, env, log_path, metrics_path=None, echo=False, timeout=None, also_measure=None):
        from verl_ext.runs.monitor import RunMeasurements

        seen.append((argv, env, this_clusters(env["RAY_AUTH_TOKEN"])))
        return RunMeasurements(0, 0.0, 0, 0, 0.0, None, None)

    environ = script_environment(tmp_path, VERL_EXT_CPU_SMOKE="1", VERL_EXT_TINY_ASSETS=str(tmp_path / "tiny"))
    with ahead_of_the_background_runs():  # the nodes' start-up, at Ray's own 30-s limit beside the suite's runs
        status = main(["run", "gsm8k", "rec_oneside_nois", "trainer.nnodes=2"], environ,
                      Tools(measure=measure, count_gpus=lambda: 0, environ=environ))
    assert status == 0
    (argv, env, cluster), = seen
    assert "trainer.nnodes=2" in argv and cluster  # the cluster was up while main_ppo ran
    assert env[RAY_ADDRESS_ENV].startswith("127.0.0.1:") and env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN"]
    assert "+ray_kwargs.ray_init.address=${oc.env:VERL_EXT_CPU_RAY_ADDRESS,local}" in argv
    assert not this_clusters(env["RAY_AUTH_TOKEN"])  # and stopped when it ended


def test_a_world_size_that_cannot_fit_in_memory_is_refused_naming_the_key():
    from verl_ext.cpu_runtime.topology import check_memory

    check_memory(Topology(1, 2), total_bytes=24 * 2**30)
    with pytest.raises(ConfigError, match=r"trainer\.n_gpus_per_node=16 is invalid: allowed values are a world size of at most 13"):
        check_memory(Topology(1, 16), total_bytes=24 * 2**30)
    with pytest.raises(ConfigError, match=r"trainer\.nnodes x trainer\.n_gpus_per_node='2 x 8'"):
        check_memory(Topology(2, 8), total_bytes=24 * 2**30)
