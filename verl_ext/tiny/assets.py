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
is (``--force`` rebuilds).

What a rebuild may replace (:func:`check_replaceable`): only what verl-ext wrote, as its ``manifest.json`` lists it.
A folder is replaced when it is empty, or when it holds verl-ext's ``manifest.json`` (a UTF-8 JSON object with a
``files`` object) and nothing but the files that manifest lists (and the folders holding them); a listed file is
verl-ext's whatever its content now (a damaged build is rebuilt). A file the manifest does not list (a user's notes
put beside the weights, a folder of their own) makes the build refuse, naming the files, with ``--force`` or any
other recipe too: nothing of the user's is ever deleted. Refused as well, before anything is built: a symbolic link
(whatever it points at), a file, a path below a file, a folder that cannot be written, a ``manifest.json`` that is
not a UTF-8 JSON object, more than :data:`MAX_EXAMPLES` examples per split, and a size whose build would need more
memory than the machine has available (:func:`verl_ext.tiny.sizes.build_memory_bytes`; ``--skip-memory-check`` to
build anyway). A write that fails half-way (a full disk) leaves the folder as it was. Each is ``error: <path>:
<what>`` and exit 2 from the command, :class:`AssetsFolderError` from Python.
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
MAX_EXAMPLES = 100_000  # per split: a task's rows are held in memory before they are written
MAX_NAMED = 10  # files not in the manifest named in a refusal


class AssetsFolderError(OSError):
    """The builder refuses or cannot finish: a folder it must not replace (not verl-ext's, holding files its
    manifest does not list, a link, a file), a place it cannot write, a manifest it cannot read, a build larger than
    the memory available; the message names the path."""


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


def not_listed(out: Path, listed: Any) -> list[str]:
    """What ``out`` holds that verl-ext's manifest does not list: files (and links, FIFOs, ...) not in ``listed``
    (relative paths; ``manifest.json`` itself is verl-ext's), folders that hold no listed file (``name/``), and links
    to folders. Nothing is followed."""
    listed = {str(name) for name in listed} | {MANIFEST}
    needed = {str(parent) for name in listed for parent in Path(name).parents if str(parent) != "."}
    found = []
    for root, folders, names in os.walk(out):
        here = Path(root).relative_to(out)
        for folder in list(folders):
            relative = str(here / folder)
            if os.path.islink(os.path.join(root, folder)) or relative not in needed:
                found.append(relative if os.path.islink(os.path.join(root, folder)) else relative + "/")
                folders.remove(folder)  # not walked: it is not verl-ext's as a whole
        found += [str(here / name) for name in names if str(here / name) not in listed]
    return sorted(found)


def check_replaceable(out: Path) -> None:
    """Refuse (:class:`AssetsFolderError`) to build into ``out`` unless replacing it loses nothing verl-ext did not
    write (the module docstring's rule): ``out`` is absent, an empty folder, or a folder with verl-ext's manifest (a
    JSON object listing its ``files``) holding nothing else. A symbolic link is refused whatever it points at (the
    build would replace what it points at), so is a file, a path below a file, a place that cannot be written; a
    manifest that is not UTF-8 JSON is an error naming it."""
    from verl_ext.files import check_output_place

    out = check_output_place(out, "assets folder", AssetsFolderError)
    if not out.exists() or not any(out.iterdir()):
        return
    manifest = out / MANIFEST
    if manifest.is_symlink() or not manifest.exists():
        raise AssetsFolderError(f"{out}: a folder that verl-ext did not write (no {MANIFEST} of its own); refusing to "
                                "replace it. Give a new or empty folder, or remove this one yourself")
    files = read_manifest(manifest).get("files")
    if not isinstance(files, dict):
        raise AssetsFolderError(f"{manifest}: not a manifest verl-ext wrote (no 'files' object); refusing to replace "
                                f"{out}. Give a new or empty folder, or remove this one yourself")
    foreign = not_listed(out, files)
    if foreign:
        named = ", ".join(foreign[:MAX_NAMED]) + (f" and {len(foreign) - MAX_NAMED} more" if len(foreign) > MAX_NAMED else "")
        raise AssetsFolderError(f"{out}: holds {len(foreign)} file(s) that its {MANIFEST} does not list, so verl-ext "
                                f"did not write them: {named}; refusing to rebuild over them (--force too). Move them "
                                "out of the folder, or give another folder")


def _write_failure(failure: BaseException) -> bool:
    """An error of writing the build (a full disk, a read-only place, a file-size limit), as the writers report it:
    an OSError, or safetensors' own error type for the weights."""
    if isinstance(failure, OSError):
        return True
    return type(failure).__name__ == "SafetensorError"


@contextmanager
def staged_folder(out: Path, prefix: str) -> Iterator[Path]:
    """A fresh folder beside ``out`` to build into. When the block ends without an error it replaces ``out``,
    so no reader ever sees a half-written folder; on an error it is removed and ``out`` is left as it was (a
    write that fails, a full disk: :class:`AssetsFolderError` naming ``out`` and the cause). ``out`` is checked
    (:func:`check_replaceable`) before the block and again right before it is replaced; the folder it replaces is
    first moved aside, then removed once the new one is in place."""
    out = Path(os.path.abspath(out))
    check_replaceable(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = new_folder(out.parent, prefix)  # mode 0777 less the umask, as the folder it becomes should have
    except OSError as failure:
        raise AssetsFolderError(f"{out}: cannot make a folder there ({failure.strerror or failure})") from None
    try:
        yield staging
        check_replaceable(out)
        if out.exists():
            aside = new_folder(out.parent, prefix + "replaced-")
            os.rename(out, aside)  # onto the new empty folder: one rename, then the new build takes its place
            try:
                staging.rename(out)
            except BaseException:
                os.rename(aside, out)
                raise
            shutil.rmtree(aside, ignore_errors=True)
        else:
            staging.rename(out)
    except AssetsFolderError:
        raise
    except BaseException as failure:
        if _write_failure(failure):
            reason = getattr(failure, "strerror", None) or failure
            raise AssetsFolderError(f"{out}: the build could not be written ({reason}); {out} was left as it was") from None
        raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def available_memory_bytes() -> Optional[int]:
    """The memory the kernel says a new process can take without swapping (``MemAvailable``), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class AssetsTooLarge(AssetsFolderError):
    """A build that needs more memory than is available (the message gives both)."""


def check_memory(size: str) -> None:
    """:class:`AssetsTooLarge` when the estimate of a build of ``size`` exceeds the memory available."""
    from verl_ext.tiny.sizes import assets_size, build_memory_bytes

    needed, available = build_memory_bytes(assets_size(size)), available_memory_bytes()
    if available is not None and needed > available:
        raise AssetsTooLarge(f"--size {size}: building it takes about {needed / 2**30:.1f} GiB of memory and "
                             f"{available / 2**30:.1f} GiB are available; build it on a larger machine, free memory, or "
                             "pass --skip-memory-check to build anyway")


def build_tiny_assets(
    out: Path,
    seed: int = DEFAULT_SEED,
    train_examples: int = DEFAULT_TRAIN_EXAMPLES,
    val_examples: int = DEFAULT_VAL_EXAMPLES,
    force: bool = False,
    size: str = DEFAULT_SIZE,
    memory_check: bool = True,
) -> dict[str, Any]:
    """Build (or keep, when current) the assets of ``size`` in ``out``; returns the manifest. A folder verl-ext did
    not write is refused before anything is built (:func:`check_replaceable`)."""
    from verl_ext.tiny import letters, task
    from verl_ext.tiny.sizes import LETTERS_TASK, assets_size

    spec = assets_size(size)
    for name, value in (("train_examples", train_examples), ("val_examples", val_examples)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_EXAMPLES:
            raise ValueError(f"{name} must be an integer in 1..{MAX_EXAMPLES}, got {value!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")
    out = Path(os.path.abspath(out))  # not resolved: a link is refused, never followed
    check_replaceable(out)
    wanted = recipe(seed, train_examples, val_examples, size)
    if not force and assets_are_current(out, wanted):
        return read_manifest(out / MANIFEST)
    if memory_check:
        check_memory(size)

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
    from verl_ext.checks.arguments import int_in
    from verl_ext.tiny.sizes import SIZES

    parser = argparse.ArgumentParser(prog="verl-ext tiny-assets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=list(SIZES), default=DEFAULT_SIZE,
                        help="; ".join(f"{name}: {size.description}" for name, size in SIZES.items()) + " (default cpu)")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder: new, empty, or one verl-ext built (default: assets/<folder of the size> "
                             f"in a checkout, e.g. {default_assets_dir()})")
    parser.add_argument("--seed", type=int_in(0, MAX_SEED), default=DEFAULT_SEED)
    parser.add_argument("--train-examples", type=int_in(1, MAX_EXAMPLES), default=DEFAULT_TRAIN_EXAMPLES)
    parser.add_argument("--val-examples", type=int_in(1, MAX_EXAMPLES), default=DEFAULT_VAL_EXAMPLES)
    parser.add_argument("--force", action="store_true", help="rebuild even when the directory is current (files its "
                        "manifest does not list are never deleted: the build refuses, naming them)")
    parser.add_argument("--skip-memory-check", action="store_true",
                        help="build even when the estimated memory of the build exceeds what is available")
    args = parser.parse_args(argv)
    out = args.out or default_assets_dir(args.size)
    try:
        manifest = build_tiny_assets(out, args.seed, args.train_examples, args.val_examples, args.force, args.size,
                                     memory_check=not args.skip_memory_check)
    except AssetsFolderError as refused:
        print(f"verl-ext tiny-assets: error: {refused}", file=sys.stderr)
        return 2
    print(f"tiny assets ({args.size} size) in {Path(os.path.abspath(out))}: {manifest['parameters']:,} parameters, "
          f"{args.train_examples} train / {args.val_examples} val examples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
