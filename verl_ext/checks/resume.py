"""What a run resumes from, checked in the driver before Ray: the checkpoint folder verl will load, and whether
it can load it at this run's world size.

verl's trainer chooses the folder inside Ray (``PPOTrainer._load_checkpoint``, after the workers started), and
:func:`resumed_folder` chooses it the same way, from the same keys:

- ``trainer.resume_mode=disable``: none;
- ``auto``: ``<trainer.default_local_dir>/latest_checkpointed_iteration.txt`` (relative paths from the working
  folder) names a step g, and the folder is ``global_step_<g>`` beside it; no tracker file, or no such folder:
  a fresh start (verl's rule, kept);
- ``resume_path``: ``trainer.resume_from_path``, a path whose last ``global_step_`` is followed by the step.

What verl would find wrong only there (113 s after the start on two cores, naming a missing shard) is refused
here, with a :class:`~verl_ext.config_values.ConfigError` naming the key or the file:

- a ``resume_mode`` verl does not have (verl logs it and then fails on an undefined name);
- a ``resume_from_path`` that is not a path ending in ``global_step_<integer>``, or that names no folder;
- a tracker file that is not a regular file holding a step number;
- an FSDP checkpoint saved at another world size: verl's ``FSDPCheckpointManager`` saves one
  ``model_world_size_<W>_rank_<r>.pt`` (and ``optim_``, ``extra_state_``) per trainer rank with
  ``fsdp_config.json`` recording W, and each rank of a resumed run loads the file of its own W = ``trainer.nnodes``
  x ``trainer.n_gpus_per_node``: the message names the folder, the world size it was saved with and the one
  asked for;
- a part of the checkpoint the run loads (``actor/``, ``critic/`` with a critic) that is missing, or a shard of
  the run's world size missing from it (a checkpoint copied in part);
- an actor saved with another LoRA rank, or with LoRA switched on or off: verl's ``FSDPCheckpointManager`` writes
  ``lora_train_meta.json`` (the adapter's ``r``) beside ``fsdp_config.json`` whenever the actor trains an adapter,
  and the resumed run's shards must hold the parameters of its own ``actor_rollout_ref.model.lora_rank`` (verl would
  fail loading them inside Ray, on a size or a name that does not match).

Checkpoints of other strategies (Megatron's distributed checkpoints) are not read here. The ``delayed_sync``
trainer's own file in the folder is checked by :mod:`verl_ext.staleness.checkpoint_state`, which asks
:func:`resumed_folder` for it. Importing this module does not import verl (:func:`check_resume` asks verl's
``need_critic`` whether the run loads a critic).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Optional

from verl_ext.config_values import ConfigError, is_int, reject
from verl_ext.files import parse_json, read_bounded

RESUME_MODE = "trainer.resume_mode"
RESUME_FROM_PATH = "trainer.resume_from_path"
DEFAULT_LOCAL_DIR = "trainer.default_local_dir"
RESUME_MODES = ("disable", "auto", "resume_path")
TRACKER_FILE = "latest_checkpointed_iteration.txt"  # verl's get_checkpoint_tracker_filename
STEP_FOLDER = "global_step_"
FSDP_CONFIG = "fsdp_config.json"
LORA_META = "lora_train_meta.json"  # verl's FSDPCheckpointManager._save_lora_train_meta: {"r", "lora_alpha", ...}
LORA_RANK = "actor_rollout_ref.model.lora_rank"
FSDP_STRATEGIES = ("fsdp", "fsdp2")
# checkpoint.load_contents item -> the per-rank file verl's FSDPCheckpointManager loads for it
SHARD_FILES = {"model": "model", "optimizer": "optim", "extra": "extra_state"}
_SHARD = re.compile(r"^model_world_size_(\d+)_rank_(\d+)\.pt$")
MAX_SMALL_FILE_BYTES = 64 * 1024  # the tracker holds a number, fsdp_config.json two fields


def _select(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=None)


def _absolute(path: str) -> Path:
    """A path as verl's trainer takes it: relative ones from the working folder (verl joins, never resolves)."""
    return Path(path) if os.path.isabs(path) else Path(os.getcwd()) / path


def step_of(folder: str | os.PathLike) -> Optional[int]:
    """The global step of a checkpoint folder as verl reads it (the text after the last ``global_step_``), or
    None when verl could not read one from it."""
    text = str(folder)
    if STEP_FOLDER not in text:
        return None
    try:
        return int(text.split(STEP_FOLDER)[-1])
    except ValueError:
        return None


def _tracked_step(tracker: Path) -> int:
    content = read_bounded(tracker, MAX_SMALL_FILE_BYTES, "checkpoint tracker (a step number)", ConfigError)
    try:
        return int(content.decode("utf-8"))  # what verl's find_latest_ckpt_path does with it
    except (UnicodeDecodeError, ValueError):
        raise ConfigError(
            f"{tracker}: {content[:40]!r} is not a step number: verl's checkpoint tracker names the last complete "
            f"checkpoint ({STEP_FOLDER}<step>) that {RESUME_MODE}=auto resumes; a save cut short? Remove the file to "
            f"start over, or set {RESUME_MODE}=resume_path with {RESUME_FROM_PATH}=<a {STEP_FOLDER}<step> folder>."
        ) from None


def resumed_folder(config: Any) -> Optional[Path]:
    """The ``global_step_<g>`` folder verl's trainer will resume ``config`` from, or None (a fresh start); a
    :class:`ConfigError` for resume settings verl would fail on inside Ray (see the module docstring)."""
    mode = _select(config, RESUME_MODE)
    if mode not in RESUME_MODES:
        reject(RESUME_MODE, mode, ", ".join(RESUME_MODES),
               "verl's trainer knows no other mode (it would log the mode and fail inside Ray).")
    if mode == "disable":
        return None
    if mode == "auto":
        base = _select(config, DEFAULT_LOCAL_DIR)
        if not isinstance(base, str) or not base:
            return None  # verl's find_latest_ckpt_path(None): a fresh start
        tracker = _absolute(base) / TRACKER_FILE
        if not os.path.lexists(tracker):
            return None
        folder = tracker.parent / f"{STEP_FOLDER}{_tracked_step(tracker)}"
        return folder if folder.exists() else None  # verl starts afresh then ("Checkpoint does not exist")
    path = _select(config, RESUME_FROM_PATH)
    if not isinstance(path, str) or step_of(path) is None:
        reject(RESUME_FROM_PATH, path, f"a path to a checkpoint folder ending in {STEP_FOLDER}<step> (no trailing /) "
               f"with {RESUME_MODE}=resume_path", "verl reads the step to resume from the text after its last "
               f"'{STEP_FOLDER}'.")
    folder = _absolute(path)
    if not folder.is_dir():
        reject(RESUME_FROM_PATH, path, f"an existing checkpoint folder with {RESUME_MODE}=resume_path",
               f"{folder} is not a folder: verl would fail loading its actor after Ray and the workers started.")
    return folder


def world_size_asked(config: Any) -> Optional[int]:
    """W = ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` (the trainer ranks), or None when they are no counts
    (the batch arithmetic check names them)."""
    nnodes, per_node = _select(config, "trainer.nnodes"), _select(config, "trainer.n_gpus_per_node")
    if not (is_int(nnodes) and is_int(per_node)) or nnodes < 1 or per_node < 1:
        return None
    return nnodes * per_node


def saved_world_size(part: Path) -> Optional[int]:
    """The world size an FSDP checkpoint part (``.../global_step_<g>/actor``) was saved at: ``fsdp_config.json``'s
    ``world_size``, else the one its shards' names give; None when it holds no FSDP shard."""
    config_file = part / FSDP_CONFIG
    if os.path.lexists(config_file):
        data = parse_json(read_bounded(config_file, MAX_SMALL_FILE_BYTES, "FSDP checkpoint config", ConfigError),
                          config_file, ConfigError)
        size = data.get("world_size") if isinstance(data, dict) else None
        if not is_int(size) or size < 1:
            raise ConfigError(f"{config_file}: expected a JSON object whose 'world_size' is an integer >= 1 (verl "
                              f"writes it with the checkpoint's shards), got {json.dumps(data)[:200]}")
        return size
    sizes = sorted({int(match.group(1)) for name in os.listdir(part) if (match := _SHARD.match(name))})
    if len(sizes) > 1:
        raise ConfigError(f"{part}: shards of several world sizes ({', '.join(map(str, sizes))}) and no {FSDP_CONFIG}: "
                          "not one checkpoint")
    return sizes[0] if sizes else None


def saved_lora_rank(part: Path) -> Optional[int]:
    """The LoRA rank an FSDP actor checkpoint part was saved with: ``lora_train_meta.json``'s ``r``; 0 when the part
    has verl's ``fsdp_config.json`` and no such file (saved without LoRA); None when the part is not one verl 0.9.1
    wrote (nothing to compare)."""
    meta = part / LORA_META
    if os.path.lexists(meta):
        data = parse_json(read_bounded(meta, MAX_SMALL_FILE_BYTES, "LoRA record of the checkpoint", ConfigError), meta,
                          ConfigError)
        rank = data.get("r") if isinstance(data, dict) else None
        if not is_int(rank) or rank < 1:
            raise ConfigError(f"{meta}: expected a JSON object whose 'r' is an integer >= 1 (verl writes the adapter's "
                              f"rank there), got {json.dumps(data)[:200]}")
        return rank
    return 0 if os.path.lexists(part / FSDP_CONFIG) else None


def _check_lora_rank(config: Any, part: Path, source: str) -> None:
    """The resumed actor's LoRA rank is the one its checkpoint was saved with (module docstring)."""
    from verl_ext.checks.lora import lora_ranks

    saved = saved_lora_rank(part)
    if saved is None:
        return
    asked = lora_ranks(config)[0]
    if asked == saved:
        return
    what = {(True, True): f"saved with LoRA rank {saved}", (True, False): f"saved with LoRA (rank {saved})",
            (False, True): "saved without LoRA"}[(saved > 0, asked > 0)]
    fix = f"set {LORA_RANK}={saved}" if saved else f"set {LORA_RANK}=0"
    raise ConfigError(
        f"{source}: its actor was {what} ({part / LORA_META if saved else part / FSDP_CONFIG}), this run asks for "
        f"{LORA_RANK}={asked}. verl would fail loading its shards inside Ray (the adapter's parameters differ in size "
        f"or name): {fix} to resume it, or start afresh ({RESUME_MODE}=disable, or another {DEFAULT_LOCAL_DIR})."
    )


def _parts_loaded(config: Any) -> list[tuple[str, str]]:
    """(folder name, config prefix) of each checkpoint part the run loads: the actor, and the critic if it has one."""
    import warnings

    from verl.trainer.ppo.utils import need_critic

    with warnings.catch_warnings():  # its "Disabled critic" warning: verl's driver gives it once already
        warnings.simplefilter("ignore")
        critic = need_critic(config)
    return [("actor", "actor_rollout_ref.actor"), *([("critic", "critic")] if critic else [])]


def check_resume(config: Any) -> None:
    """Refuse, before Ray, a resume verl could not complete (see the module docstring)."""
    folder = resumed_folder(config)
    if folder is None:
        return
    world_size = world_size_asked(config)
    mode = _select(config, RESUME_MODE)
    source = f"{RESUME_MODE}=auto resumes {folder} (named by {folder.parent / TRACKER_FILE})" if mode == "auto" \
        else f"{RESUME_FROM_PATH}={folder}"
    for name, prefix in _parts_loaded(config):
        if _select(config, f"{prefix}.strategy") not in FSDP_STRATEGIES:
            continue
        contents = _select(config, f"{prefix}.checkpoint.load_contents")
        contents = [item for item in (list(contents) if contents is not None else SHARD_FILES) if item in SHARD_FILES]
        if not contents:
            continue
        part = folder / name
        if not part.is_dir():
            raise ConfigError(f"{source}: it has no {name}/ folder: not a complete checkpoint of this run (verl "
                              f"would fail loading its {name} inside Ray)")
        if name == "actor":
            _check_lora_rank(config, part, source)
        saved = saved_world_size(part)
        if world_size is None or saved is None:
            continue
        if saved != world_size:
            nnodes, per_node = _select(config, "trainer.nnodes"), _select(config, "trainer.n_gpus_per_node")
            raise ConfigError(
                f"{source}: saved at world size {saved} ({part / FSDP_CONFIG if (part / FSDP_CONFIG).exists() else part}), "
                f"this run asks for world size {world_size} (trainer.nnodes x trainer.n_gpus_per_node = {nnodes} x "
                f"{per_node}). verl's FSDP checkpoint holds one shard per trainer rank and each rank loads the shard "
                f"of its own world size: resume with trainer.nnodes x trainer.n_gpus_per_node = {saved}, or start "
                f"afresh ({RESUME_MODE}=disable, or another {DEFAULT_LOCAL_DIR})."
            )
        for item in contents:
            for rank in range(world_size):
                shard = part / f"{SHARD_FILES[item]}_world_size_{world_size}_rank_{rank}.pt"
                if not shard.is_file():
                    raise ConfigError(
                        f"{source}: {shard} is missing ({name} checkpoint.load_contents has '{item}'; world size "
                        f"{world_size}): a checkpoint copied or saved in part; verl would fail loading it inside Ray"
                    )
