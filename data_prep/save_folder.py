"""The output folder (``--local_save_dir``): checked before any work, replaced as a whole at the end.

*Checked*: it must not be a file, the raw input folder, a folder inside it, or a place where an output
would replace an input file (checked before anything is converted, so a mistaken flag costs nothing).

*Replaced as a whole*: the parquet files and the manifest are first written into a hidden folder inside
it (``.partial-<pid>-<random>``, on the same file system, so moving a file out is one atomic rename).
Each file is fsync'ed there, so a write error the kernel reports only when the data reaches the disk (a
full disk on a network file system, an I/O error) stops the run before anything moves. Only when every
file is complete are they moved into place: the old manifest moves out first (into the hidden folder),
then each old output moves out and its successor in, stale outputs of the previous manifest move out,
and the new manifest comes last. So at every instant each visible file is complete (never
half-written), and the manifest is present only when the files it names are exactly the ones of one
run; readers check it (:mod:`data_prep.manifest`).

Any failure leaves the previous outputs and their manifest as they were: before the moves, nothing in
the folder has changed; during them (a rename that fails), the moves made so far are undone in reverse
order, and the message says so. The hidden folder is removed in every case (after ``kill -9``, by the
next run). Every ``OSError`` (a full disk, an I/O error, the folder removed meanwhile) is a
:class:`DataPrepError` naming the file and the cause (``error: ...``, exit status 2), never a traceback.
Ctrl-C and SIGTERM are held back during the moves; only ``kill -9`` or a power cut in that instant can
leave a folder without manifest (refused by the check, so prepared again), or one whose previous
outputs sit in an abandoned hidden folder.

The folder itself is not fsync'ed after the renames: after a power cut, any torn state (a rename lost,
a manifest from before) is caught by the manifest's sizes and SHA-256, so the folder is prepared again
rather than trusted. If the folder is *moved* elsewhere while a run writes into it, the hidden folder
moves with it and is removed by the next run there.
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
    """The resolved save folder; a DataPrepError when it cannot be one or overlaps the inputs.

    Refused: a place the project's output-place rules refuse (:func:`verl_ext.files.output_place_problem`: a file,
    FIFO or device, a path below a file, a link to nothing, a place where nothing can be written; a link to a folder
    is followed, as the outputs are written where it points); equal to or inside the raw folder ``dataset_path``;
    the folder holding an input file (Guru's math file given by its path: an output or a stale output's removal
    could hit it). A raw folder *inside* the save folder is fine (outputs never touch subfolders).
    """
    from verl_ext.files import check_output_place

    given = Path(save_dir).expanduser()
    check_output_place(given, "save folder", DataPrepError, follow_links=True, option="--local_save_dir")
    target = given.resolve()
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
        raise DataPrepError(f"--local_save_dir {save_dir}: cannot write there ({_cause(error)})") from None
    try:
        files = {}
        for name, rows in outputs.items():
            path = partial / f"{name}.parquet"
            try:
                write_parquet(rows, path)
            except OSError as error:
                raise _write_failed(save_dir, path.name, error) from None
            except Exception as error:  # pyarrow's type errors: a bug in a converter, never the user's data
                raise DataPrepError(
                    f"the rows of '{name}' cannot be stored as parquet ({type(error).__name__}: {error}); "
                    "nothing written. Please report this with the input that caused it."
                ) from None
            try:
                sync_file(path)
                files[path.name] = describe_file(path, len(rows))
            except OSError as error:
                raise _write_failed(save_dir, path.name, error) from None
        try:
            write_whole_file(partial / MANIFEST_NAME, _json(manifest(dataset, options, files, reports)).encode("utf-8"))
        except OSError as error:
            raise _write_failed(save_dir, MANIFEST_NAME, error) from None
        in_the_way = [name for name in (*files, MANIFEST_NAME) if (save_dir / name).is_dir()]
        if in_the_way:
            raise DataPrepError(f"{save_dir}: {in_the_way} are folders; outputs cannot replace them (nothing written)")
        with _signals_held():
            _commit(partial, save_dir, list(files))
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return {Path(name).stem: save_dir / name for name in files}


def write_whole_file(path: Path, data: bytes) -> None:
    """Create ``path`` (it must not exist), write all of ``data`` and fsync it; ``OSError`` on any failure."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_file(path: Path) -> None:
    """fsync a written file: the kernel reports a deferred write error (a full disk, an I/O error) here."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _cause(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _write_failed(save_dir: Path, name: str, error: OSError) -> DataPrepError:
    """The error for a file that could not be written into the hidden folder (nothing moved yet)."""
    if not save_dir.is_dir():
        return DataPrepError(
            f"{save_dir}: cannot write {name} ({_cause(error)}): the folder was removed while the outputs were written"
        )
    return DataPrepError(f"{save_dir}: cannot write {name} ({_cause(error)}); the previous output there is unchanged")


def _commit(partial: Path, save_dir: Path, names: list[str]) -> None:
    """Manifest out, each old file out and its successor in, stale outputs out, manifest in; every move a
    rename, undone in reverse order if a later one fails (the previous outputs come back)."""
    previous_manifest = read_manifest(save_dir) or {"files": {}}
    stale = [
        name for name in previous_manifest["files"] if name not in names and "/" not in name and name.endswith(".parquet")
    ]
    backup = partial / "previous"
    moves: list[tuple[Path, Path]] = []  # (from, to), in the order done

    def move(source: Path, target: Path) -> None:
        os.replace(source, target)
        moves.append((source, target))

    try:
        backup.mkdir()
        if (save_dir / MANIFEST_NAME).is_file():
            move(save_dir / MANIFEST_NAME, backup / MANIFEST_NAME)
        for name in names:
            if (save_dir / name).is_file():
                move(save_dir / name, backup / name)
            move(partial / name, save_dir / name)
        for name in stale:
            if (save_dir / name).is_file():
                move(save_dir / name, backup / name)
        move(partial / MANIFEST_NAME, save_dir / MANIFEST_NAME)
    except OSError as error:
        failed = error.filename2 or error.filename or "a file"
        undo_error = _undo(moves)
        if not save_dir.is_dir():
            raise DataPrepError(
                f"{save_dir}: moving the outputs into place failed at {Path(failed).name} ({_cause(error)}): the "
                "folder was removed meanwhile"
            ) from None
        if undo_error is None:
            raise DataPrepError(
                f"{save_dir}: moving the outputs into place failed at {Path(failed).name} ({_cause(error)}); the "
                "previous output was put back unchanged"
            ) from None
        raise DataPrepError(
            f"{save_dir}: moving the outputs into place failed at {Path(failed).name} ({_cause(error)}), and putting "
            f"the previous output back failed too ({_cause(undo_error)}); the folder has no {MANIFEST_NAME} now, so "
            "run scripts will prepare it again"
        ) from None


def _undo(moves: list[tuple[Path, Path]]) -> OSError | None:
    """Reverse the renames made (last first); the first error, or None when all were undone."""
    for source, target in reversed(moves):
        try:
            os.replace(target, source)
        except OSError as error:
            return error
    return None


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
