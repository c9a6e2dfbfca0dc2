"""The GPU plan (verl_ext/gpu/plan.py), on CPU: its two runs compose and pass the driver's checks on the GPU and
the CPU backend; the budget, priority and go-on logic (a stand-in runs each step: the plan's own code is what is
tested, with a clock that advances by each step's time); the command's refusals and its stop without a GPU.
The rehearsal of the real steps on the CPU backend is a documented command (docs/gpu.md), not part of the suite."""

import json

import pytest

from verl_ext.gpu import plan
from verl_ext.gpu.device import gpu_unavailable_reason
from verl_ext.gpu.plan import BLOCKED, CUT, FAILED, LOSSES, MAIN, PASSED, PENDING, RESUMED, STEPS, Outcome


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class StandInSteps:
    """Runs nothing: each step 'takes' its given seconds on the clock and ends with the given status."""

    def __init__(self, clock: Clock, took: dict[str, float], statuses: dict[str, str] | None = None):
        self.clock, self.took, self.statuses = clock, took, statuses or {}
        self.calls: list[tuple[str, float]] = []

    def __call__(self, step, seconds):
        self.calls.append((step.name, seconds))
        took = self.took[step.name]
        if took > seconds:  # the real executor's run is killed at the budget
            self.clock.now += seconds
            return Outcome(CUT, error="stopped at the budget")
        self.clock.now += took
        return Outcome(self.statuses.get(step.name, PASSED), [{"name": "c", "ok": True, "detail": ""}])


ESTIMATES = {step.name: step.estimate["gpu"] for step in STEPS}


def call(state, budget, steps_runner, clock):
    saves = []
    ended = plan.run_plan(STEPS, state, "gpu", budget, steps_runner, lambda: saves.append(json.dumps(state)), clock,
                          say=lambda line: None)
    return ended, saves


def test_one_call_runs_in_priority_order_and_leaves_what_does_not_fit_for_the_next():
    clock, state = Clock(), {}
    runner = StandInSteps(clock, took=ESTIMATES)
    budget = ESTIMATES[MAIN] + ESTIMATES[RESUMED] + plan.MARGIN_SECONDS + 20  # both runs, not the losses
    ended, saves = call(state, budget, runner, clock)
    assert [name for name, _ in runner.calls] == [MAIN, RESUMED]
    assert {name: record["status"] for name, record in state.items()} == {MAIN: PASSED, RESUMED: PASSED, LOSSES: PENDING}
    assert "losses" in ended and clock.now <= budget - plan.MARGIN_SECONDS  # stopped before the budget
    assert plan.exit_status(state, STEPS) == 3 and len(saves) >= 2  # the summary after each step
    # the next call (the node still warm) goes on: only the losses run
    runner = StandInSteps(clock, took=ESTIMATES)
    ended, _ = call(state, 120, runner, clock)
    assert [name for name, _ in runner.calls] == [LOSSES] and ended == "done"
    assert plan.exit_status(state, STEPS) == 0


def test_a_shorter_later_step_runs_when_the_next_one_does_not_fit():
    clock, state = Clock(), {}
    runner = StandInSteps(clock, took=ESTIMATES)
    ended, _ = call(state, ESTIMATES[MAIN] + ESTIMATES[LOSSES] + plan.MARGIN_SECONDS + 5, runner, clock)
    assert [name for name, _ in runner.calls] == [MAIN, LOSSES]
    assert state[RESUMED]["status"] == PENDING and "resumed" in ended


def test_a_step_never_gets_more_than_the_budget_and_a_cut_one_runs_again():
    clock, state = Clock(), {}
    runner = StandInSteps(clock, took={**ESTIMATES, MAIN: 10_000})  # overruns its estimate
    budget = 400
    ended, _ = call(state, budget, runner, clock)
    assert runner.calls == [(MAIN, budget - plan.MARGIN_SECONDS)] and clock.now <= budget
    assert state[MAIN]["status"] == CUT and "stopped at the budget" in ended
    runner = StandInSteps(clock, took=ESTIMATES)
    call(state, 900, runner, clock)
    assert [name for name, _ in runner.calls] == [MAIN, RESUMED, LOSSES]


def test_a_failed_run_blocks_what_needs_it_and_the_rest_goes_on():
    clock, state = Clock(), {}
    runner = StandInSteps(clock, took=ESTIMATES, statuses={MAIN: FAILED})
    call(state, 900, runner, clock)
    assert [name for name, _ in runner.calls] == [MAIN, LOSSES]
    assert state[RESUMED]["status"] == BLOCKED and "needs main" in state[RESUMED]["error"]
    assert plan.exit_status(state, STEPS) == 1
    runner = StandInSteps(clock, took=ESTIMATES)
    call(state, 900, runner, clock)
    assert runner.calls == []  # a failed step is not run again by the next call


def test_the_plans_runs_compose_and_pass_the_drivers_checks_on_both_backends(tiny_gpu_assets, tiny_assets, tmp_path):
    from verl_ext import preflight
    from verl_ext.cpu.backend import CPUBackend
    from verl_ext.gpu.backend import GPU_PROJECT, GPUBackend
    from verl_ext.runs.compose import compose
    from verl_ext.runs.launch import Outputs

    from dataclasses import replace

    runs = plan.plan_runs(tmp_path / "checkpoints")
    backends = {"gpu": (GPUBackend(tiny_gpu_assets), Outputs(tmp_path, project=GPU_PROJECT)),
                "cpu": (CPUBackend(tiny_assets), Outputs(tmp_path))}
    # the resumed run reads the checkpoint the main run writes first: before that, the driver refuses it for that
    # folder alone (checked below); everything else of it is checked with the resume left out
    resume = ("trainer.resume_mode=resume_path", f"trainer.resume_from_path={tmp_path / 'checkpoints' / f'global_step_{plan.RESUME_AT}'}")
    assert set(resume) <= set(runs["resumed"].overrides)
    before_main = {**runs, "resumed": replace(runs["resumed"], overrides=tuple(
        item for item in runs["resumed"].overrides if item not in resume))}
    results = preflight.preflight_many([
        (f"{name}-{where}", compose(run, backend, outputs))
        for where, (backend, outputs) in backends.items() for name, run in before_main.items()])
    assert all(result.ok for result in results), {result.name: result.error for result in results if not result.ok}
    [refused] = preflight.preflight_many([("resumed-gpu", compose(runs["resumed"], *backends["gpu"]))])
    assert not refused.ok and f"global_step_{plan.RESUME_AT} is not a folder" in refused.error, refused.error
    settings = {result.name: result.settings for result in results}
    main_gpu = settings["main-gpu"]
    assert main_gpu["actor_rollout_ref.rollout.name"] == "vllm" and main_gpu["trainer.v1.trainer_mode"] == "delayed_sync"
    assert main_gpu["trainer.v1.delayed_sync.zero_variance_masking"] is True
    assert settings["main-cpu"]["actor_rollout_ref.rollout.name"] == "cpu"
    assert settings["resumed-gpu"]["actor_rollout_ref.actor.policy_loss.loss_mode"] == "opmd"
    main_arguments = compose(runs["main"], *backends["gpu"]).arguments
    for override in ("trainer.v1.delayed_sync.overlap=true", "actor_rollout_ref.rollout.free_cache_engine=false",
                     f"trainer.save_freq={plan.SAVE_FREQ}", f"trainer.test_freq={plan.TEST_FREQ}",
                     "trainer.v1.delayed_sync.mismatch_forward_pass=true"):
        assert override in main_arguments, override
    assert any(item.endswith(f"global_step_{plan.RESUME_AT}") for item in compose(runs["resumed"], *backends["gpu"]).arguments)


def test_the_command_refuses_a_folder_it_did_not_write_and_a_summary_it_cannot_read(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("keep\n")
    assert plan.main(["--out", str(folder), "--backend", "cpu", "--dry-run"]) == 2
    assert "holds no plan_summary.json" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    for content, what in ((b"\xff", "not UTF-8"), (b"[]", "not a plan summary"),
                          (b'{"backend": "cpu", "steps": {"main": {"status": "done"}}}', "has no status among")):
        (bad / plan.SUMMARY).write_bytes(content)
        assert plan.main(["--out", str(bad), "--backend", "cpu", "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert what in err and "Traceback" not in err
    (bad / plan.SUMMARY).write_text(json.dumps({"backend": "cpu", "steps": {"main": {"status": "passed"}}}))
    assert plan.main(["--out", str(bad), "--backend", "gpu", "--dry-run"]) == 2
    assert "a plan of the cpu backend" in capsys.readouterr().err
    assert plan.main(["--out", str(bad), "--backend", "cpu", "--dry-run"]) == 0
    assert "main     ~ 180 s  passed" in capsys.readouterr().out
    assert (folder / "thesis.tex").read_text() == "keep\n"


@pytest.mark.parametrize("budget", ["nan", "inf", "-5", "10", str(10**9)])
def test_the_budget_is_bounded(tmp_path, capsys, budget):
    with pytest.raises(SystemExit) as exit_info:
        plan.main(["--out", str(tmp_path / "new"), "--budget", budget])
    assert exit_info.value.code == 2 and "expected seconds" in capsys.readouterr().err


@pytest.mark.skipif(gpu_unavailable_reason() is None, reason="this machine has a CUDA GPU and vLLM")
def test_without_a_gpu_the_plan_stops_at_once_saying_why(tmp_path, capsys, monkeypatch):
    from verl_ext.tiny import assets

    # at once: before its first expensive step (the assets' build), whatever the machine's load
    monkeypatch.setattr(assets, "build_tiny_assets", lambda *args, **kwargs: pytest.fail("the plan built assets"))
    assert plan.main(["--out", str(tmp_path / "plan")]) == 2
    err = capsys.readouterr().err
    assert "needs a CUDA GPU and vLLM: no CUDA GPU is visible" in err and "--backend cpu" in err
    assert not (tmp_path / "plan").exists()
