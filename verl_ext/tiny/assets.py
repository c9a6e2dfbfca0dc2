"""Build the offline assets: model + tokenizer and a task's parquet files. Nothing downloaded.

    python -m verl_ext.tiny.assets --out assets/tiny        (or: verl-ext tiny-assets --out assets/tiny)
    python -m verl_ext.tiny.assets --size gpu               (head_dim 64 for vLLM: assets/tiny-gpu)
    python -m verl_ext.tiny.assets --size qwen2.5-0.5b      (Qwen2.5-0.5B's dimensions, random weights)

``--size`` picks the model, tokenizer and task (:data:`verl_ext.tiny.sizes.SIZES`): ``cpu`` (hidden 64, head_dim
16, 126K parameters) for the CPU backend, ``gpu`` (hidden 256, 4 heads of 64) for vLLM on a GPU, both with the
counting task and its 45-token tokenizer; the scale sizes ``qwen2.5-0.5b`` and ``qwen2.5-1.5b`` (a real
architecture's dimensions, a 151,936-id synthetic tokenizer, the letters task with responses as long as the run
allows) and ``scale-cpu``, the same builder at the CPU backend's size.

Layout of ``--out``::

    model/            Qwen2 config, safetensors weights, generation config, tokenizer (HF format)
    data/train.parquet, data/val.parquet      verl RL format (data_source, prompt, ability, reward_model, extra_info)
    manifest.json     recipe (seed, sizes, versions) and sha256 of every file

The build is deterministic: the same recipe writes byte-identical files (on one machine and software stack). An
existing directory whose manifest has the same recipe and whose files still match their checksums is left as it
is (``--force`` rebuilds). A folder is only ever replaced when verl-ext wrote it: an empty folder, or one with
verl-ext's ``manifest.json``; any other folder, a file, or a symbolic link is refused before anything is built,
and a ``manifest.json`` that is not UTF-8 JSON object is an error naming it (``error: <file>: <what>``, exit 2).
The reward function is :func:`verl_ext.tiny.task.compute_score`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict
from pathlib import Path
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional, Sequence

from verl_ext import data_sources
from verl_ext.files import new_folder
from verl_ext.tiny.sizes import DEFAULT_SIZE

ASSETS_FORMAT = 1
DEFAULT_SEED = 0
DEFAULT_TRAIN_EXAMPLES = 2048
DEFAULT_VAL_EXAMPLES = 64
REWARD_FUNCTION = ("pkg://verl_ext.tiny.task", "compute_score")

# The environment of any run on these assets (the CPU and the GPU profiles add their own): variable -> (value, why).
OFFLINE_RUN_ENVIRONMENT = {
    "HF_HUB_OFFLINE": ("1", "no downloads: the tiny assets are local (a GPU node has no network)"),
    "TRANSFORMERS_OFFLINE": ("1", "no downloads: the tiny assets are local"),
    "WANDB_MODE": ("disabled", "no experiment-tracking service (the GPU kit carries no wandb)"),
    "TOKENIZERS_PARALLELISM": ("false", "no tokenizer thread pool in every Ray worker"),
    "RAY_DEDUP_LOGS": ("0", "show each worker's log line (there are only a few workers)"),
}

# Overrides of any whole run on these assets, each with its reason (the CPU and GPU profiles set their values).
TASK_OVERRIDE_REASONS = {
    "reward.num_workers": "one reward-loop worker process",
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": "one TransferQueue storage actor",
    "data.train_batch_size": "prompts per step",
    "data.max_prompt_length": "tiny prompts",
    "data.max_response_length": "tiny responses",
    "data.dataloader_num_workers": "load data in the trainer process",
    "trainer.logger": "console progress and a JSONL file of every step's metrics (VERL_FILE_LOGGER_PATH)",
}


MAX_SEED = 2**63 - 1  # what torch.manual_seed takes (random.Random takes anything)
MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 * 2**20


class AssetsFolderError(OSError):
    """A folder the builder must not replace (not verl-ext's, a link, a file) or a manifest it cannot read;
    the message names the path."""


def default_assets_dir(size: str = DEFAULT_SIZE) -> Path:
    """``<repo>/assets/<folder>`` (``tiny``, ``tiny-gpu``, ``scale-...``: :data:`verl_ext.tiny.sizes.SIZES`) for a
    source checkout (gitignored), else the same name under ``~/.cache/verl-ext``."""
    from verl_ext.tiny.sizes import assets_size

    folder = assets_size(size).folder
    repo = Path(__file__).resolve().parents[2]
    if (repo / "setup.py").is_file() and (repo / "verl_ext").is_dir():
        return repo / "assets" / folder
    return Path.home() / ".cache" / "verl-ext" / folder


def recipe(seed: int, train_examples: int, val_examples: int, size: str = DEFAULT_SIZE) -> dict[str, Any]:
    import tokenizers
    import transformers

    from verl_ext.tiny import letters, task
    from verl_ext.tiny.sizes import LETTERS_TASK, assets_size

    spec = assets_size(size)
    if spec.task == LETTERS_TASK:
        task_recipe = {"data_source": data_sources.TINY_LETTERS, "widths": [letters.MIN_WIDTH, letters.MAX_WIDTH]}
    else:
        task_recipe = {"data_source": data_sources.TINY_COUNT, "max_count": task.MAX_COUNT}
    built = {
        "format": ASSETS_FORMAT,
        "seed": seed,
        "train_examples": train_examples,
        "val_examples": val_examples,
        "task": task_recipe,
        "model_size": asdict(spec.model),
        "versions": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
    }
    if spec.vocab_size is not None or spec.dtype != "float32":  # the tiny sizes' recipes as they always were
        built.update(size=size, tokenizer={"synthetic_vocab_size": spec.vocab_size}, dtype=spec.dtype)
    return built


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_split(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def file_checksums(root: Path) -> dict[str, str]:
    """sha256 of every file below ``root`` except ``manifest.json``, by relative path."""
    return {
        str(path.relative_to(root)): _sha256(path)
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != "manifest.json"
    }


def read_manifest(path: Path) -> dict[str, Any]:
    """A ``manifest.json`` verl-ext wrote (tiny assets, warm start): a bounded regular file holding a UTF-8 JSON
    object; else :class:`AssetsFolderError` naming the file and what it is."""
    from verl_ext.files import parse_json, read_bounded

    manifest = parse_json(read_bounded(path, MAX_MANIFEST_BYTES, "assets manifest", AssetsFolderError), path,
                          AssetsFolderError)
    if not isinstance(manifest, dict):
        raise AssetsFolderError(f"{path}: a JSON {type(manifest).__name__}, not an object: not an assets manifest")
    return manifest


def assets_are_current(out: Path, wanted_recipe: dict[str, Any]) -> bool:
    """True when ``out`` holds a build of ``wanted_recipe`` whose files all match the manifest."""
    manifest_path = out / MANIFEST
    if not manifest_path.is_file():
        return False
    manifest = read_manifest(manifest_path)
    return manifest.get("recipe") == wanted_recipe and manifest.get("files") == file_checksums(out)


def check_replaceable(out: Path) -> None:
    """Refuse (:class:`AssetsFolderError`) to build into ``out`` unless replacing it loses nothing verl-ext did not
    write: ``out`` is absent, an empty folder, or a folder with verl-ext's manifest (a JSON object listing its
    ``files``). A symbolic link is refused whatever it points at (the build would replace what it points at), so is
    a file; a manifest that is not UTF-8 JSON is an error naming it."""
    if out.is_symlink():
        raise AssetsFolderError(f"{out}: a symbolic link (to {os.readlink(out)}); give the assets folder itself: "
                                "verl-ext never builds through a link into a folder it did not make")
    if not out.exists():
        return
    if not out.is_dir():
        raise AssetsFolderError(f"{out}: not a folder; give a new or empty folder for the assets")
    if not any(out.iterdir()):
        return
    manifest = out / MANIFEST
    if manifest.is_symlink() or not manifest.exists():
        raise AssetsFolderError(f"{out}: a folder that verl-ext did not write (no {MANIFEST} of its own); refusing to "
                                "replace it. Give a new or empty folder, or remove this one yourself")
    if not isinstance(read_manifest(manifest).get("files"), dict):
        raise AssetsFolderError(f"{manifest}: not a manifest verl-ext wrote (no 'files' object); refusing to replace "
                                f"{out}. Give a new or empty folder, or remove this one yourself")


@contextmanager
def staged_folder(out: Path, prefix: str) -> Iterator[Path]:
    """A fresh folder beside ``out`` to build into. When the block ends without an error it replaces ``out``,
    so no reader ever sees a half-written folder; on an error it is removed and ``out`` is left as it was.
    ``out`` is checked (:func:`check_replaceable`) before the block and again right before it is replaced."""
    out = Path(os.path.abspath(out))
    check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = new_folder(out.parent, prefix)  # mode 0777 less the umask, as the folder it becomes should have
    try:
        yield staging
        check_replaceable(out)
        if out.exists():
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def build_tiny_assets(
    out: Path,
    seed: int = DEFAULT_SEED,
    train_examples: int = DEFAULT_TRAIN_EXAMPLES,
    val_examples: int = DEFAULT_VAL_EXAMPLES,
    force: bool = False,
    size: str = DEFAULT_SIZE,
) -> dict[str, Any]:
    """Build (or keep, when current) the assets of ``size`` in ``out``; returns the manifest. A folder verl-ext did
    not write is refused before anything is built (:func:`check_replaceable`)."""
    from verl_ext.tiny import letters, task
    from verl_ext.tiny.sizes import LETTERS_TASK, assets_size

    spec = assets_size(size)
    for name, value in (("train_examples", train_examples), ("val_examples", val_examples)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")
    out = Path(os.path.abspath(out))  # not resolved: a link is refused, never followed
    check_replaceable(out)
    wanted = recipe(seed, train_examples, val_examples, size)
    if not force and assets_are_current(out, wanted):
        return read_manifest(out / MANIFEST)

    from verl_ext.tiny.model import build_model, count_parameters
    from verl_ext.tiny.tokenizer import build_synthetic_tokenizer, build_tokenizer

    task_module = letters if spec.task == LETTERS_TASK else task
    with staged_folder(out, prefix=".tiny-assets-") as staging:
        tokenizer = build_tokenizer() if spec.vocab_size is None else build_synthetic_tokenizer(spec.vocab_size)
        model = build_model(tokenizer, seed=seed, size=spec.model, dtype=spec.dtype)
        model.save_pretrained(staging / "model", safe_serialization=True)
        tokenizer.save_pretrained(staging / "model")
        (staging / "data").mkdir()
        _write_split(task_module.make_split(train_examples, "train", seed), staging / "data" / "train.parquet")
        _write_split(task_module.make_split(val_examples, "val", seed), staging / "data" / "val.parquet")
        manifest = {
            "recipe": wanted,
            "parameters": count_parameters(model),
            "reward_function": {"path": REWARD_FUNCTION[0], "name": REWARD_FUNCTION[1]},
            "files": file_checksums(staging),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: Optional[Sequence[str]] = None) -> int:
    from verl_ext.checks.arguments import int_in, positive_int
    from verl_ext.tiny.sizes import SIZES

    parser = argparse.ArgumentParser(prog="verl-ext tiny-assets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=list(SIZES), default=DEFAULT_SIZE,
                        help="; ".join(f"{name}: {size.description}" for name, size in SIZES.items()) + " (default cpu)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder: new, empty, or one verl-ext built (default: assets/<folder of the size> "
                             f"in a checkout, e.g. {default_assets_dir()})")
    parser.add_argument("--seed", type=int_in(0, MAX_SEED), default=DEFAULT_SEED)
    parser.add_argument("--train-examples", type=positive_int, default=DEFAULT_TRAIN_EXAMPLES)
    parser.add_argument("--val-examples", type=positive_int, default=DEFAULT_VAL_EXAMPLES)
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is current")
    args = parser.parse_args(argv)
    out = args.out or default_assets_dir(args.size)
    try:
        manifest = build_tiny_assets(out, args.seed, args.train_examples, args.val_examples, args.force, args.size)
    except AssetsFolderError as refused:
        print(f"verl-ext tiny-assets: error: {refused}", file=sys.stderr)
        return 2
    print(f"tiny assets ({args.size} size) in {Path(os.path.abspath(out))}: {manifest['parameters']:,} parameters, "
          f"{args.train_examples} train / {args.val_examples} val examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
