"""Where a run writes, and how its folder is prepared so that nothing an earlier run left is lost.

:class:`Outputs` says where runs write, in one of two layouts; :meth:`Outputs.paths` is a run's :class:`RunPaths`
(computed once per run, by :func:`verl_ext.runs.compose.compose`):

- ``per_run`` (the harness: tests, quickstart, lab, GPU smoke): ``<root>/<project>/<name>.jsonl`` (verl's file
  logger), and ``<root>/<project>/<name>/``: ``main_ppo.log``, ``checkpoints/``, ``rollout_events.jsonl`` (the
  CPU rollout's weight events, :mod:`verl_ext.rollout_events`);
- ``scripts`` (the run scripts): metrics apart from checkpoints, so that ``verl-ext plot`` reads one folder:
  ``<root>/metrics/<project>/<name>.jsonl`` with ``<name>.run.json`` (:mod:`verl_ext.run_description`),
  ``<root>/checkpoints/<project>/<name>/``, ``<root>/logs/<project>/<name>.log``.

A run's checkpoint folder is its ``checkpoint_dir``, else the ``trainer.default_local_dir`` its own overrides set
(honoured, never replaced), else the layout's.

:func:`prepare_run_folder` runs after the run's configuration passed the driver's checks and before it starts (the
launcher's order, :func:`verl_ext.runs.launch.start`), so a refused run touches nothing. An earlier run of the same
name in the same place is kept, never half-replaced:

- ``per_run``: its metrics, log, weight events and the caller's files that describe it (the quickstart's
  ``summary.json``, the lab's run record: ``keep_with_run``) move together into ``<run folder>/earlier/<N>/``
  (N = 1, 2, ...; a note says where). Its checkpoints stay where they are: a rerun of the same name resumes from them,
  as verl's ``trainer.resume_mode=auto`` does;
- ``scripts``: its metrics and log become ``<name>.partN.jsonl`` and ``<name>.partN.log`` (and its weight events
  ``rollout_events.partN.jsonl``) beside them (a run script run again, or resumed: verl's file logger truncates its
  file, and ``verl-ext plot`` joins the parts).

A file of the run that is a symbolic link (or a run folder that is one) is refused (:class:`~verl_ext.runs.run.RunRefused`,
naming it) before anything moves: verl-ext writes a run's files itself, never through a link into someone else's
file. Nothing is ever deleted.

The output folder itself (the quickstart's, the lab's, the GPU plan's and the benchmarks' ``--out``, the run scripts'
``OUTPUT_DIR``) is checked when an :class:`Outputs` is made, before any work (:func:`output_folder`): a folder that is
a file or below one, a FIFO or device, or a symbolic link to nothing (anywhere on its path: verl-ext would create the
link's target, somewhere the user did not name) is an :class:`OutputFolderError` naming it. The rules themselves
live in :func:`verl_ext.files.output_place_problem`, the one home of every output place's checks (the assets
builder's, the GPU plan's, the benchmarks', the run scripts' environment).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional, Sequence

from verl_ext.files import check_output_place
from verl_ext.metrics_file import file_logger_path
from verl_ext.run_description import description_path
from verl_ext.config_values import ConfigError
from verl_ext.overrides import INTERPOLATION, override_key, parsed_value
from verl_ext.runs.run import Run, RunRefused

LAYOUTS = ("per_run", "scripts")
CPU_PROJECT = "verl_ext_cpu"  # the folder of a run of the harness that names no project (GPU: verl_ext_gpu)
EARLIER = "earlier"  # per_run: <run folder>/earlier/<N>/ holds an earlier run's files


class OutputFolderError(ConfigError):
    """An output folder verl-ext cannot write into (a file, below a file, a link to nothing): nothing was done."""


def output_folder(path: str | os.PathLike, option: str = "--out") -> Path:
    """``path`` (named by ``option``, the option or variable that gave it; "" for none) as an absolute folder, links
    resolved, once it is checked by the one home of the output-place rules (:func:`verl_ext.files.output_place_problem`:
    a link to a folder is followed, a link to nothing is refused; writability is the launcher's, in the modes that
    write); :class:`OutputFolderError` naming it otherwise. Writes nothing."""
    given = check_output_place(Path(path).expanduser(), "output folder", OutputFolderError, follow_links=True,
                               writable=False, option=option)
    return given.resolve()


@dataclass(frozen=True)
class RunPaths:
    """Where one run writes."""

    metrics: Path  # verl's file logger (JSONL, one line per step)
    checkpoints: Path  # trainer.default_local_dir
    log: Path  # main_ppo's output, for a child process
    events: Path  # the CPU rollout's weight events
    description: Path  # <name>.run.json, read by verl-ext plot
    run_dir: Path  # the run's own folder: the logs of a local Ray cluster's nodes
    keeps_earlier_metrics: bool = False  # scripts layout: an earlier run's metrics become <name>.partN.jsonl

    def files(self) -> tuple[Path, ...]:
        """The files a run writes (what an earlier run of the same name left there is kept)."""
        return self.metrics, self.log, self.events


@dataclass(frozen=True)
class Outputs:
    """Where runs write (module docstring): under ``root``, in one of :data:`LAYOUTS`; ``project``: the folder of a
    run that names none (the CPU harness writes into ``verl_ext_cpu``, the GPU one into ``verl_ext_gpu``)."""

    root: Path
    project: str = CPU_PROJECT
    layout: str = "per_run"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout {self.layout!r}; allowed: {', '.join(LAYOUTS)}")
        object.__setattr__(self, "root", output_folder(self.root, ""))

    def project_of(self, run: Run) -> str:
        return run.project or self.project

    def paths(self, run: Run) -> RunPaths:
        project = self.project_of(run)
        if self.layout == "scripts":
            metrics = file_logger_path(self.root / "metrics", project, run.name)
            run_dir = self.root / "logs" / project / run.name
            return RunPaths(
                metrics=metrics,
                checkpoints=_checkpoints(run, self.root / "checkpoints" / project / run.name),
                log=self.root / "logs" / project / f"{run.name}.log",
                events=run_dir / "rollout_events.jsonl",
                description=description_path(metrics, run.name),
                run_dir=run_dir,
                keeps_earlier_metrics=True,
            )
        run_dir = self.root / project / run.name
        metrics = file_logger_path(self.root, project, run.name)
        return RunPaths(
            metrics=metrics,
            checkpoints=_checkpoints(run, run_dir / "checkpoints"),
            log=run_dir / "main_ppo.log",
            events=run_dir / "rollout_events.jsonl",
            description=description_path(metrics, run.name),
            run_dir=run_dir,
        )


CHECKPOINTS_KEY = "trainer.default_local_dir"


def _checkpoints(run: Run, default: Path) -> Path:
    """The run's checkpoint folder: its ``checkpoint_dir``, else the ``trainer.default_local_dir`` its own overrides
    set (honoured, resolved against the current folder, and checked as verl-ext's own folders are), else
    ``default``. :class:`RunRefused` naming the key for a value that is not a folder path, or one that contradicts
    ``checkpoint_dir``."""
    given = [item for item in run.overrides if override_key(item) == CHECKPOINTS_KEY]
    if not given:
        return Path(run.checkpoint_dir).resolve() if run.checkpoint_dir else default
    item = given[-1]
    try:
        value = parsed_value(item)
    except Exception as error:  # Hydra's grammar: an unbalanced quote, ...
        raise RunRefused(run.name, f"{CHECKPOINTS_KEY}: the override {item!r} cannot be read ({error})",
                         what="its checkpoint folder is not a path") from None
    if not isinstance(value, str) or not value.strip() or INTERPOLATION in value:
        raise RunRefused(run.name, f"{CHECKPOINTS_KEY}: the override {item!r} sets {value!r}; write the checkpoint "
                         f"folder as a path (without ${{...}}), or drop it: checkpoints then go to {default}",
                         what="its checkpoint folder is not a path")
    folder = Path(value).resolve()
    if run.checkpoint_dir and Path(run.checkpoint_dir).resolve() != folder:
        raise RunRefused(run.name, f"{CHECKPOINTS_KEY}: the override {item!r} and the run's checkpoint folder "
                         f"{Path(run.checkpoint_dir).resolve()} disagree: give one", what="it has two checkpoint folders")
    return folder


@dataclass(frozen=True)
class KeptRun:
    """Where an earlier run of the same name was kept: its part's number (``scripts``) or its folder (``per_run``)."""

    part: Optional[int] = None
    folder: Optional[Path] = None


def refuse_links(name: str, paths: Iterable[Path]) -> None:
    """:class:`RunRefused` naming the first of ``paths`` that is a symbolic link."""
    for path in paths:
        if path.is_symlink():
            raise RunRefused(name, f"{path} is a symbolic link (to {os.readlink(path)}): verl-ext writes a run's files "
                             "itself and never through a link; remove the link or write the run elsewhere",
                             what="a file it would write is not verl-ext's")


def prepare_run_folder(run_name: str, paths: RunPaths, keep_with_run: Sequence[Path] = ()) -> Optional[KeptRun]:
    """Make the run's folders and keep what an earlier run of the same name left (module docstring); None when there
    was nothing. ``keep_with_run``: the caller's files that describe the run (moved with it, ``per_run``)."""
    keep_with_run = tuple(Path(path) for path in keep_with_run)
    earlier_folder = paths.run_dir / EARLIER
    refuse_links(run_name, (*paths.files(), paths.description, paths.run_dir, earlier_folder, *keep_with_run))
    for folder in (paths.metrics.parent, paths.log.parent, paths.run_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if paths.keeps_earlier_metrics:
        part = _keep_as_part(paths)
        kept = None if part is None else KeptRun(part=part)
        if kept:
            _note(f"kept the earlier metrics and log of {run_name} as part {part} ({paths.metrics.parent}/{run_name}"
                  f".part{part}.jsonl; verl-ext plot joins the parts)")
        return kept
    earlier = [path for path in (*paths.files(), *keep_with_run) if os.path.lexists(path)]
    if not earlier:
        return None
    number = 1
    while (earlier_folder / str(number)).exists():
        number += 1
    folder = earlier_folder / str(number)
    folder.mkdir(parents=True)
    for path in earlier:
        shutil.move(str(path), str(folder / path.name))
    _note(f"kept the earlier run of {run_name} ({', '.join(path.name for path in earlier)}) in {folder}")
    return KeptRun(folder=folder)


def _keep_as_part(paths: RunPaths) -> Optional[int]:
    """``scripts``: the earlier metrics, log and weight events renamed to their part N (the first N free for all)."""
    earlier = [path for path in paths.files() if path.is_file() and path.stat().st_size > 0]
    if not earlier:
        return None

    def part_of(path: Path, number: int) -> Path:
        stem = path.name[: -len(path.suffix)] if path.suffix else path.name
        return path.with_name(f"{stem}.part{number}{path.suffix}")

    number = 1
    while any(part_of(path, number).exists() for path in paths.files()):
        number += 1
    for path in earlier:
        path.rename(part_of(path, number))
    return number


def _note(message: str) -> None:
    print(f"[verl-ext] {message}", file=sys.stderr, flush=True)
