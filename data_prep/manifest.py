"""The output folder's manifest: which files one run wrote, and whether the folder still holds exactly them.

Every command writes ``data_prep_manifest.json`` into its ``--local_save_dir`` after its parquet files,
as the last step of the atomic replacement (:mod:`data_prep.save_folder`). It lists each file with its
row count, size and SHA-256, the options that made it and the reports. A folder is *complete* when the
manifest is there and every file it names is there unchanged; anything else (no manifest: an interrupted
or older run; a file missing, resized or rewritten: files from two runs) is incomplete. The run scripts ask
before training::

    python -m data_prep.manifest DIR train.parquet test.parquet [--dataset toolace --args "--max_train_size 5000"]

exit status 0 when complete (and, with ``--dataset``, prepared with the same options), 1 otherwise with
the reason on stdout. Importing this module is cheap (standard library and :mod:`verl_ext.files` only).
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
from pathlib import Path
from typing import Any

MANIFEST_NAME = "data_prep_manifest.json"
FORMAT_VERSION = 1
# Options that say where things are, not what the rows hold: not compared.
LOCATION_OPTIONS = ("local_save_dir", "local_dataset_path")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_file(path: Path, rows: int) -> dict[str, Any]:
    return {"rows": rows, "bytes": Path(path).stat().st_size, "sha256": file_digest(path)}


def content_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options that decide the rows (locations left out)."""
    return {key: value for key, value in sorted(options.items()) if key not in LOCATION_OPTIONS}


def manifest(dataset: str, options: dict[str, Any], files: dict[str, dict], reports: list[dict]) -> dict:
    return {
        "format": FORMAT_VERSION,
        "dataset": dataset,
        "options": content_options(options),
        "files": files,
        "reports": reports,
    }


# the manifest lists a few files and the reports (a few KB); a FIFO or a link to /dev/zero is no manifest
MAX_MANIFEST_BYTES = 64 * 1024 * 1024


class _Unreadable(Exception):
    pass


def read_manifest(folder: Path) -> dict | None:
    """The folder's manifest, or None when it is absent, unreadable, or no regular file of bounded size (read with
    verl-ext's one bounded reader, :func:`verl_ext.files.read_json_file`: a FIFO never blocks it)."""
    from verl_ext.files import read_json_file

    path = Path(folder) / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        data = read_json_file(path, MAX_MANIFEST_BYTES, "data_prep manifest", _Unreadable)
    except _Unreadable:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None


def incompleteness(folder: Path, wanted: list[str], options: dict[str, Any] | None = None) -> str | None:
    """Why ``folder`` does not hold a complete output with the ``wanted`` files (None when it does).

    ``options``, when given, must equal the manifest's (locations aside).
    """
    folder = Path(folder)
    data = read_manifest(folder)
    if data is None:
        return f"no readable {MANIFEST_NAME} (an interrupted run, or one by an older verl-ext)"
    files = data["files"]
    for name in wanted:
        if name not in files:
            return f"{name} is not part of the last complete output ({sorted(files)})"
    for name, recorded in files.items():
        path = folder / name
        try:
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != recorded.get("bytes") or file_digest(path) != recorded.get("sha256"):
                return f"{name} differs from the one the last complete run wrote (files from two runs?)"
        except OSError as error:  # an I/O error, the file removed meanwhile: not a complete output
            return f"{name} cannot be read ({error.strerror or error})"
    if options is not None and data.get("options") != content_options(options):
        return f"prepared with other options ({data.get('options')}; wanted {content_options(options)})"
    return None


def options_of(dataset: str, args: str) -> dict[str, Any]:
    """The parsed options of ``python -m data_prep.<dataset> ARGS`` (as the command would record them)."""
    import importlib

    module = importlib.import_module(f"data_prep.{dataset}")
    return vars(module.build_parser().parse_args(shlex.split(args)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m data_prep.manifest",
        description="exit 0 when FOLDER holds a complete data_prep output with these files, 1 (saying why) if not",
    )
    parser.add_argument("folder")
    parser.add_argument("files", nargs="+", help="file names that must be part of the output")
    parser.add_argument("--dataset", help="with --args: also require the options the data was prepared with")
    parser.add_argument("--args", default="", help="the data_prep command's flags, as one string")
    args = parser.parse_args(argv)
    options = options_of(args.dataset, args.args) if args.dataset else None
    reason = incompleteness(Path(args.folder).expanduser(), args.files, options)
    if reason is None:
        return 0
    print(f"{args.folder}: incomplete: {reason}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
