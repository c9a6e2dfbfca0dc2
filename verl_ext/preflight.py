"""The dry run: a run's config composed and checked as ``main_ppo``'s driver checks it, and summarised, with no GPU.

``VERL_EXT_DRY_RUN=1 bash run_scripts/...`` checks every run of the script in one process (the run scripts' modes,
:mod:`verl_ext.experiments.modes`, through :func:`report_runs`); the lab checks its runs the same way before Ray
starts. A run is composed by the one composition (:mod:`verl_ext.runs.compose`: the run, its backend and outputs ->
the overrides ``main_ppo`` is given) and checked by it, on the platform the run will use (a CPU-backend run on verl's
CPU platform): Hydra composes the config, then ``auto_set_device`` and the ``validate_config`` ``main_ppo``'s driver
calls before Ray starts, which verl-ext's plugin joins to its own checks (:mod:`verl_ext.driver_checks`: batch
arithmetic, topology, the ``trainer.v1.delayed_sync`` block and its mode's requirements, the loss keys,
``algorithm.red_drop_seed``, every interpolation resolved, the trainer mode looked up in verl's registry, the custom
reward function loaded). Then it prints the settings that matter. Nothing needs a GPU, the model or the data files.

One run given as ``main_ppo``'s arguments, from the shell, is parsed and checked by the same composition
(:func:`verl_ext.runs.compose.parse_main_ppo_argv`, :meth:`~verl_ext.runs.compose.MainPPOArguments.check`), on this
process's platform, as a driver started here would (``VERL_PLATFORM=cpu`` for a CPU run). This module composes
nothing of its own: it summarises what the composition checked.

    python -m verl_ext.preflight --name NAME -- --config-path=DIR --config-name=rec_trainer key=value ...
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, TextIO

from verl_ext.checks.arguments import split_at_double_dash
from verl_ext.runs.claims import value_at
from verl_ext.runs.compose import CheckedRun, ComposedRun, error_text, memoised_config_files, parse_main_ppo_argv
from verl_ext.runs.run import RunRefused


@dataclass
class PreflightResult:
    """What the dry run of one run found: its settings (dotted key -> resolved value) or its error; ``checked``: the
    run as checked (what the launcher starts), for a composed run."""

    name: str
    ok: bool
    settings: dict[str, Any] = field(default_factory=dict)
    lines: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: Optional[str] = None
    checked: Optional[CheckedRun] = field(default=None, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "settings": self.settings, "warnings": self.warnings, "error": self.error}


def warnings_for(resolved: dict) -> list[str]:
    """Settings that run but differ from the papers' protocol."""
    actor = resolved["actor_rollout_ref"]["actor"]
    notes = []
    gradient_steps = _gradient_steps_per_batch(resolved)
    if gradient_steps != 1:
        notes.append(
            f"{gradient_steps} gradient steps per batch (data.train_batch_size={resolved['data']['train_batch_size']}, "
            f"ppo_mini_batch_size={actor['ppo_mini_batch_size']}, ppo_epochs={actor['ppo_epochs']}): the papers take one"
        )
    if actor.get("use_kl_loss") and actor.get("kl_loss_coef"):
        notes.append(f"a KL loss term is optimised (kl_loss_coef={actor['kl_loss_coef']}): the papers use none")
    if actor.get("entropy_coeff"):
        notes.append(f"an entropy term is optimised (entropy_coeff={actor['entropy_coeff']}): the papers use none")
    if resolved["algorithm"].get("use_kl_in_reward"):
        notes.append("algorithm.use_kl_in_reward=true: the papers put no KL term in the reward")
    return notes


def _gradient_steps_per_batch(resolved: dict) -> float:
    actor = resolved["actor_rollout_ref"]["actor"]
    steps = resolved["data"]["train_batch_size"] / actor["ppo_mini_batch_size"] * actor["ppo_epochs"]
    return int(steps) if float(steps).is_integer() else steps


def _catalog_keys() -> tuple[tuple[str, ...], tuple[str, ...], dict[str, str]]:
    """(the keys verl-ext's estimators read, the policy-loss keys other than the clipping ranges, the paper's
    symbol of some), from the catalog: a summary shows the keys its run's estimator and loss read, by what
    the catalog says they read, not by their names."""
    from verl_ext.algorithms.rec import OUTER_MARGINS
    from verl_ext.algorithms.red_weight import TEMPERATURE
    from verl_ext.algorithms.registry import BETA, EPSILONS, ESTIMATORS, POLICY_LOSSES

    estimator_keys = tuple(dict.fromkeys(key for spec in ESTIMATORS.values() for key in spec.keys))
    loss_keys = tuple(dict.fromkeys(
        key for spec in POLICY_LOSSES.values() for key in spec.keys if key not in EPSILONS + OUTER_MARGINS))
    return estimator_keys, loss_keys, {BETA[0]: "beta", TEMPERATURE[0]: "T"}


ESTIMATOR_KEYS, LOSS_KEYS, PAPER_SYMBOLS = _catalog_keys()

# The settings a summary reports: label -> dotted keys (resolved values also go into PreflightResult.settings).
SUMMARY_KEYS = {
    "dataset": ("data.train_files", "data.val_files"),
    "model": ("actor_rollout_ref.model.path",),
    "estimator": ("algorithm.adv_estimator", "algorithm.norm_adv_by_std_in_grpo", *ESTIMATOR_KEYS),
    "loss": ("actor_rollout_ref.actor.policy_loss.loss_mode", "actor_rollout_ref.actor.loss_agg_mode"),
    "epsilons": (
        "actor_rollout_ref.actor.clip_ratio_low",
        "actor_rollout_ref.actor.clip_ratio_high",
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_low",
        "actor_rollout_ref.actor.policy_loss.outer_clip_ratio_high",
    ),
    "loss keys": LOSS_KEYS,
    "pi_old": (
        "algorithm.rollout_correction.bypass_mode",
        "algorithm.rollout_correction.rollout_is",
        "algorithm.rollout_correction.rollout_is_threshold",
    ),
    "staleness": (
        "trainer.v1.trainer_mode",
        "trainer.v1.delayed_sync.sync_interval",
        "trainer.v1.delayed_sync.sync_offset",
        "trainer.v1.delayed_sync.offline",
    ),
    "zero-variance masking": (
        "trainer.v1.delayed_sync.zero_variance_masking",
        "algorithm.filter_groups.enable",
        "algorithm.filter_groups.metric",
    ),
    "lora": (
        "actor_rollout_ref.model.lora_rank",
        "actor_rollout_ref.model.lora_alpha",
        "actor_rollout_ref.model.lora_adapter_path",
        "actor_rollout_ref.model.lora.merge",
        "actor_rollout_ref.rollout.load_format",
        "actor_rollout_ref.rollout.layered_summon",
    ),
    "batch": (
        "data.train_batch_size",
        "actor_rollout_ref.rollout.n",
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        "actor_rollout_ref.actor.ppo_epochs",
    ),
    "optimizer": (
        "actor_rollout_ref.actor.optim.optimizer",
        "actor_rollout_ref.actor.optim.lr",
        "actor_rollout_ref.actor.optim.betas",
        "actor_rollout_ref.actor.optim.weight_decay",
        "actor_rollout_ref.actor.optim.lr_warmup_steps",
        "actor_rollout_ref.actor.optim.lr_scheduler_type",
        "actor_rollout_ref.actor.optim.clip_grad",
    ),
    "sampling": (
        "actor_rollout_ref.rollout.temperature",
        "actor_rollout_ref.rollout.top_p",
        "actor_rollout_ref.rollout.val_kwargs.do_sample",
        "actor_rollout_ref.rollout.val_kwargs.temperature",
        "actor_rollout_ref.rollout.val_kwargs.top_p",
        "actor_rollout_ref.rollout.val_kwargs.n",
    ),
    "seeds": (
        "data.seed",
        "actor_rollout_ref.rollout.seed",
        "actor_rollout_ref.actor.data_loader_seed",
        "actor_rollout_ref.rollout.agent.default_agent_loop",
        "actor_rollout_ref.rollout.full_determinism",
    ),
    "regularizers": (
        "actor_rollout_ref.actor.use_kl_loss",
        "actor_rollout_ref.actor.kl_loss_coef",
        "actor_rollout_ref.actor.kl_loss_type",
        "actor_rollout_ref.actor.entropy_coeff",
        "algorithm.use_kl_in_reward",
    ),
    "lengths": ("data.max_prompt_length", "data.max_response_length"),
    "resources": (
        "trainer.nnodes",
        "trainer.n_gpus_per_node",
        "trainer.device",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "actor_rollout_ref.actor.strategy",
        "actor_rollout_ref.actor.use_dynamic_bsz",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
        "actor_rollout_ref.actor.fsdp_config.param_offload",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload",
    ),
    "engine": (
        "actor_rollout_ref.hybrid_engine",
        "actor_rollout_ref.rollout.nnodes",
        "actor_rollout_ref.rollout.n_gpus_per_node",
        "actor_rollout_ref.rollout.free_cache_engine",
        "actor_rollout_ref.rollout.checkpoint_engine.backend",
    ),
    "schedule": ("trainer.total_training_steps", "trainer.test_freq", "trainer.val_before_train", "trainer.save_freq"),
    "reward": ("reward.custom_reward_function.path", "reward.custom_reward_function.name"),
    "logging": ("trainer.project_name", "trainer.experiment_name", "trainer.logger"),
}


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def summarize(resolved: dict) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """(settings, lines): the resolved values of SUMMARY_KEYS, and a human summary, one line per topic."""
    settings = {key: value_at(resolved, key) for keys in SUMMARY_KEYS.values() for key in keys}
    settings["gradient_steps_per_batch"] = _gradient_steps_per_batch(resolved)
    s = settings

    def pairs(*keys: str) -> str:
        return " ".join(f"{_short(key)}={s[key]}" for key in keys)

    from verl_ext.algorithms.rec import OUTER_MARGINS
    from verl_ext.algorithms.registry import EPSILONS, estimator_spec, policy_loss_spec

    loss_mode = s["actor_rollout_ref.actor.policy_loss.loss_mode"]
    estimator = s["algorithm.adv_estimator"]
    loss = policy_loss_spec(str(loss_mode))  # None: one of verl's own losses (its keys are verl's)
    estimator_keys = () if estimator_spec(str(estimator)) is None else estimator_spec(str(estimator)).keys
    estimator_text = f"{estimator}" + (f" (norm_adv_by_std_in_grpo={s['algorithm.norm_adv_by_std_in_grpo']})" if estimator == "grpo" else "")
    if estimator_keys:
        estimator_text += f" ({pairs(*estimator_keys)})"
    if loss is None or set(EPSILONS) <= set(loss.keys):
        epsilons = pairs(*EPSILONS) + (" " + pairs(*OUTER_MARGINS) if loss is not None and loss.uses_outer_margins else "")
    else:
        epsilons = f"none ({loss_mode} reads no clipping range)"
    lines = [
        ("dataset", f"train={s['data.train_files']} val={s['data.val_files']}"),
        ("model", str(s["actor_rollout_ref.model.path"])),
        ("estimator", estimator_text),
        ("loss", f"{loss_mode} (loss_agg_mode={s['actor_rollout_ref.actor.loss_agg_mode']})"),
        ("epsilons", epsilons),
    ]
    own_keys = [key for key in (loss.keys if loss is not None else ()) if key in LOSS_KEYS]
    if own_keys:
        lines.append(("loss keys", " ".join(f"{PAPER_SYMBOLS[key]} ({_short(key)})={s[key]}" if key in PAPER_SYMBOLS
                                            else f"{_short(key)}={s[key]}" for key in own_keys)))
    bypass = s["algorithm.rollout_correction.bypass_mode"]
    lines.append((
        "pi_old",
        "behaviour policy: rollout log-probs (bypass_mode=true)" if bypass else
        "recomputed by the current actor (bypass_mode=false) " + pairs("algorithm.rollout_correction.rollout_is", "algorithm.rollout_correction.rollout_is_threshold"),
    ))
    lines.append(("staleness", _staleness_line(s, value_at(resolved, "trainer.v1.delayed_sync.phases"))))
    from verl_ext.checks.lora import lora_summary

    if (lora_line := lora_summary(resolved)) is not None:
        lines.append(("lora", lora_line))
    if s["trainer.v1.delayed_sync.zero_variance_masking"] and s["trainer.v1.trainer_mode"] == "delayed_sync":
        lines.append(("zero-variance masking", "on (delayed_sync: equal-reward groups leave the batch, no refill)"))
    elif s["algorithm.filter_groups.enable"]:
        lines.append(("zero-variance masking", f"on (verl's group filter, metric={s['algorithm.filter_groups.metric']})"))
    prompts, group = s["data.train_batch_size"], s["actor_rollout_ref.rollout.n"]
    lines.append((
        "batch",
        f"{prompts} prompts x K={group} responses = {prompts * group} responses/step; "
        + pairs("actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_epochs")
        + f" -> {s['gradient_steps_per_batch']} gradient step(s) per batch",
    ))
    lines.append(("optimizer", pairs(*SUMMARY_KEYS["optimizer"])))
    lines.append((
        "sampling",
        "train " + pairs("actor_rollout_ref.rollout.temperature", "actor_rollout_ref.rollout.top_p")
        + "; eval " + " ".join(f"{_short(k)}={s[k]}" for k in SUMMARY_KEYS["sampling"][2:]),
    ))
    lines.append(("seeds", _seeds_line(s)))
    lines.append(("regularizers", pairs(*SUMMARY_KEYS["regularizers"])
                  + (" (KL to the initial policy measured as actor/kl_loss, not optimised)"
                     if s["actor_rollout_ref.actor.use_kl_loss"] and not s["actor_rollout_ref.actor.kl_loss_coef"] else "")))
    lines.append(("lengths", pairs(*SUMMARY_KEYS["lengths"])))
    lines.append(("resources", pairs(*SUMMARY_KEYS["resources"])))
    lines.append(("engine", _engine_line(s)))
    lines.append(("schedule", pairs(*SUMMARY_KEYS["schedule"])))
    lines.append(("reward", f"{s['reward.custom_reward_function.path']}:{s['reward.custom_reward_function.name']}"))
    lines.append(("logging", pairs(*SUMMARY_KEYS["logging"])))
    return settings, lines


def _engine_line(s: dict[str, Any]) -> str:
    if s["actor_rollout_ref.hybrid_engine"] is not False:
        return "colocated with the actor on the trainer's GPUs (hybrid_engine=true)"
    nodes, per_node = s["actor_rollout_ref.rollout.nnodes"], s["actor_rollout_ref.rollout.n_gpus_per_node"]
    tensor_parallel = s["actor_rollout_ref.rollout.tensor_model_parallel_size"]
    replicas = nodes * per_node // tensor_parallel if tensor_parallel else "?"
    return (f"own pool: {nodes} node(s) x {per_node} GPUs = {nodes * per_node} GPUs, {replicas} replica(s) of TP "
            f"{tensor_parallel}, resident (free_cache_engine={s['actor_rollout_ref.rollout.free_cache_engine']}); "
            f"weights through checkpoint_engine.backend={s['actor_rollout_ref.rollout.checkpoint_engine.backend']}")


def _seeds_line(s: dict[str, Any]) -> str:
    from verl_ext.seeding import SEEDED_AGENT_LOOP

    seeds = " ".join(f"{key}={s[key]}" for key in SUMMARY_KEYS["seeds"][:3])
    loop = s["actor_rollout_ref.rollout.agent.default_agent_loop"]
    if loop == SEEDED_AGENT_LOOP:
        sampling = f"each request seeded from rollout.seed, step, prompt and session ({loop})"
    elif s["actor_rollout_ref.rollout.full_determinism"]:
        sampling = f"verl's full_determinism: one seed per replica for every request ({loop})"
    else:
        sampling = f"the engine's own ({loop}; not reproducible, see docs/cpu-backend.md#what-a-seed-fixes)"
    return f"{seeds}; sampling: {sampling}"


def _staleness_line(s: dict[str, Any], phases: Any = None) -> str:
    mode = s["trainer.v1.trainer_mode"]
    if mode != "delayed_sync":
        return f"trainer_mode={mode} (verl's own; no controlled staleness)"
    if phases:  # several settings in one run (docs/staleness.md#phases)
        from verl_ext.staleness.config import read_phases
        from verl_ext.staleness.schedule import PhasedSchedule

        schedule = PhasedSchedule(read_phases(phases))
        text = "delayed_sync phases " + ", ".join(f"{phase.label} from step {phase.start}" for phase in schedule.phases)
        steps = s["trainer.total_training_steps"]
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            text += f"; over {steps} steps: {schedule.sync_count(steps)} weight pushes"
        return text
    from verl_ext.staleness.schedule import StalenessSchedule

    schedule = StalenessSchedule(
        sync_interval=s["trainer.v1.delayed_sync.sync_interval"],
        sync_offset=s["trainer.v1.delayed_sync.sync_offset"],
        offline=s["trainer.v1.delayed_sync.offline"],
    )
    text = "delayed_sync " + " ".join(
        f"{_short(k)}={s[k]}" for k in SUMMARY_KEYS["staleness"][1:]
    ) + f" ({schedule.label})"  # the setting's one name, as in run names
    steps = s["trainer.total_training_steps"]
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        smallest, largest = schedule.lag_range(steps)  # closed forms: any number of steps, constant time
        text += (
            f"; over {steps} steps: lag {smallest}..{largest}, {schedule.sync_count(steps)} weight pushes, "
            f"at most {schedule.pending_batches_peak(steps)} generated batches waiting"
        )
    return text


def _summarised(name: str, resolved: dict, notes: Sequence[str], checked: Optional[CheckedRun] = None) -> PreflightResult:
    settings, lines = summarize(resolved)
    return PreflightResult(name=name, ok=True, settings=settings, lines=lines, warnings=warnings_for(resolved) + list(notes),
                           checked=checked)


def check_run(name: str, composed: ComposedRun) -> PreflightResult:
    """Check and summarise one composed run (:meth:`verl_ext.runs.compose.ComposedRun.check`); never raises for a bad
    configuration (see ``result.error``)."""
    try:
        checked = composed.check()
    except RunRefused as refused:  # a bad run config: report it, go on with the next run
        return PreflightResult(name=name, ok=False, error=refused.reason)
    return _summarised(name, checked.resolved, checked.notes, checked)


def preflight(name: str, argv: Sequence[str]) -> PreflightResult:
    """Check (through the one composition) and summarise one run given as ``main_ppo``'s arguments (the command
    line's), on this process's platform; never raises for a bad configuration (see ``result.error``)."""
    try:
        _, resolved, notes = parse_main_ppo_argv(argv).check()
    except Exception as error:  # a bad run config: report it
        return PreflightResult(name=name, ok=False, error=error_text(error))
    return _summarised(name, resolved, notes)


def preflight_many(runs: Sequence[tuple[str, ComposedRun]], report=None) -> list[PreflightResult]:
    """:func:`check_run` for each (name, composed run), YAML files parsed once; ``report(result)`` after each."""
    results = []
    with memoised_config_files():
        for name, composed in runs:
            result = check_run(name, composed)
            results.append(result)
            if report is not None:
                report(result)
    return results


def format_result(result: PreflightResult) -> str:
    out = [f"== {result.name} =="]
    if not result.ok:
        out.append(f"FAILED: {result.error}")
        return "\n".join(out)
    width = max(len(label) for label, _ in result.lines)
    out.extend(f"  {label:<{width}}  {text}" for label, text in result.lines)
    out.extend(f"  warning: {warning}" for warning in result.warnings)
    out.append("  ok: composed; verl's validate_config, verl-ext's checks, trainer mode and reward function passed")
    return "\n".join(out)


def report_runs(runs: Sequence[tuple[str, ComposedRun]], quiet: bool = False, as_json: bool = False,
                out: TextIO = sys.stdout) -> list[PreflightResult]:
    """Check composed ``runs`` (:func:`preflight_many`), printing each result (only failures when ``quiet``) and the
    count: the dry run's report, as the run scripts' launcher (:mod:`verl_ext.experiments.modes`) prints it."""

    def report(result: PreflightResult) -> None:
        if not (quiet and result.ok):
            print(format_result(result), file=out, flush=True)

    return _reported(preflight_many(runs, report=report), as_json, out)


def _reported(results: list[PreflightResult], as_json: bool, out: TextIO) -> list[PreflightResult]:
    failed = [result.name for result in results if not result.ok]
    print(f"\npreflight: {len(results) - len(failed)} of {len(results)} run configuration(s) passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""), file=out, flush=True)
    if as_json:
        print(json.dumps([result.as_dict() for result in results]), file=out)
    return results


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv, main_ppo_argv = split_at_double_dash(argv)
    parser = argparse.ArgumentParser(prog="python -m verl_ext.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", default="run", help="name of the run given after --")
    parser.add_argument("--json", action="store_true", help="last line printed: a JSON list with each run's result")
    parser.add_argument("--quiet", action="store_true", help="print only the failures and the final count")
    args = parser.parse_args(argv)
    if not main_ppo_argv:
        parser.error("nothing to check: pass main_ppo's arguments after --")
    result = preflight(args.name, main_ppo_argv)
    if not (args.quiet and result.ok):
        print(format_result(result), flush=True)
    results = _reported([result], args.json, sys.stdout)
    return 0 if all(result.ok for result in results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(130)
