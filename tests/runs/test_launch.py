"""The one launcher: the layers of main_ppo's overrides (a backend's under and over the run's, names, paths last),
where a run writes in each layout, what an earlier run of the same name leaves (kept, never lost), the child's
environment and the result; the CPU and GPU backends' forms. The child process is replaced where it would be
main_ppo (minutes); a real preset run the driver would refuse is refused by the launcher's own check, in this
process, before a child starts or a file is written."""

import sys

import pytest

from tests.recipe_config import MINIMAL_RUN_OVERRIDES
from verl_ext.algorithms.presets import parse_algorithm
from verl_ext.runs.compose import compose
from verl_ext.runs.launch import (
    HARNESS_DEFAULTS,
    LOGGER_PATH_KEY,
    SMOKE_CAPS,
    Backend,
    Outputs,
    RunRefused,
    Surroundings,
    launch,
)
from verl_ext.runs.monitor import RunMeasurements
from verl_ext.runs.outputs import prepare_run_folder
from verl_ext.overrides import override_key
from verl_ext.runs.run import Run
from verl_ext.staleness.setting import Setting

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)


class Layered(Backend):
    """A backend that marks its layers, and puts a variable, a removal and a process list around the child."""

    def environment(self):
        return {"LAYERED": "1", "DROPPED": None}

    def before(self, run, paths):
        return ["layer.before=1", "shared.key=before", "trainer.experiment_name=from_before"]

    def after(self, run):
        return ["layer.after=1", "shared.after=after"]

    def around(self, arguments, paths):
        import contextlib

        @contextlib.contextmanager
        def surround():
            surroundings = Surroundings(environment={"AROUND": "yes"}, also_measure=lambda: [1])
            yield surroundings
            surroundings.peak_gpu_mib = 42.0

        return surround()


class Checkable(Layered):
    """Layered, with layers of real config keys: its runs pass the driver's checks."""

    def before(self, run, paths):
        return ["trainer.test_freq=5", "trainer.save_freq=-1", "trainer.experiment_name=from_before"]

    def after(self, run):
        return ["trainer.val_before_train=False"]


def test_the_overrides_are_the_backends_then_names_then_the_runs_then_the_backends_then_the_paths(tmp_path):
    run = Run("r", overrides=("shared.key=run", "shared.after=run", "trainer.default_local_dir=/elsewhere"), steps=3,
              project="proj")
    composed = compose(run, Layered(), Outputs(tmp_path))
    overrides = list(composed.overrides)
    value = {override_key(item): item.split("=", 1)[1] for item in overrides}
    assert value["shared.key"] == "run"  # the run's overrides win over what the backend puts under them
    assert value["shared.after"] == "after"  # what the backend puts over them wins
    assert (value["trainer.project_name"], value["trainer.experiment_name"]) == ("proj", "r")
    assert value["trainer.total_training_steps"] == "3"
    paths = Outputs(tmp_path).paths(run)
    assert value["trainer.default_local_dir"] == str(paths.checkpoints)  # the paths come last
    assert value[override_key(LOGGER_PATH_KEY)] == str(paths.metrics) and overrides[-1].startswith(LOGGER_PATH_KEY)
    assert composed.paths == paths  # computed once, by the composition
    arguments = composed.arguments
    assert arguments[:2] == [f"--config-path={run.resolved_config_dir()}", f"--config-name={run.config_name}"]
    assert arguments[2:] == overrides


def test_where_a_run_writes_in_each_layout(tmp_path):
    run = Run("a-run")
    per_run = Outputs(tmp_path).paths(run)
    root = tmp_path.resolve()
    assert per_run.metrics == root / "verl_ext_cpu" / "a-run.jsonl"
    assert (per_run.run_dir, per_run.log) == (root / "verl_ext_cpu" / "a-run", root / "verl_ext_cpu" / "a-run" / "main_ppo.log")
    assert per_run.checkpoints == per_run.run_dir / "checkpoints" and per_run.events == per_run.run_dir / "rollout_events.jsonl"
    assert Outputs(tmp_path, project="verl_ext_gpu").paths(run).metrics == root / "verl_ext_gpu" / "a-run.jsonl"
    scripts = Outputs(tmp_path, layout="scripts").paths(Run("a-run", project="fig"))
    assert scripts.metrics == root / "metrics" / "fig" / "a-run.jsonl"
    assert scripts.description == root / "metrics" / "fig" / "a-run.run.json"
    assert scripts.checkpoints == root / "checkpoints" / "fig" / "a-run"
    assert scripts.log == root / "logs" / "fig" / "a-run.log" and scripts.keeps_earlier_metrics
    resumed = Outputs(tmp_path).paths(Run("b", checkpoint_dir=tmp_path / "shared"))
    assert resumed.checkpoints == (tmp_path / "shared").resolve()
    with pytest.raises(ValueError, match="layout 'flat'; allowed: per_run, scripts"):
        Outputs(tmp_path, layout="flat")


def test_an_earlier_run_of_the_same_name_is_kept_aside_or_as_a_part(tmp_path):
    harness = Outputs(tmp_path).paths(Run("x"))
    harness.run_dir.mkdir(parents=True)
    harness.metrics.write_text('{"step": 1}\n')
    harness.events.write_text('{"event": "sleep"}\n')
    summary = tmp_path / "summary.json"
    summary.write_text("{}\n")
    kept = prepare_run_folder("x", harness, keep_with_run=(summary,))
    assert not harness.metrics.exists() and not harness.events.exists()  # the harness reads back this run's only
    assert kept.folder == harness.run_dir / "earlier" / "1" and not summary.exists()  # kept whole, with its summary
    assert (kept.folder / "x.jsonl").read_text() == '{"step": 1}\n'
    assert (kept.folder / "rollout_events.jsonl").read_text() == '{"event": "sleep"}\n'
    assert (kept.folder / "summary.json").read_text() == "{}\n"
    harness.metrics.write_text('{"step": 2}\n')
    assert prepare_run_folder("x", harness).folder == harness.run_dir / "earlier" / "2"  # the first never replaced
    assert prepare_run_folder("x", harness) is None  # nothing earlier

    scripts = Outputs(tmp_path, layout="scripts").paths(Run("x", project="p"))
    assert prepare_run_folder("x", scripts) is None  # nothing earlier
    for number in (1, 2):
        scripts.metrics.write_text(f'{{"step": {number}}}\n')
        scripts.log.write_text(f"log {number}\n")
        assert prepare_run_folder("x", scripts).part == number
        assert scripts.metrics.with_name(f"x.part{number}.jsonl").read_text() == f'{{"step": {number}}}\n'
        assert scripts.log.with_name(f"x.part{number}.log").read_text() == f"log {number}\n"
        assert not scripts.metrics.exists() and not scripts.log.exists()


@pytest.mark.parametrize("linked", ["log", "metrics", "summary"])
def test_a_run_file_that_is_a_link_is_refused_and_nothing_moves(tmp_path, linked):
    """Never written through, never moved: someone else's file behind a link stays as it was."""
    paths = Outputs(tmp_path).paths(Run("x"))
    paths.run_dir.mkdir(parents=True)
    paths.metrics.write_text('{"step": 1}\n')
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("not verl-ext's\n")
    summary = tmp_path / "summary.json"
    target = {"log": paths.log, "metrics": paths.metrics, "summary": summary}[linked]
    target.unlink(missing_ok=True)
    target.symlink_to(theirs)
    with pytest.raises(RunRefused, match=f"{target} is a symbolic link"):
        prepare_run_folder("x", paths, keep_with_run=(summary,))
    assert theirs.read_text() == "not verl-ext's\n" and target.is_symlink()
    assert not (paths.run_dir / "earlier").exists()


def test_the_child_log_is_never_written_through_a_link(tmp_path):
    from verl_ext.runs.monitor import run_and_measure

    theirs = tmp_path / "theirs.txt"
    theirs.write_text("not verl-ext's\n")
    log = tmp_path / "main_ppo.log"
    log.symlink_to(theirs)
    with pytest.raises(OSError):
        run_and_measure([sys.executable, "-c", "print('hello')"], {}, log)
    assert theirs.read_text() == "not verl-ext's\n"


def test_launch_starts_main_ppo_with_the_backends_environment_and_reports_its_status(tmp_path, capsys):
    import signal

    from verl_ext.runs.monitor import _raise_keyboard_interrupt

    seen = {}
    handler_before = signal.getsignal(signal.SIGTERM)

    def measure(command, env, log_path, metrics_path=None, echo=False, timeout=None, also_measure=None):
        seen.update(command=command, env=env, log=log_path, metrics=metrics_path, echo=echo, timeout=timeout,
                    also=also_measure(), sigterm=signal.getsignal(signal.SIGTERM))
        return RunMeasurements(5, 1.0, 0, 0, 0.0, None, None)

    run = Run("r", steps=2, overrides=MINIMAL_RUN_OVERRIDES)  # checked for real, in this process
    outputs = Outputs(tmp_path)
    result = launch(run, Checkable(), outputs, echo=True, announce=True, timeout=9,
                    environ={"DROPPED": "x", "KEPT": "y"}, measure=measure)
    assert seen["command"] == [sys.executable, "-m", "verl.trainer.main_ppo", *compose(run, Checkable(), outputs).arguments]
    assert result.command == tuple(seen["command"])
    assert f"[verl-ext] running verl's trainer:\n  {sys.executable} -m verl.trainer.main_ppo" in capsys.readouterr().out
    # while the child runs SIGTERM stops it as Ctrl-C does; the caller's handler comes back after
    assert seen["sigterm"] is _raise_keyboard_interrupt and signal.getsignal(signal.SIGTERM) is handler_before
    env = seen["env"]
    assert (env["LAYERED"], env["AROUND"], env["KEPT"], env["PYTHONUNBUFFERED"]) == ("1", "yes", "y", "1")
    assert "DROPPED" not in env  # a variable the backend unsets is gone, whatever the caller's environment held
    paths = outputs.paths(run)
    assert env["VERL_FILE_LOGGER_PATH"] == str(paths.metrics) == str(seen["metrics"])
    assert (seen["log"], seen["echo"], seen["timeout"], seen["also"]) == (paths.log, True, 9, [1])
    assert not result.ok and result.error == "main_ppo exited with status 5"
    assert result.peak_gpu_mib == 42.0 and result.log_path == paths.log and result.kept_part is None
    assert result.overrides == compose(run, Checkable(), outputs).overrides
    assert result.steps == [] and result.events == []
    with pytest.raises(RuntimeError, match=f"run 'r' failed: main_ppo exited with status 5; log: {paths.log}"):
        result.raise_for_error()


def test_the_cpu_backend_puts_its_profile_under_a_cpu_run_and_over_a_run_scripts_smoke(tmp_path):
    from verl_ext.checkpoint_backends import CPU_BACKEND
    from verl_ext.cpu.backend import EVENT_LOG_KEY, CPUBackend
    from verl_ext.cpu.profile import cpu_environment, cpu_overrides, cpu_overrides_for
    from verl_ext.cpu_runtime.topology import Topology
    from verl_ext.staleness.config import engine_pool_overrides

    assets = tmp_path / "assets"
    run = Run("two_ranks", overrides=("trainer.n_gpus_per_node=2", "trainer.save_freq=2"))
    harness = CPUBackend(assets)
    paths = Outputs(tmp_path).paths(run)
    assert harness.environment() == cpu_environment() and harness.after(run) == []
    before = harness.before(run, paths)
    assert before[: len(cpu_overrides_for(assets, run.overrides))] == cpu_overrides_for(assets, run.overrides)
    assert [item for item in HARNESS_DEFAULTS if item in before] == list(HARNESS_DEFAULTS)
    assert f"{EVENT_LOG_KEY}={paths.events}" in before
    final = compose(run, harness, Outputs(tmp_path)).overrides
    assert "trainer.save_freq=2" in final and "trainer.save_freq=-1" not in final  # the run's own wins

    smoke = CPUBackend(assets, smoke=True, split=True)
    assert smoke.before(run, paths) == []
    split = engine_pool_overrides(1, 1, CPU_BACKEND)
    topology = Topology.from_overrides([*run.overrides, *split])
    assert smoke.after(run) == [*cpu_overrides(assets, topology=topology), *split, *SMOKE_CAPS]
    assert "trainer.save_freq=-1" in compose(run, smoke, Outputs(tmp_path)).overrides  # the smoke's caps win


def test_the_gpu_backend_unsets_a_cpu_platform_and_has_the_same_two_forms(tmp_path):
    from verl_ext.gpu.backend import GPUBackend
    from verl_ext.gpu.profile import gpu_environment, gpu_overrides, gpu_smoke_overrides

    assets = tmp_path / "tiny-gpu"
    run = Run("g")
    paths = Outputs(tmp_path).paths(run)
    harness, smoke = GPUBackend(assets), GPUBackend(assets, smoke=True)
    assert harness.environment() == {**gpu_environment(), "VERL_PLATFORM": None}
    assert harness.before(run, paths) == [*gpu_overrides(assets), *HARNESS_DEFAULTS] and harness.after(run) == []
    assert smoke.before(run, paths) == [] and smoke.after(run) == [*gpu_smoke_overrides(assets), *SMOKE_CAPS]


def test_a_run_the_driver_would_refuse_is_refused_before_a_child_starts_or_a_file_is_written(tmp_path, tiny_assets):
    """The whole path, for real: a preset's run on the CPU backend whose batch does not divide (the driver refuses
    it before Ray starts): the launcher's own check refuses it in this process, naming the key, with no child
    started and nothing written."""
    from verl_ext.cpu.backend import CPUBackend

    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started")

    run = Run.from_preset("refused", parse_algorithm("rec_oneside_nois"), Setting(3, 1),
                          overrides=("actor_rollout_ref.actor.ppo_mini_batch_size=3",), steps=2)
    with pytest.raises(RunRefused) as refused:
        launch(run, CPUBackend(tiny_assets), Outputs(tmp_path), timeout=300, measure=no_child)
    lines = str(refused.value).splitlines()
    assert "data.train_batch_size=8 is invalid: allowed values are a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=3" in lines[-1]
    assert list(tmp_path.iterdir()) == []  # not even the project's folder
