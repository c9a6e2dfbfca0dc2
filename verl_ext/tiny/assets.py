"""Build the tiny offline assets: model + tokenizer and the counting task's parquet files. Nothing downloaded.

    python -m verl_ext.tiny.assets --out assets/tiny        (or: verl-ext tiny-assets --out assets/tiny)
    python -m verl_ext.tiny.assets --size gpu               (head_dim 64 for vLLM: assets/tiny-gpu)

``--size`` picks the model (:data:`verl_ext.tiny.model.MODEL_SIZES`): ``cpu`` (hidden 64, head_dim 16,
126K parameters) for the CPU backend, ``gpu`` (hidden 256, 4 heads of 64) for vLLM on a GPU. Tokenizer and
task data are the same for both.

Layout of ``--out``::

    model/            Qwen2 config, safetensors weights, generation config, tokenizer (HF format)
    data/train.parquet, data/val.parquet      verl RL format (data_source, prompt, ability, reward_model, extra_info)
    manifest.json     recipe (seed, sizes, versions) and sha256 of every file

The build is deterministic: the same recipe writes byte-identical files. An existing directory whose
manifest has the same recipe and whose files still match their checksums is left as it is (``--force``
rebuilds). The reward function is :func:`verl_ext.tiny.task.compute_score`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional, Sequence

from verl_ext import data_sources

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


DEFAULT_SIZE = "cpu"
FOLDER_NAMES = {"cpu": "tiny", "gpu": "tiny-gpu"}


def _check_size(size: str) -> None:
    if size not in FOLDER_NAMES:
        raise ValueError(f"tiny assets size {size!r} is unknown; allowed: {', '.join(FOLDER_NAMES)}")


def default_assets_dir(size: str = DEFAULT_SIZE) -> Path:
    """``<repo>/assets/tiny`` (``tiny-gpu`` for the gpu size) for a source checkout (gitignored), else
    the same name under ``~/.cache/verl-ext``."""
    _check_size(size)
    repo = Path(__file__).resolve().parents[2]
    if (repo / "setup.py").is_file() and (repo / "verl_ext").is_dir():
        return repo / "assets" / FOLDER_NAMES[size]
    return Path.home() / ".cache" / "verl-ext" / FOLDER_NAMES[size]


def recipe(seed: int, train_examples: int, val_examples: int, size: str = DEFAULT_SIZE) -> dict[str, Any]:
    import tokenizers
    import transformers

    from verl_ext.tiny import task
    from verl_ext.tiny.model import MODEL_SIZES

    _check_size(size)

    return {
        "format": ASSETS_FORMAT,
        "seed": seed,
        "train_examples": train_examples,
        "val_examples": val_examples,
        "task": {"data_source": data_sources.TINY_COUNT, "max_count": task.MAX_COUNT},
        "model_size": asdict(MODEL_SIZES[size]),
        "versions": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
    }


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


def assets_are_current(out: Path, wanted_recipe: dict[str, Any]) -> bool:
    """True when ``out`` holds a build of ``wanted_recipe`` whose files all match the manifest."""
    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        return False
    manifest = json.loads(manifest_path.read_text())
    return manifest.get("recipe") == wanted_recipe and manifest.get("files") == file_checksums(out)


@contextmanager
def staged_folder(out: Path, prefix: str) -> Iterator[Path]:
    """A fresh folder beside ``out`` to build into. When the block ends without an error it replaces ``out``,
    so no reader ever sees a half-written folder; on an error it is removed and ``out`` is left as it was."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=out.parent))
    try:
        yield staging
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
    """Build (or keep, when current) the assets of model ``size`` in ``out``; returns the manifest."""
    from verl_ext.tiny import task
    from verl_ext.tiny.model import MODEL_SIZES, build_model, count_parameters
    from verl_ext.tiny.tokenizer import build_tokenizer

    if train_examples < 1 or val_examples < 1:
        raise ValueError(f"train_examples and val_examples must be >= 1, got {train_examples}, {val_examples}")
    out = Path(out).resolve()
    wanted = recipe(seed, train_examples, val_examples, size)
    if not force and assets_are_current(out, wanted):
        return json.loads((out / "manifest.json").read_text())

    with staged_folder(out, prefix=".tiny-assets-") as staging:
        tokenizer = build_tokenizer()
        model = build_model(tokenizer, seed=seed, size=MODEL_SIZES[size])
        model.save_pretrained(staging / "model", safe_serialization=True)
        tokenizer.save_pretrained(staging / "model")
        (staging / "data").mkdir()
        _write_split(task.make_split(train_examples, "train", seed), staging / "data" / "train.parquet")
        _write_split(task.make_split(val_examples, "val", seed), staging / "data" / "val.parquet")
        manifest = {
            "recipe": wanted,
            "parameters": count_parameters(model),
            "reward_function": {"path": REWARD_FUNCTION[0], "name": REWARD_FUNCTION[1]},
            "files": file_checksums(staging),
        }
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="verl-ext tiny-assets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(FOLDER_NAMES), default=DEFAULT_SIZE,
                        help="cpu: the CPU backend's model (head_dim 16); gpu: head_dim 64, for vLLM (default cpu)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output directory (default: {default_assets_dir()}, or {default_assets_dir('gpu')} for --size gpu)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--train-examples", type=int, default=DEFAULT_TRAIN_EXAMPLES)
    parser.add_argument("--val-examples", type=int, default=DEFAULT_VAL_EXAMPLES)
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is current")
    args = parser.parse_args(argv)
    out = args.out or default_assets_dir(args.size)
    manifest = build_tiny_assets(out, args.seed, args.train_examples, args.val_examples, args.force, args.size)
    print(f"tiny assets ({args.size} size) in {Path(out).resolve()}: {manifest['parameters']} parameters, "
          f"{args.train_examples} train / {args.val_examples} val examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
