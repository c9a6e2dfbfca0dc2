"""The output folder (``--local_save_dir``): checked before any work, replaced as a whole at the end.

*Checked*: it must not be a file, the raw input folder, a folder inside it, or a place where an output
would replace an input file (checked before anything is converted, so a mistaken flag costs nothing).

*Replaced as a whole*: the parquet files and the manifest are first written into a hidden folder inside
it (``.partial-<pid>-<random>``, on the same file system, so moving a file out is one atomic rename).
Only when every file is complete are they moved into place: the old manifest is removed first, each
parquet file is renamed over its predecessor, and the new manifest comes last. So at every instant each
visible file is complete (never half-written), and the manifest is present only when the files it names
are exactly the ones of one run; readers check it (:mod:`data_prep.manifest`). Any failure before that
point (an exception, Ctrl-C, ``kill -9``) leaves the previous outputs and their manifest untouched; the
hidden folder is removed (after ``kill -9``, by the next run). Ctrl-C and SIGTERM are held back during
the few renames; only ``kill -9`` or a power cut in that instant can leave a folder without manifest.

Nothing is fsync'ed: a process that dies leaves the page cache intact, and after a power cut any torn
state (an empty file, a manifest from before) is caught by the manifest's sizes and SHA-256, so the
folder is prepared again rather than trusted.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from data_prep.manifest import MANIFEST_NAME, describe_file, manifest, read_manifest
from data_prep.split_report import DataPrepError

PARTIAL_PREFIX = ".partial-"


def check_save_dir(save_dir: str | Path, dataset_path: str | Path | None, input_files: Iterable[Path]) -> Path:
    """The resolved save folder; a DataPrepError when it is a file or overlaps the inputs.

    Refused: a save folder that is a file (or below one); equal to or inside the raw folder
    ``dataset_path``; the folder holding an input file (Guru's math file given by its path: an output or
    a stale output's removal could hit it). A raw folder *inside* the save folder is fine (outputs never
    touch subfolders).
    """
    given = Path(save_dir).expanduser()
    target = given.resolve()
    for parent in (target, *target.parents):
        if parent.exists():
            if not parent.is_dir():
                raise DataPrepError(f"--local_save_dir {given}: {parent} exists and is not a folder")
            break
    raw_places = [Path(dataset_path).expanduser().resolve()] if dataset_path is not None else []
    raw_places += [Path(f).resolve() for f in input_files]
    for place in raw_places:
        if target == place or place in target.parents:
            raise DataPrepError(
                f"--local_save_dir {given} is (or is inside) the raw input {place}: the outputs could replace "
                "the raw files; choose another folder"
            )
    for path in input_files:
        if Path(path).resolve().parent == target:
            raise DataPrepError(
                f"--local_save_dir {given} holds the raw input file {Path(path).name}: the outputs could replace "
                "it; choose another folder"
            )
    return target


def replace_outputs(
    save_dir: Path, outputs: dict[str, Sequence[dict[str, Any]]], dataset: str, options: dict, reports: list[dict]
) -> dict[str, Path]:
    """Write ``<save_dir>/<name>.parquet`` for every output, plus the manifest, all at once (see above)."""
    from data_prep.verl_rows import write_parquet

    save_dir = Path(save_dir)
    try:
        save_dir.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_partials(save_dir)
        partial = Path(tempfile.mkdtemp(prefix=f"{PARTIAL_PREFIX}{os.getpid()}-", dir=save_dir))
    except OSError as error:
        raise DataPrepError(f"--local_save_dir {save_dir}: cannot write there ({error.strerror or error})") from None
    try:
        files = {}
        for name, rows in outputs.items():
            path = partial / f"{name}.parquet"
            try:
                write_parquet(rows, path)
            except OSError as error:
                raise DataPrepError(f"{save_dir}: cannot write {path.name} ({error.strerror or error})") from None
            except Exception as error:  # pyarrow's type errors: a bug in a converter, never the user's data
                raise DataPrepError(
                    f"the rows of '{name}' cannot be stored as parquet ({type(error).__name__}: {error}); "
                    "nothing written. Please report this with the input that caused it."
                ) from None
            files[path.name] = describe_file(path, len(rows))
        (partial / MANIFEST_NAME).write_text(_json(manifest(dataset, options, files, reports)), encoding="utf-8")
        in_the_way = [name for name in (*files, MANIFEST_NAME) if (save_dir / name).is_dir()]
        if in_the_way:
            raise DataPrepError(f"{save_dir}: {in_the_way} are folders; outputs cannot replace them (nothing written)")
        with _signals_held():
            try:
                _commit(partial, save_dir, list(files))
            except OSError as error:
                raise DataPrepError(
                    f"{save_dir}: moving the outputs into place failed ({error.strerror or error}); the folder has "
                    f"no {MANIFEST_NAME} now, so run scripts will prepare it again"
                ) from None
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return {Path(name).stem: save_dir / name for name in files}


def _commit(partial: Path, save_dir: Path, names: list[str]) -> None:
    """Manifest out, files in, stale outputs of the previous manifest out, manifest in."""
    previous = read_manifest(save_dir) or {"files": {}}
    (save_dir / MANIFEST_NAME).unlink(missing_ok=True)
    for name in names:
        os.replace(partial / name, save_dir / name)
    for name in previous["files"]:
        if name not in names and "/" not in name and name.endswith(".parquet"):
            (save_dir / name).unlink(missing_ok=True)
    os.replace(partial / MANIFEST_NAME, save_dir / MANIFEST_NAME)


def _remove_abandoned_partials(save_dir: Path) -> None:
    """Remove hidden folders left by runs that were killed (their process is gone)."""
    for folder in save_dir.glob(f"{PARTIAL_PREFIX}*"):
        pid_text = folder.name[len(PARTIAL_PREFIX) :].split("-", 1)[0]
        if folder.is_dir() and pid_text.isdigit() and not _alive(int(pid_text)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def _signals_held():
    """Defer SIGINT and SIGTERM (main thread only) while the files are renamed into place."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _json(data: Any) -> str:
    import json

    return json.dumps(data, indent=1, ensure_ascii=True) + "\n"
