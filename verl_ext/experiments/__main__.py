"""``python -m verl_ext.experiments`` (also ``verl-ext run|sweep|figure|experiments``): the run scripts' launcher.

    run PROFILE ALGORITHM[@EPS_LOW_EPS_HIGH] [SETTING] [overrides...]     one run      (run_scripts/run.sh)
    sweep PROFILE --algorithms A,B [--settings S1,S2] [--learning-rates L1,L2] [--project NAME] [overrides...]
                                                                            a grid       (run_scripts/sweep.sh)
    figure PROJECT [overrides...]                                           a figure's grid (run_scripts/<dataset>/*.sh)
    list                                                                    profiles, algorithms, settings, figures

Extra arguments are Hydra overrides for every run (``KEY=VALUE``, ``+KEY=VALUE``, ``~KEY``; a later one wins).
The mode and the other choices come from environment variables (:mod:`verl_ext.experiments.environment`).
Every argument and variable is checked before a config is composed or a process started: a bad one exits 2
with ``[verl-ext] error: ...``; too few GPUs exits 1 with what to do instead.
"""

from __future__ import annotations

import math
import re
import shlex
import sys
from typing import Mapping, NamedTuple, Optional, Sequence

from dataclasses import replace

from verl_ext.algorithms import presets as algorithms
from verl_ext.experiments import catalogue, profiles
from verl_ext.experiments.environment import RunEnvironment, read_environment
from verl_ext.experiments.modes import LaunchStop, Tools, launch_runs, note
from verl_ext.experiments.profiles import Profile
from verl_ext.files import output_place_problem
from verl_ext.runs.grid import Grid, points
from verl_ext.runs.names import check_name
from verl_ext.runs.run import Run
from verl_ext.staleness import setting as settings

RUN_USAGE = "usage: run PROFILE ALGORITHM[@EPS_LOW_EPS_HIGH] [SETTING] [hydra overrides...]"
SWEEP_USAGE = ("usage: sweep PROFILE --algorithms A,B [--settings S1,S2] [--learning-rates LR1,LR2] [--project NAME] "
               "[hydra overrides...]")
SWEEP_OPTIONS = ("--algorithms", "--settings", "--learning-rates", "--project")
FIGURE_ONLY = ("ALGORITHMS", "SETTINGS", "LEARNING_RATES")


class UsageError(ValueError):
    pass


class Request(NamedTuple):
    """What a command asks for: a grid (named by its project) on a profile, how its runs are named, how the user
    started it (for advice)."""

    grid: Grid
    profile: Profile
    entry: str
    name_prefix: Optional[str] = None  # EXPERIMENT_NAME of a grid: <prefix>-<run name>
    name: Optional[str] = None  # EXPERIMENT_NAME of a single run: its whole name


def parse_learning_rates(text: str, what: str = "LEARNING_RATES") -> list[float]:
    """``"2e-6,5e-6"`` (commas or spaces) -> floats; ValueError naming ``what`` on a value that is not a number > 0."""
    rates = []
    for part in (part for part in re.split(r"[,\s]+", text) if part):
        try:
            rate = float(part)
        except ValueError:
            rate = float("nan")
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"{what}: learning rate {part!r} is not a number > 0")
        if rate in rates:
            raise ValueError(f"{what}: learning rate {part!r} given twice")
        rates.append(rate)
    if not rates:
        raise ValueError(f"{what}: no learning rate given")
    return rates


def check_overrides(arguments: Sequence[str]) -> list[str]:
    """Extra arguments must be Hydra overrides; anything else (an option, a typo, a value Hydra's grammar does
    not parse) is an error now, naming the argument, not a parse error of each run later."""
    for argument in arguments:
        if argument.startswith("-"):
            raise UsageError(f"{argument!r} is not an option here: extra arguments are Hydra overrides KEY=VALUE")
        key = argument[1:] if argument.startswith("~") else argument.split("=", 1)[0] if "=" in argument else ""
        if not key.lstrip("+"):
            raise UsageError(f"{argument!r} is not a Hydra override: write KEY=VALUE (+KEY=VALUE adds a key, ~KEY removes one)")
    if arguments:
        from hydra.core.override_parser.overrides_parser import OverridesParser  # about 0.2 s; no verl, no torch

        parser = OverridesParser.create()
        for argument in arguments:
            try:
                parser.parse_override(argument)
            except Exception as error:  # hydra's OverrideParseException: the grammar's message
                reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise UsageError(f"{argument!r} is not a Hydra override Hydra can parse ({reason}); quote a value with "
                                 "special characters: KEY='VALUE'") from None
    return list(arguments)


def _is_override(argument: str) -> bool:
    return "=" in argument or argument.startswith(("~", "-"))


def _entry(command: str, arguments: Sequence[str]) -> str:
    return " ".join([command, *(shlex.quote(argument) for argument in arguments)])


def _ignored_variables(environment: RunEnvironment, command: str) -> None:
    for name in FIGURE_ONLY:
        if getattr(environment, name.lower()) is not None:
            note(f"{name} restricts a figure script's grid; {command} ignores it (give the grid as arguments)")


def run_grid(arguments: Sequence[str], environment: RunEnvironment) -> Request:
    if len(arguments) < 2 or arguments[0].startswith("-") or arguments[1].startswith("-"):
        raise UsageError(RUN_USAGE)
    profile_name, algorithm, rest = arguments[0], arguments[1], list(arguments[2:])
    setting = rest.pop(0) if rest and not _is_override(rest[0]) else "on_policy"
    overrides = check_overrides(rest)
    profile = profiles.profile_named(profile_name)
    _ignored_variables(environment, "run")
    grid = Grid(
        environment.project_name or f"verl-ext-{profile.name}",
        points([algorithms.parse_algorithm(algorithm)], [settings.parse_setting(setting)]),
        overrides=overrides,
        zero_variance_masking=bool(environment.zero_variance_masking),
    )
    return Request(grid, profile, _entry("verl-ext run", arguments), name=environment.experiment_name)


def parse_sweep_options(arguments: Sequence[str]) -> tuple[str, dict[str, str], list[str]]:
    """PROFILE, {option: value}, overrides. Every turn consumes an argument, so parsing ends."""
    if not arguments or arguments[0].startswith("-"):
        raise UsageError(SWEEP_USAGE)
    profile, rest = arguments[0], list(arguments[1:])
    options: dict[str, str] = {}
    extra: list[str] = []
    while rest:
        argument = rest.pop(0)
        if not argument.startswith("--"):
            extra.append(argument)
            continue
        option, equals, value = argument.partition("=")
        if option not in SWEEP_OPTIONS:
            raise UsageError(f"sweep: unknown option {option} (allowed: {', '.join(SWEEP_OPTIONS)})")
        if not equals:
            value = rest.pop(0) if rest and not rest[0].startswith("-") else ""
        if not value:
            raise UsageError(f"sweep: option {option} needs a value. {SWEEP_USAGE}")
        options[option] = value
    if "--algorithms" not in options:
        raise UsageError(f"sweep: --algorithms is required. {SWEEP_USAGE}")
    return profile, options, check_overrides(extra)


def sweep_grid(arguments: Sequence[str], environment: RunEnvironment) -> Request:
    profile_name, options, overrides = parse_sweep_options(arguments)
    profile = profiles.profile_named(profile_name)
    _ignored_variables(environment, "sweep")
    rates = options.get("--learning-rates")
    if "--project" in options:
        check_name(options["--project"], "--project")
    grid = Grid(
        options.get("--project") or environment.project_name or f"verl-ext-{profile.name}",
        points(algorithms.parse_algorithms(options["--algorithms"]),
               settings.parse_settings(options.get("--settings", "on_policy")), settings_outer=False),
        learning_rates=parse_learning_rates(rates, "--learning-rates") if rates else (),
        overrides=overrides,
        zero_variance_masking=bool(environment.zero_variance_masking),
    )
    return Request(grid, profile, _entry("verl-ext sweep", arguments), name_prefix=environment.experiment_name)


def _from_variable(name: str, parse, text: str):
    try:
        return parse(text)
    except ValueError as error:
        raise ValueError(f"{name}={text!r}: {error}") from None


def figure_grid(arguments: Sequence[str], environment: RunEnvironment) -> Request:
    if not arguments or arguments[0].startswith("-"):
        raise UsageError(f"usage: figure PROJECT [hydra overrides...]; PROJECT is one of {', '.join(catalogue.FIGURES)}")
    figure = catalogue.figure_named(arguments[0])
    overrides = check_overrides(arguments[1:])
    masking = environment.zero_variance_masking
    grid = replace(
        figure,
        name=environment.project_name or figure.name,
        points=points(_from_variable("ALGORITHMS", algorithms.parse_algorithms, environment.algorithms)
                      if environment.algorithms else figure.algorithms(),
                      _from_variable("SETTINGS", settings.parse_settings, environment.settings)
                      if environment.settings else figure.settings(),
                      settings_outer=False),
        learning_rates=(parse_learning_rates(environment.learning_rates) if environment.learning_rates
                        else figure.learning_rates),
        overrides=(*figure.overrides, *overrides),
        zero_variance_masking=figure.zero_variance_masking if masking is None else masking,
    )
    return Request(grid, profiles.profile_named(figure.profile), _entry(f"bash {figure.script}", arguments[1:]),
                   name_prefix=environment.experiment_name)


def list_names() -> str:
    lines = ["profiles (REC paper, Table 1):"]
    aliases = {full: alias for alias, full in profiles.ALIASES.items()}
    for name, profile in profiles.PROFILES.items():
        alias = f" (alias {aliases[name]})" if name in aliases else ""
        lines.append(f"  {name}{alias}: {profile.model}, dataset {profile.dataset}")
    lines.append("algorithms (clipped ones take @EPS_LOW_EPS_HIGH, e.g. rec_oneside_nois@0.6_2):")
    for name, preset in algorithms.ALGORITHMS.items():
        alias = [a for a, full in algorithms.ALIASES.items() if full == name]
        lines.append(f"  {name}: estimator {preset.estimator}, loss {preset.loss}"
                     + (", clipped" if preset.clipped else "") + (f" (alias {', '.join(alias)})" if alias else ""))
    setting_aliases = ", ".join(f"{alias} = {full}" for alias, full in settings.ALIASES.items())
    lines.append(f"settings: {settings.FORMS} (aliases: {setting_aliases})")
    lines.append("figures (figure PROJECT, or bash SCRIPT):")
    for project, figure in catalogue.FIGURES.items():
        lines.append(f"  {project}: {figure.script}: {figure.about}")
    return "\n".join(lines)


COMMANDS = {"run": run_grid, "sweep": sweep_grid, "figure": figure_grid}


def script_runs(request: Request, environment: RunEnvironment) -> list[Run]:
    """Every run of the request's grid (named ``grid.name``, its project) on its profile, in the grid's order
    (:meth:`verl_ext.runs.grid.Grid.runs`). A run's overrides, a key set later winning: the profile (Table 1 + our
    resources: data from ``DATA_DIR``, ``MODEL_PATH``, ``TOTAL_STEPS`` or the profile's steps, the KL measurement
    unless ``KL_TO_INITIAL=0``); the algorithm preset, staleness setting, learning rate (when the grid sweeps it),
    zero-variance masking; the environment's (:meth:`RunEnvironment.run_overrides`); the figure's own, then the
    user's. ``EXPERIMENT_NAME``: a single run's whole name, a grid's prefix. ValueError naming what is wrong."""
    grid, profile = request.grid, request.profile
    check_name(grid.name, "project")
    base = profile.overrides(environment.data_dir, environment.model_path, environment.total_steps,
                             environment.kl_to_initial)
    return grid.runs(base, environment.run_overrides(), project=grid.name, profile=profile.name, name=request.name,
                     prefix=request.name_prefix, named_by="EXPERIMENT_NAME", what=f"{grid.name}: the grid")


def plan(argv: Sequence[str], environ: Optional[Mapping[str, str]] = None) -> tuple[list[Run], RunEnvironment, str]:
    """``run|sweep|figure ARGS`` in ``environ`` -> (its runs, the environment, how the user started it).

    Checks every argument and variable, before anything imports torch or verl; ValueError (UsageError) on a bad
    one. Starts nothing; in the modes that write, one probe file shows that ``OUTPUT_DIR`` is writable.
    """
    if not argv or argv[0] not in COMMANDS:
        raise UsageError(f"unknown command {argv[0] if argv else ''!r}; allowed: {', '.join([*COMMANDS, 'list'])}")
    environment = read_environment(environ)
    request = COMMANDS[argv[0]](argv[1:], environment)
    if not environment.dry_run:
        problem = output_place_problem(environment.outputs, follow_links=True)
        if problem:
            raise UsageError(f"OUTPUT_DIR={str(environment.output_dir)!r}: {problem}; the metrics and checkpoints go there")
    runs = script_runs(request, environment)
    if len(runs) > 1 or argv[0] != "run":
        note(f"{request.grid.name}: {len(runs)} run(s) of profile {request.profile.name}")
    return runs, environment, request.entry


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None,
         tools: Optional[Tools] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "list":
        print(list_names())
        return 0
    from verl_ext.runs.monitor import sigterm_as_interrupt

    try:
        runs, environment, entry = plan(argv, environ)
        with sigterm_as_interrupt():  # SIGTERM stops a data preparation child too, as Ctrl-C does (launch: main_ppo's)
            return launch_runs(runs, environment, entry, tools)
    except LaunchStop as stop:
        print(stop, file=sys.stderr, flush=True)
        return stop.status
    except ValueError as error:  # a bad argument, name or environment variable
        print(f"[verl-ext] error: {error}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
