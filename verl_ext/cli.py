"""``verl-ext``: the command-line front of verl-ext.

    verl-ext list        every name verl-ext registers, its paper name, its config keys and defaults
    verl-ext doctor      is verl 0.9.1 installed, does the plugin load, are the registries complete, are the
                         private verl methods and patches verl-ext relies on as listed (verl_internals.py)?
    verl-ext schedule    preview the delayed_sync staleness schedule (docs/staleness.md)
    verl-ext plot        the papers' panels from finished runs' metrics (docs/run-scripts.md)
    verl-ext lab         the papers' comparisons on the CPU backend with the tiny model (docs/lab.md)
    verl-ext quickstart  verl's real training loop on this CPU with the tiny model (docs/cpu-backend.md)
    verl-ext tiny-assets build the tiny offline model, tokenizer and task data
    verl-ext gpu-smoke   one real delayed_sync run on a GPU with vLLM, summarised and checked (docs/gpu.md)
    verl-ext run|sweep|figure   the run scripts' launcher (docs/run-scripts.md); experiments: their names

verl swallows plugin import errors, so ``doctor`` is the first thing to run when verl says
"Unsupported loss mode". Ctrl-C (or SIGTERM where a command turns it into an interrupt: ``run``, ``sweep``,
``figure``, ``quickstart``, ``gpu-smoke``, ``lab``) ends any command with exit status 130 and one line, never a
traceback, as the ``python -m`` forms do.
"""

import argparse
import importlib
import json
import logging
import os
import sys
import time
import traceback
from importlib import metadata

from rich.console import Console
from rich.table import Table

from verl_ext.algorithms.registry import ESTIMATORS, POLICY_LOSSES

REQUIRED_VERL = "0.9.1"
ENTRY_POINT_GROUP = "verl.plugins"
ENTRY_POINT_NAME = "verl_ext"


def recipe_defaults() -> dict:
    """The recipe config's own values (before composition with verl's), keyed by dotted path."""
    from omegaconf import OmegaConf

    from verl_ext import recipe  # the packaged file (a checkout's recipe/rec/config/rec_trainer.yaml links to it)

    text = (recipe.config_dir() / f"{recipe.CONFIG_NAME}.yaml").read_text(encoding="utf-8")
    config = OmegaConf.create(text)
    flat = {}

    def walk(node, prefix):
        for key in node:
            value = node._get_node(key)
            path = f"{prefix}.{key}" if prefix else str(key)
            if OmegaConf.is_dict(value):
                walk(value, path)
            else:
                flat[path] = value._value()
    walk(config, "")
    return flat


def catalog_rows() -> list[dict]:
    defaults = recipe_defaults()
    rows = []
    for kind, option, specs in (
        ("estimator", "algorithm.adv_estimator", ESTIMATORS),
        ("policy loss", "actor_rollout_ref.actor.policy_loss.loss_mode", POLICY_LOSSES),
    ):
        for spec in specs.values():
            rows.append(
                {
                    "kind": kind,
                    "name": spec.name,
                    "select_with": f"{option}={spec.name}",
                    "paper_name": spec.paper_name,
                    "reference": spec.reference,
                    "keys": {key: defaults.get(key) for key in spec.keys},
                }
            )
    return rows


def list_main(argv) -> int:
    parser = argparse.ArgumentParser(prog="verl-ext list", description=list_main.__doc__)
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    rows = catalog_rows()
    if args.format == "json":
        print(json.dumps(rows, indent=1))
        return 0
    table = Table("kind", "name", "paper name", "reference", "keys (recipe default)", title="verl-ext algorithms")
    for row in rows:
        keys = "\n".join(f"{key} = {value}" for key, value in row["keys"].items()) or "-"
        table.add_row(row["kind"], row["name"], row["paper_name"], row["reference"], keys)
    Console(width=200).print(table)
    return 0


list_main.__doc__ = "List every estimator and policy loss verl-ext registers, with its config keys and defaults."


class DropLogRecords(logging.Filter):
    """A filter for one logger that drops the records whose message starts with one of ``prefixes`` or contains one of
    ``fragments``."""

    def __init__(self, prefixes: tuple = (), fragments: tuple = ()):
        super().__init__()
        self.prefixes, self.fragments = prefixes, fragments

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith(self.prefixes) or any(fragment in message for fragment in self.fragments))


# logger -> what the doctor leaves out of its output, because its own lines say it better or it says nothing about
# verl-ext: verl's platform auto-detection falling back to 'nvidia' on a machine without an accelerator (the doctor's
# "accelerator" line reports it), torch's note that no CUDA runtime exists
DOCTOR_QUIET_LOGGERS = {
    "verl.plugin.platform.platform_manager": DropLogRecords(("No supported accelerator detected",),
                                                            ("is registered but not available",)),
    "torch.utils.cpp_extension": DropLogRecords(("No CUDA runtime is found",)),
}


def quiet_verl_imports() -> None:
    """Install the doctor's filters in this process (once): :data:`DOCTOR_QUIET_LOGGERS` and verl's optional-engine
    import warnings (:mod:`verl_ext.verl_warnings`)."""
    from verl_ext.verl_warnings import ignore_optional_engine_warnings

    ignore_optional_engine_warnings()
    for name, drop in DOCTOR_QUIET_LOGGERS.items():
        if drop not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(drop)


def accelerator_check():
    """(check, ok, detail) of the platform verl resolves in this process (verl's own auto-detection, which falls back
    to 'nvidia' when no platform is available)."""
    from verl.plugin.platform import get_platform

    platform = get_platform()
    chosen = os.environ.get("VERL_PLATFORM", "").strip()
    if chosen:
        return "accelerator", True, f"{platform.device_name} (VERL_PLATFORM={chosen})"
    if not platform.is_available():
        return "accelerator", True, ("none found by verl's GPU platforms: GPU runs cannot start here; CPU runs select "
                                     "the cpu platform themselves (VERL_PLATFORM=cpu: the quickstart, the lab, the CPU "
                                     "smoke)")
    return "accelerator", True, f"{platform.device_name} ({platform.vendor_name}, found by verl)"


def doctor_checks():
    """Yield (check, ok, detail) for each thing that must hold for verl to run verl-ext's algorithms."""
    quiet_verl_imports()
    try:
        version = metadata.version("verl")
    except metadata.PackageNotFoundError:
        yield "verl installed", False, "verl is not installed: pip install -e '.[test]' (CPU) or '.[gpu]'"
        return
    yield "verl version", version == REQUIRED_VERL, f"found {version}, verl-ext needs {REQUIRED_VERL}"

    points = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == ENTRY_POINT_NAME]
    yield "entry point", bool(points), (
        f"{ENTRY_POINT_GROUP}: {points[0].value}" if points else "not found: reinstall verl-ext (pip install -e .)"
    )
    import verl  # noqa: F401  (loads every verl.plugins entry point, as each verl process does)
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY

    missing = sorted((set(POLICY_LOSSES) - set(POLICY_LOSS_REGISTRY)) | (set(ESTIMATORS) - set(ADV_ESTIMATOR_REGISTRY)))
    if missing:
        try:  # verl swallowed the plugin's error: import it again to show it
            importlib.import_module("verl_ext.plugin")
            detail = f"missing after import verl: {missing} (does VERL_USE_EXTERNAL_PLUGINS exclude 'verl_ext'?)"
        except Exception:
            detail = traceback.format_exc()
        yield "plugin loaded by verl", False, detail
        return
    yield "plugin loaded by verl", True, f"{len(POLICY_LOSSES)} policy losses and {len(ESTIMATORS)} estimators registered"

    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from verl_ext.cpu_runtime.registration import ROLLOUT_NAME

    platform_ok = PlatformRegistry.get("cpu") is not None
    yield "cpu platform", platform_ok, "registered (selected with VERL_PLATFORM=cpu)" if platform_ok else "not registered"
    try:
        RolloutReplicaRegistry.get(ROLLOUT_NAME)
        rollout_ok = True
    except ValueError:
        rollout_ok = False
    yield "cpu rollout", rollout_ok, f"rollout name {ROLLOUT_NAME!r}" if rollout_ok else "not registered"
    yield accelerator_check()

    from verl.trainer.ppo.v1.trainer_base import get_trainer_cls

    try:
        get_trainer_cls("delayed_sync")
        yield "trainer mode", True, "trainer.v1.trainer_mode=delayed_sync"
    except Exception as error:
        yield "trainer mode", False, f"delayed_sync not registered: {error}"

    from verl_ext.verl_internals import VERL_INTERNALS
    from verl_ext.verl_internals_check import mismatches

    changed = mismatches()
    for line in changed:  # one line per private method, patch or hook whose verl side changed
        yield "verl internals", False, line
    if not changed:
        yield "verl internals", True, (
            f"{len(VERL_INTERNALS)} private methods, patches and import hooks match verl {version} "
            "(verl_ext/verl_internals.py)"
        )

    from verl_ext.plugin import wiring

    for row in wiring():  # the one table of what verl-ext does when verl imports a module (docs/architecture.md)
        yield "on import", True, f"{row.module}: {row.does} ({row.when}; {row.by})"

    from verl_ext import recipe

    try:
        yield "recipe config", True, f"--config-path={recipe.config_dir()} --config-name={recipe.CONFIG_NAME}"
    except FileNotFoundError as error:
        yield "recipe config", False, str(error)


def doctor_main(argv) -> int:
    argparse.ArgumentParser(prog="verl-ext doctor", description="Check the installation.").parse_args(argv)
    console = Console(soft_wrap=True)  # a FAIL line stays one line, however long
    console.print("[dim]verl-ext doctor: importing verl and its trainer, as every run does: most of its time[/]",
                  highlight=False)
    failed = 0
    started = time.perf_counter()
    for check, ok, detail in doctor_checks():
        failed += not ok
        console.print(f"[{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {check}: {detail}", highlight=False)
    if failed:
        console.print(f"[red]{failed} check(s) failed[/]: verl-ext is not ready (each FAIL line says what).")
        return 1
    console.print(f"[green]verl-ext is ready[/] ({time.perf_counter() - started:.0f} s: most of it importing verl and "
                  "its trainer, as every main_ppo does).", highlight=False)
    return 0


def module_main(module: str, function: str = "main"):
    """A subcommand that runs ``function(argv)`` of another verl-ext module, imported only when it is used
    (so ``verl-ext list`` does not pay for matplotlib, Ray or the lab)."""

    def command(argv) -> int:
        return getattr(importlib.import_module(module), function)(argv)

    return command


def experiments_command(subcommand):
    """``verl-ext run|sweep|figure ...`` = ``python -m verl_ext.experiments run|sweep|figure ...``;
    ``verl-ext experiments [list]`` lists the names."""

    def command(argv) -> int:
        from verl_ext.experiments.__main__ import main as experiments_main

        return experiments_main([subcommand, *argv] if subcommand else (list(argv) or ["list"]))

    return command


COMMANDS = {
    "list": (list_main, "list the registered algorithms, their keys and defaults"),
    "doctor": (doctor_main, "check verl's version, the plugin, the registries and verl's internals verl-ext uses (non-zero exit on failure)"),
    "schedule": (module_main("verl_ext.staleness.cli", "schedule_main"), "preview the delayed_sync staleness schedule"),
    "plot": (module_main("verl_ext.plotting", "plot_main"), "plot the papers' panels from finished runs' metrics (docs/run-scripts.md)"),
    "lab": (module_main("verl_ext.lab.cli", "lab_main"), "run the papers' comparisons through verl on the CPU backend (docs/lab.md)"),
    "quickstart": (module_main("verl_ext.cpu.quickstart"), "verl's real training loop on this CPU (docs/cpu-backend.md)"),
    "tiny-assets": (module_main("verl_ext.tiny.assets"), "build the tiny offline model, tokenizer and task data"),
    "gpu-smoke": (module_main("verl_ext.gpu.smoke"), "one real delayed_sync run on this node's GPU with vLLM, checked (docs/gpu.md)"),
    # the run scripts' launcher (python -m verl_ext.experiments, docs/run-scripts.md)
    "run": (experiments_command("run"), "one run: PROFILE ALGORITHM [SETTING] [overrides] (run_scripts/run.sh)"),
    "sweep": (experiments_command("sweep"), "a grid: PROFILE --algorithms A,B [--settings ...] (run_scripts/sweep.sh)"),
    "figure": (experiments_command("figure"), "a figure's grid: PROJECT [overrides] (run_scripts/<dataset>/*.sh)"),
    "experiments": (experiments_command(None), "the experiments' names: profiles, algorithms, settings, figures"),
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: verl-ext COMMAND [options]\n\ncommands:")
        for name, (_, help_text) in COMMANDS.items():
            print(f"  {name:<11} {help_text}")
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nverl-ext: unknown command {argv[0]!r}", file=sys.stderr)
            return 2
        return 0
    command, _ = COMMANDS[argv[0]]
    try:
        return command(argv[1:]) or 0
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into one: what the command started was stopped on the way out
        print(f"[verl-ext] {argv[0]}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
