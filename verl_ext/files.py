"""Files verl-ext writes and reads back: written whole or not at all, read back only when they are what they claim.

:func:`write_whole`: the content goes to a temporary file in the target's folder, is flushed and fsync'ed, and
is renamed over the target (then the folder is fsync'ed). The file has the mode a plain ``open(path, "w")`` gives a
new file (0666 less the umask: 0644 with the usual umask), and so has a folder made by :func:`new_folder`. A failure at any point (a full disk, a file-size
limit, an exception while the content is produced, a kill) leaves the earlier file as it was and no temporary
file behind (but for a kill, which leaves a hidden ``.<name>.*.tmp``). A reader never sees half a file.

:func:`open_regular` / :func:`read_bounded`: a file read back must be a regular file (a FIFO would block the
reader for ever, a link to ``/dev/zero`` or ``/dev/urandom`` never ends) no larger than the caller's bound,
checked on the open descriptor (no race between the check and the read); otherwise the caller's error type,
naming the file. :func:`read_json_file` and :func:`read_yaml_file` read a whole JSON or YAML file that way, the one
reader of the configs, adapters and summaries verl-ext reads (a multi-turn tool config, an agent-loop config, a peft
adapter's config, a checkpoint's records). Callers: the metrics reader (:mod:`verl_ext.metrics_file`), the run
description (:mod:`verl_ext.run_description`), the delayed_sync checkpoint state
(:mod:`verl_ext.staleness.checkpoint_state`), the driver's checks (:mod:`verl_ext.checks`), ``verl-ext plot``'s PNG.

:func:`output_place_problem` / :func:`check_output_place`: the one home of the rules for a place verl-ext writes an
output (a folder or a file), checked before any work: no write through a link, no file where a folder is wanted (or
the reverse), nothing below a file, no link to nothing, a writable place. Callers: the assets builder, the GPU plan,
the benchmarks, :func:`verl_ext.runs.outputs.output_folder` (every ``Outputs``, the quickstart, the lab) and the run
scripts' environment and launcher.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable, Optional


def _new_file(folder: Path, name: str) -> tuple[int, Path]:
    """A new hidden ``.<name>.<random>.tmp`` in ``folder``, open for writing, created as ``open(..., "w")`` creates a
    file (mode 0666 less the umask: readable by others as usual, not 0600 as ``mkstemp`` makes it); never an existing
    file or link (``O_EXCL``)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        staged = folder / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(staged, flags, 0o666), staged
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder}: no free temporary name for {name}")


def new_folder(parent: str | os.PathLike, prefix: str) -> Path:
    """A new folder ``<parent>/<prefix><random>`` to build an output in before it is renamed into place, created as
    ``mkdir`` creates one (mode 0777 less the umask; ``tempfile.mkdtemp`` makes it 0700, and the output then keeps
    that mode)."""
    for _ in range(100):
        folder = Path(parent) / f"{prefix}{secrets.token_hex(6)}"
        try:
            folder.mkdir(0o777)
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent}: no free name for a new folder {prefix}*")


def write_whole(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then put it in place (see the module docstring)."""
    path = Path(path)
    handle, staged = _new_file(path.parent, path.name)
    try:
        with os.fdopen(handle, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(staged, path)
    except BaseException:
        try:
            os.unlink(staged)
        except FileNotFoundError:
            pass
        raise
    _fsync_folder(path.parent)
    return path


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (best effort: some file systems have no folder handles)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def describe_mode(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, max_bytes: int, what: str, error: type[Exception]) -> BinaryIO:
    """``path`` opened for reading when it is a regular file (a link to one is fine) of at most ``max_bytes``;
    else ``error("<path>: ...")`` naming ``what`` it should have been."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once instead of blocking; fstat then refuses it
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as failure:
        raise error(f"{path}: cannot read the {what} ({failure.strerror or failure})") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: {describe_mode(info.st_mode)}, not a regular file: not the {what}")
        if info.st_size > max_bytes:
            raise error(f"{path}: {info.st_size} bytes, more than the {max_bytes} a {what} may have")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bounded(path: str | os.PathLike, max_bytes: int, what: str, error: type[Exception]) -> bytes:
    """The content of the regular file ``path`` (see :func:`open_regular`); ``error`` when it grew past the
    bound while being read."""
    with open_regular(path, max_bytes, what, error) as file:
        try:
            content = file.read(max_bytes + 1)
        except OSError as failure:
            raise error(f"{path}: cannot read the {what} ({failure.strerror or failure})") from None
    if len(content) > max_bytes:
        raise error(f"{path}: more than the {max_bytes} bytes a {what} may have")
    return content


def parse_json(content: bytes, path: str | os.PathLike, error: type[Exception], not_text: str = "", cut_short: str = ""):
    """``content`` (read with :func:`read_bounded`) as JSON, or ``error`` naming ``path``: not UTF-8 text (then
    ``not_text``), nested too deeply, or not JSON (the decoder's reason, then ``cut_short``). A ValueError also
    covers an integer of thousands of digits."""
    import json

    try:
        return json.loads(content.decode("utf-8"))
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text{not_text}") from None
    except RecursionError:
        raise error(f"{path}: not JSON (nested too deeply)") from None
    except ValueError as problem:
        reason = problem.msg if isinstance(problem, json.JSONDecodeError) else str(problem)
        raise error(f"{path}: not JSON ({reason}{cut_short})") from None


def _kind(mode: int) -> str:
    return "a file" if stat.S_ISREG(mode) else describe_mode(mode)


def output_place_problem(path: str | os.PathLike, folder: bool = True, follow_links: bool = False,
                         writable: bool = True) -> Optional[str]:
    """Why ``path`` cannot be an output verl-ext writes (a folder when ``folder``, else a file), as a clause to follow
    "<path> cannot be the <what>: "; None when it is one or can be made one. The one home of the output-place rules:

    - a symbolic link at ``path`` is refused unless ``follow_links`` (a rebuild or a rename would replace what it
      points at; verl-ext never writes through one); a link to nothing anywhere on the path always is (verl-ext would
      create the link's target, somewhere the user did not name);
    - a file (or FIFO, device, socket) where a folder is wanted, a folder or anything but a regular file where a file
      is; a path below a file; a place that cannot be looked at (permission denied on the way, a link loop);
    - with ``writable``: a place where no file can be made (a probe file made and removed in the folder itself or in
      the deepest folder above it that exists: read-only file systems, permissions, even for root).

    Looks only, but for the probe."""
    path = Path(os.path.abspath(path))
    if not follow_links and path.is_symlink():
        return (f"it is a symbolic link (to {os.readlink(path)}): verl-ext never writes through a link; give the path "
                "itself")
    current = path
    while True:
        try:
            mode = current.stat().st_mode  # follows links: a link to a folder above is that folder
        except (FileNotFoundError, NotADirectoryError):
            if current.is_symlink():
                return ("it is a symbolic link to nothing" if current == path else
                        f"it is below {current}, which is a symbolic link to nothing")
            if current.parent == current:
                return f"no folder above {path} exists"
            current = current.parent
            continue
        except OSError as failure:  # permission denied on the way, a link loop, a name too long
            return f"{current}: {failure.strerror or failure}"
        if current == path:
            if folder and not stat.S_ISDIR(mode):
                return f"it is {_kind(mode)}"
            if not folder and not stat.S_ISREG(mode):
                return f"it is {_kind(mode)}"
        elif not stat.S_ISDIR(mode):
            return f"it is below {current}, which is {_kind(mode)}"
        break
    if not writable:
        return None
    existing = current if stat.S_ISDIR(mode) else current.parent
    try:
        handle, probe = tempfile.mkstemp(dir=existing, prefix=".verl-ext-write-check-")
    except OSError as failure:  # read-only file system, permission denied, no space left
        return f"cannot write in {existing} ({failure.strerror or failure})"
    os.close(handle)
    os.unlink(probe)
    return None


def check_output_place(path: str | os.PathLike, what: str, error: type[Exception], folder: bool = True,
                       follow_links: bool = False, writable: bool = True, option: str = "") -> Path:
    """Refuse an output ``path`` that cannot be written safely (:func:`output_place_problem`'s rules), before any work:
    ``error("[<option> ]<path> cannot be the <what>: <why>")``. Returns the absolute path (not resolved)."""
    path = Path(os.path.abspath(path))
    problem = output_place_problem(path, folder=folder, follow_links=follow_links, writable=writable)
    if problem:
        raise error(f"{option + ' ' if option else ''}{path} cannot be the {what}: {problem}")
    return path


def read_json_file(path: str | os.PathLike, max_bytes: int, what: str, error: type[Exception]):
    """The JSON value in the regular file ``path`` of at most ``max_bytes`` (:func:`read_bounded`, :func:`parse_json`);
    ``error`` naming the file and ``what`` it should be otherwise."""
    return parse_json(read_bounded(path, max_bytes, what, error), path, error)


def read_yaml_file(path: str | os.PathLike, max_bytes: int, what: str, error: type[Exception]):
    """The YAML document in the regular file ``path`` of at most ``max_bytes``, as plain containers (OmegaConf's YAML
    loader, interpolations resolved as verl resolves them); ``error`` naming the file otherwise."""
    from omegaconf import OmegaConf

    content = read_bounded(path, max_bytes, what, error)
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not UTF-8 text: not the {what}") from None
    try:
        loaded = OmegaConf.create(text)
        return OmegaConf.to_container(loaded, resolve=True)
    except Exception as problem:  # YAML syntax, an interpolation that does not resolve, a scalar document
        raise error(f"{path}: not readable YAML ({type(problem).__name__}: {str(problem).strip()[:300]}): not the "
                    f"{what}") from None
