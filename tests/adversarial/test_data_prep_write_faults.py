"""File-system faults while a data_prep command writes its outputs (issue 21, second round).

A full disk, an I/O error, the save folder removed meanwhile, a rename that fails: each must end in
``error: ...`` naming the file and the cause with exit status 2 (never a traceback), leave the previous
good output exactly as it was (manifest included) wherever the folder still exists, and leave no hidden
``.partial-*`` folder behind. The faults are the operating system's own errors: raised by ``os.write``,
``os.fsync`` and ``os.replace`` (replaced here to fail at one chosen call, the code under test unchanged),
or real: a file-size limit (``RLIMIT_FSIZE``) in a subprocess makes the kernel refuse the parquet write
as a full disk would.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_prep import gsm8k, manifest, save_folder
from data_prep.manifest import MANIFEST_NAME, incompleteness
from data_prep.save_folder import PARTIAL_PREFIX
from tests.adversarial.save_folders import PAIR, raw_gsm8k, snapshot

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]


def prepare(save_dir: Path, raw: Path, capsys) -> tuple[int, str]:
    status = gsm8k.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(raw)])
    return status, capsys.readouterr().err


def assert_clean_error(status: int, err: str, *fragments: str) -> None:
    assert status == 2 and err.startswith("error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def assert_previous_intact(save_dir: Path, before: dict) -> None:
    assert snapshot(save_dir) == before
    assert incompleteness(save_dir, PAIR) is None
    assert not list(save_dir.glob(f"{PARTIAL_PREFIX}*"))


def opened_file(descriptor: int) -> str:
    return os.readlink(f"/proc/self/fd/{descriptor}")


@pytest.mark.parametrize(
    "code, cause", [(errno.ENOSPC, "No space left on device"), (errno.EIO, "Input/output error")], ids=["ENOSPC", "EIO"]
)
def test_a_full_disk_or_io_error_while_the_manifest_is_written(tmp_path, capsys, previous, monkeypatch, code, cause):
    """The issue's case: a traceback, the previous output intact."""
    save_dir, before = previous
    real_write = os.write

    def write(descriptor, data):
        if opened_file(descriptor).endswith(MANIFEST_NAME):
            raise OSError(code, os.strerror(code))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", write)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(status, err, f"cannot write {MANIFEST_NAME} ({cause})", "the previous output there is unchanged")
    assert_previous_intact(save_dir, before)


def test_a_write_error_reported_only_by_fsync_names_the_parquet_file(tmp_path, capsys, previous, monkeypatch):
    """A network file system reports a full disk when the data reaches the server: at fsync, not write."""
    save_dir, before = previous
    real_fsync = os.fsync

    def fsync(descriptor):
        if opened_file(descriptor).endswith("test.parquet"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(status, err, "cannot write test.parquet (No space left on device)")
    assert_previous_intact(save_dir, before)


def test_a_real_file_size_limit_while_writing_parquet(tmp_path, previous):
    """The kernel refuses the write (EFBIG, as a full disk refuses with ENOSPC), inside pyarrow's C++ writer."""
    save_dir, before = previous
    raw = raw_gsm8k(tmp_path, 5)
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"  # else the kernel kills the process
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))\n"  # the parquet files are about 4 kB
        "from data_prep import gsm8k\n"
        f"sys.exit(gsm8k.main(['--local_save_dir', {str(save_dir)!r}, '--local_dataset_path', {str(raw)!r}]))\n"
    )
    child = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == 2, child.stderr
    assert_clean_error(child.returncode, child.stderr, "cannot write train.parquet (", "File too large")
    assert_previous_intact(save_dir, before)


def test_the_save_folder_removed_while_the_parquet_files_are_written(tmp_path, capsys, previous, monkeypatch):
    save_dir, _ = previous
    from data_prep import verl_rows

    real_write = verl_rows.write_parquet

    def write_then_remove_the_folder(rows, path):
        real_write(rows, path)
        if Path(path).name == "train.parquet":
            shutil.rmtree(save_dir)

    monkeypatch.setattr(verl_rows, "write_parquet", write_then_remove_the_folder)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(status, err, str(save_dir), "the folder was removed while the outputs were written")
    assert not save_dir.exists()  # nothing recreated, nothing left behind


def test_the_save_folder_removed_just_before_the_outputs_move_in(tmp_path, capsys, previous, monkeypatch):
    save_dir, _ = previous
    real_read = save_folder.read_manifest

    def remove_then_read(folder):
        shutil.rmtree(save_dir)
        return real_read(folder)

    monkeypatch.setattr(save_folder, "read_manifest", remove_then_read)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(status, err, "moving the outputs into place failed", "the folder was removed meanwhile")
    assert not save_dir.exists()


# The renames of a commit, in order: old manifest out, old train out, new train in, old test out, new test in,
# new manifest in. Whichever fails, the ones before it are undone.
RENAMES = ["manifest out", "train out", "train in", "test out", "test in", "manifest in"]


@pytest.mark.parametrize("failing", range(len(RENAMES)), ids=RENAMES)
def test_a_rename_that_fails_puts_the_previous_output_back(tmp_path, capsys, previous, monkeypatch, failing):
    save_dir, before = previous
    real_replace, calls = os.replace, []

    def replace(source, target):
        calls.append(target)
        if len(calls) == failing + 1:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(source), None, str(target))
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(
        status, err, "moving the outputs into place failed at", "(Input/output error)", "previous output was put back"
    )
    assert_previous_intact(save_dir, before)
    assert len(calls) == 2 * failing + 1  # the failed rename, and every earlier one undone


def test_a_rename_that_fails_while_undoing_too_leaves_a_folder_the_check_refuses(tmp_path, capsys, previous, monkeypatch):
    save_dir, _ = previous
    real_replace, calls = os.replace, []

    def replace(source, target):
        calls.append(target)
        if len(calls) >= 4:  # fails at "test out", and so does every undo
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(source), None, str(target))
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    status, err = prepare(save_dir, raw_gsm8k(tmp_path, 5), capsys)
    assert_clean_error(status, err, "putting the previous output back failed too", "run scripts will prepare it again")
    assert "no readable data_prep_manifest.json" in incompleteness(save_dir, PAIR)
    assert not list(save_dir.glob(f"{PARTIAL_PREFIX}*"))


def test_the_manifest_check_reports_an_unreadable_file_instead_of_a_traceback(previous, capsys, monkeypatch):
    save_dir, _ = previous
    real_open = Path.open

    def failing_open(path, *args, **kwargs):
        if path.name == "test.parquet":
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", failing_open)
    assert manifest.main([str(save_dir), *PAIR]) == 1
    assert "test.parquet cannot be read (Input/output error)" in capsys.readouterr().out


def test_an_os_error_no_step_expected_is_an_error_line_naming_the_file(tmp_path, capsys, monkeypatch):
    """Every known read and write fault has its own message; any other OSError still names its file."""

    def unreadable(split, local_dataset_path):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), f"{local_dataset_path}/{split}.jsonl")

    monkeypatch.setattr(gsm8k, "load_raw", unreadable)
    status, err = prepare(tmp_path / "save", tmp_path / "raw", capsys)
    assert_clean_error(status, err, f"error: {tmp_path / 'raw'}/train.jsonl: Permission denied")
    assert not (tmp_path / "save").exists()


# issue 41 (still open from the second round): the ToolACE and Guru preprocessors, whose manifest write hit a full disk.
FIXTURES = REPO / "tests" / "fixtures" / "datasets"
TOOL_AND_GURU = {"toolace": FIXTURES / "toolace", "guru": FIXTURES / "guru" / "math_rows.json"}


def prepare_dataset(dataset: str, save_dir: Path, *flags: str) -> int:
    import importlib

    module = importlib.import_module(f"data_prep.{dataset}")
    return module.main(["--local_save_dir", str(save_dir), "--local_dataset_path", str(TOOL_AND_GURU[dataset]),
                        "--test_size", "1", *flags])


@pytest.mark.parametrize("dataset", sorted(TOOL_AND_GURU))
def test_toolace_and_guru_stop_on_a_full_disk_at_the_manifest(tmp_path, capsys, monkeypatch, dataset):
    save_dir = tmp_path / "save"
    assert prepare_dataset(dataset, save_dir) == 0
    capsys.readouterr()
    before = snapshot(save_dir)
    real_write = os.write

    def write(descriptor, data):
        if opened_file(descriptor).endswith(MANIFEST_NAME):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(descriptor, data)

    monkeypatch.setattr(os, "write", write)
    status = prepare_dataset(dataset, save_dir, "--seed", "7")  # other rows: a real replacement
    assert_clean_error(status, capsys.readouterr().err, f"cannot write {MANIFEST_NAME} (No space left on device)",
                       "the previous output there is unchanged")
    assert snapshot(save_dir) == before and not list(save_dir.glob(f"{PARTIAL_PREFIX}*"))


# in a user namespace: a 1 MiB tmpfs, a complete output prepared there, then for each amount of free space left (in
# 4 KiB pages, a filler file taking the rest) the same command with other rows; per amount: exit status, stderr, and
# whether every file of the save folder is byte for byte as before
FULL_DISK = r"""
set -e
mount -t tmpfs -o size=1m tmpfs "$1"
cd "$2"
"$3" -m data_prep.{dataset} --local_save_dir "$1/save" --local_dataset_path "$4" --test_size 2 >/dev/null 2>&1
before=$(sha256sum "$1"/save/*)
for pages in 2 3 4 5 6; do
    avail=$(df -B1 --output=avail "$1" | tail -1)
    head -c $((avail - pages * 4096)) /dev/zero > "$1/filler" || true
    status=0
    "$3" -m data_prep.{dataset} --local_save_dir "$1/save" --local_dataset_path "$4" --test_size 2 --seed 3 \
        >/dev/null 2>"$1/../err$pages" || status=$?
    same=no
    [ "$(sha256sum "$1"/save/*)" = "$before" ] && same=yes
    echo "$pages $status $same"
    rm -f "$1/filler"
    [ "$status" = 0 ] && break
done
"""


@pytest.mark.parametrize("dataset", sorted(TOOL_AND_GURU))
def test_a_real_full_disk_while_the_manifest_is_written(tmp_path, dataset):
    """On a real small file system (tmpfs in a user namespace: no privilege needed) with room for the new parquet files
    but not the manifest (and with less room, and more): exit 2, ``error: ...`` naming the file that did not fit, the
    previous output byte for byte as it was. Skipped where user namespaces are not allowed."""
    import shutil as shell_tools

    if shell_tools.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("no user namespaces here (unshare -rm): a real full disk cannot be made without privileges")
    mount = tmp_path / "disk"
    mount.mkdir()
    child = subprocess.run(["unshare", "-rm", "sh", "-c", FULL_DISK.format(dataset=dataset), "sh", str(mount),
                            str(REPO), sys.executable, str(TOOL_AND_GURU[dataset])], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.returncode == 0, child.stdout + child.stderr
    failed_at = set()
    for line in child.stdout.split("\n"):
        if not line.strip():
            continue
        pages, status, same = line.split()
        err = (tmp_path / f"err{pages}").read_text()
        if status == "0":
            continue  # room for the whole new output
        assert status == "2" and err.startswith("error: ") and "Traceback" not in err, (line, err)
        assert "No space left on device" in err and "the previous output there is unchanged" in err, err
        assert same == "yes", f"{pages} pages free: the previous output changed"
        failed_at.add(MANIFEST_NAME if f"cannot write {MANIFEST_NAME}" in err else "a parquet file")
    assert MANIFEST_NAME in failed_at, f"no amount of free space stopped the manifest alone: {child.stdout}"
