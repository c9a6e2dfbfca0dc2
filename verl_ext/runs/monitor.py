"""Run a command and measure it the way the CPU docs report runs: start-up, teardown, peak memory.

While the child runs, a sampler thread every :data:`SAMPLE_SECONDS` sums the resident memory (RSS) of the
child and all its descendants -- with ``python -m verl.trainer.main_ppo`` that is the driver, the Ray
cluster it starts (GCS, raylet, dashboard) and every Ray worker -- and their proportional set size (PSS:
shared pages split between the processes sharing them) when the RSS sum has grown by :data:`PSS_REREAD_GROWTH`
since PSS was last read (at most every :data:`PSS_MIN_SECONDS`, and never more than :data:`PSS_CPU_SHARE` of a
core spent reading it), keeps the CPU time (user + system) each of those processes has used, and notes when
verl's file logger writes its first and last step record. Then

    start-up  = (time of the first step record - launch) - timing_s/step of that first step
    teardown  = exit - time of the last step record

RSS counts pages shared between processes (torch's libraries) once per process, so its peak is an upper
bound of the memory the run needs; PSS sums to the memory actually used. PSS is slow to read (the kernel walks
every mapping of every process: ~25 ms of CPU for a Ray worker of 0.7 GiB, ~0.7 s for a tree of 30; read every
second of a start-up, it took a quarter of a core in a process that measured two runs), so it is read while the
memory grows -- start-up -- and seldom once the run is steady, each reading followed by a pause of at least its
own cost over :data:`PSS_CPU_SHARE`; a peak of PSS that comes without a new peak of RSS is missed.
``cpu_seconds`` (the sum over processes of their last-seen CPU time) does not grow with other load on the
machine the way wall time does; a process's last :data:`SAMPLE_SECONDS` before it exits can be missed.
``also_measure`` adds processes that are not the child's descendants: the nodes of a Ray cluster the child
joins (:func:`verl_ext.cpu.local_cluster.cluster_processes`), which were started before it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

import psutil

SAMPLE_SECONDS = 0.5  # how often RSS, CPU times and the metrics file are looked at
PSS_REREAD_GROWTH = 1.02  # PSS is read again once the RSS sum exceeds this factor times its value at the last reading
PSS_MIN_SECONDS = 1.0  # and at most this often
PSS_CPU_SHARE = 0.03  # and after a pause that keeps the CPU time spent reading it under this share of a core


@dataclass
class RunMeasurements:
    returncode: int
    wall_seconds: float
    peak_rss_bytes: int
    peak_pss_bytes: int
    cpu_seconds: float
    first_record_seconds: Optional[float]  # after launch
    last_record_seconds: Optional[float]

    def startup_seconds(self, first_step_seconds: Optional[float]) -> Optional[float]:
        if self.first_record_seconds is None or first_step_seconds is None:
            return None
        return self.first_record_seconds - first_step_seconds

    @property
    def teardown_seconds(self) -> Optional[float]:
        return None if self.last_record_seconds is None else self.wall_seconds - self.last_record_seconds

    def as_dict(self) -> dict:
        return asdict(self)


# the children that run_and_measure measures in this process while they run (their pids): a run launched in another
# thread beside an in-process session is that run's, not the session's (this_process_tree leaves their trees out)
_MEASURED_ON_THEIR_OWN: set[int] = set()


def _members(process: psutil.Process, also: Optional[Callable[[], Iterable[int]]] = None,
             leave_out: Iterable[int] = ()) -> list[psutil.Process]:
    """``process``, its descendants and the processes ``also`` names, each once; the descendants ``leave_out``
    names are left out with their own descendants."""
    try:
        members = {member.pid: member for member in (process, *process.children(recursive=True))}
    except psutil.NoSuchProcess:
        members = {}
    for pid in list(leave_out):
        left_out = members.pop(pid, None)
        if left_out is None:
            continue
        try:
            for descendant in left_out.children(recursive=True):
                members.pop(descendant.pid, None)
        except psutil.NoSuchProcess:
            pass
    for pid in also() if also is not None else ():
        if pid not in members:
            try:
                members[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                pass
    return list(members.values())


def _tree_memory(members: list[psutil.Process], proportional: bool) -> int:
    """Sum of RSS (or PSS) over ``members``, in bytes."""
    total = 0
    for member in members:
        try:
            total += member.memory_full_info().pss if proportional else member.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, AttributeError):
            pass
    return total


def _record_cpu_times(members: list[psutil.Process], cpu_by_process: dict) -> None:
    for member in members:
        try:
            times = member.cpu_times()
            cpu_by_process[(member.pid, member.create_time())] = times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def _line_count(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except FileNotFoundError:
        return 0


class ProcessSampler:
    """Samples, every :data:`SAMPLE_SECONDS` in a thread, the memory and CPU time of the processes ``members()``
    returns (a set that changes as workers start and stop). ``cpu_seconds``: the CPU time they used while
    sampled -- each process's last-seen CPU time, less what it had already used when sampling started."""

    def __init__(self, members: Callable[[], list[psutil.Process]], on_sample: Optional[Callable[[], None]] = None,
                 after_sample: Optional[Callable[[], None]] = None):
        self.members = members
        self.on_sample = on_sample
        self.after_sample = after_sample  # called once each sample is taken (a test's count of samples)
        self.peak_rss = 0
        self.peak_pss = 0
        self._rss_at_pss_reading = 0
        self._pss_read_at: Optional[float] = None
        self._pss_pause = PSS_MIN_SECONDS  # after a reading, before the next: PSS_MIN_SECONDS or its cost's share
        self._cpu: dict = {}
        self._baseline: dict = {}
        self._done = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def __enter__(self) -> "ProcessSampler":
        _record_cpu_times(self.members(), self._baseline)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._done.set()
        self._thread.join()
        self._sample()  # the last word of the processes still alive

    @property
    def cpu_seconds(self) -> float:
        return sum(seconds - self._baseline.get(key, 0.0) for key, seconds in self._cpu.items())

    def _sample(self) -> None:
        members = self.members()
        rss = _tree_memory(members, proportional=False)
        self.peak_rss = max(self.peak_rss, rss)
        _record_cpu_times(members, self._cpu)
        now = time.monotonic()
        grown = rss > self._rss_at_pss_reading * PSS_REREAD_GROWTH
        if grown and (self._pss_read_at is None or now - self._pss_read_at >= self._pss_pause):
            reading_started = time.thread_time()  # this thread's CPU time, the kernel's walk of the mappings included
            self.peak_pss = max(self.peak_pss, _tree_memory(members, proportional=True))
            cost = time.thread_time() - reading_started
            self._pss_pause = max(PSS_MIN_SECONDS, cost / PSS_CPU_SHARE)
            self._rss_at_pss_reading, self._pss_read_at = rss, now

    def _loop(self) -> None:
        while not self._done.is_set():
            if self.on_sample is not None:
                self.on_sample()
            self._sample()
            if self.after_sample is not None:
                self.after_sample()
            self._done.wait(SAMPLE_SECONDS)


def this_process_tree(also: Optional[Callable[[], Iterable[int]]] = None) -> Callable[[], list[psutil.Process]]:
    """``members`` for a :class:`ProcessSampler`: this process, its descendants (a Ray it started: GCS, raylet,
    workers) and the processes ``also`` names (a cluster's nodes); not a child that :func:`run_and_measure` measures
    (another thread's run) nor its descendants."""
    me = psutil.Process()
    return lambda: _members(me, also, leave_out=_MEASURED_ON_THEIR_OWN)


STOP_GRACE_SECONDS = 30.0


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block SIGTERM raises KeyboardInterrupt, as Ctrl-C does, so that a command stopped by a scheduler
    or ``kill`` leaves through its ``finally`` blocks: a child process it runs (:func:`run_and_measure`), a local Ray
    cluster it started, are stopped with it instead of outliving it. The previous handler comes back after; outside
    the main thread (where no handler can be set) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def stop_process(process: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> int:
    """Stop ``process``: SIGTERM (``main_ppo`` then shuts its Ray down), SIGKILL after ``grace`` seconds; its exit
    status."""
    if process.poll() is None:
        process.terminate()
        try:
            return process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for a child process: on Linux, it asks the kernel to send the child SIGKILL when its parent
    dies, so that a ``kill -9`` of a launcher does not leave ``main_ppo`` (and the Ray it started, which dies with its
    driver) training. None elsewhere: Ctrl-C and SIGTERM stop the child anyway (:func:`stop_process`)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):  # no libc symbol: the child merely outlives a killed parent, as before
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def open_new_log(path: Path):
    """``path`` opened for writing a run's output, refusing to follow a symbolic link there (never writes through one
    into another file: OSError ELOOP)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
    return os.fdopen(descriptor, "w", encoding="utf-8")


RAY_PREFIX = re.compile(r"^(?:\x1b\[[0-9;]*m)?\((?P<process>[^()]*)\)(?:\x1b\[[0-9;]*m)? ")
CONFIG_DUMP_START = "{'actor_rollout_ref'"  # verl's TaskRunner pprints the composed config, sorted: this key first
MAX_DUMP_LINES = 5000  # a dump whose brackets never close (a line lost) stops being left out after this many lines


class _PprintScanner:
    """Follows the brackets of a ``pprint`` read piece by piece: :attr:`depth` is the brackets opened and not yet
    closed, outside quoted strings. The state carries from one piece to the next, because Ray forwards a worker's
    long output in pieces cut anywhere, inside a quoted string too (``'tensor_parallel_size': 1`` on one line, its
    ``,`` on the next)."""

    def __init__(self) -> None:
        self.depth, self.quote, self.escaped = 0, None, False

    def feed(self, text: str) -> int:
        for character in text:
            if self.quote:
                if self.escaped:
                    self.escaped = False
                elif character == "\\":
                    self.escaped = True
                elif character == self.quote:
                    self.quote = None
            elif character in "'\"":
                self.quote = character
            elif character in "{[(":
                self.depth += 1
            elif character in "}])":
                self.depth -= 1
        return self.depth


class ConsoleEcho:
    """The child's output as this process's stdout shows it (``run_and_measure(echo=True)``); the log keeps every line.

    verl's TaskRunner prints the whole composed config (``pprint``: about 1,000 lines on the CPU profile) before it
    trains: the console shows one line saying where it is instead (the dump ends where its brackets close, however
    Ray cut it into lines). A Ray worker's empty lines (the carriage return before each of tqdm's progress bars
    becomes a line break in the pipe) are left out. Every other line, of that process or another, is echoed as it
    comes."""

    def __init__(self, log_path: Path, stream=None):
        self.log_path = log_path
        self.stream = stream or sys.stdout
        self.dumping: Optional[str] = None  # the Ray process whose config dump is left out
        self.scanner = _PprintScanner()
        self.dump_lines = 0

    def __call__(self, line: str) -> None:
        prefix = RAY_PREFIX.match(line)
        process, payload = (prefix["process"], line[prefix.end():]) if prefix else ("", line)
        if self.dumping == process:
            self.dump_lines += 1
            if self.dump_lines <= MAX_DUMP_LINES:
                if self.scanner.feed(payload.rstrip("\n")) <= 0:
                    self.dumping = None
                return
            self.dumping = None
        if prefix and not payload.strip():  # a Ray worker's "\r" before each progress bar: a line of its own here
            return
        if payload.startswith(CONFIG_DUMP_START):
            self.scanner, self.dump_lines = _PprintScanner(), 0
            if self.scanner.feed(payload.rstrip("\n")) > 0:
                self.dumping = process
            line = f"{line[:prefix.end()] if prefix else ''}[verl-ext] verl's composed config: in {self.log_path}\n"
        self.stream.write(line)
        self.stream.flush()


def run_and_measure(
    command: Sequence[str],
    env: dict[str, str],
    log_path: Path,
    metrics_path: Optional[Path] = None,
    echo: bool = False,
    timeout: Optional[float] = None,
    also_measure: Optional[Callable[[], Iterable[int]]] = None,
    after_sample: Optional[Callable[[], None]] = None,
) -> RunMeasurements:
    """Run ``command``, copy its output to ``log_path`` (and stdout with ``echo``), measure it (and the processes
    ``also_measure`` returns the ids of). ``timeout``: kill it after that many seconds. An exception while it
    runs (Ctrl-C) stops it (:func:`stop_process`) before going on up. ``after_sample``: called in the sampler's
    thread once each sample (memory, CPU time, the metrics file's records) is taken, so that a caller can wait for
    the monitor to have seen something instead of guessing how long that takes."""
    started = time.perf_counter()
    state = {"first": None, "last": None, "lines": 0}
    # bytes that are not UTF-8 (a model's raw output printed by a worker) are replaced, never an error that ends the run
    process = subprocess.Popen(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               encoding="utf-8", errors="replace", preexec_fn=die_with_parent())
    watched = psutil.Process(process.pid)

    def check_progress() -> None:
        if timeout is not None and time.perf_counter() - started > timeout and process.poll() is None:
            process.kill()
        if metrics_path is not None:
            lines = _line_count(metrics_path)
            if lines > state["lines"]:
                now = time.perf_counter() - started
                state["first"] = now if state["first"] is None else state["first"]
                state["last"], state["lines"] = now, lines

    sampler = ProcessSampler(lambda: _members(watched, also_measure), on_sample=check_progress, after_sample=after_sample)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    echo_line = ConsoleEcho(log_path) if echo else None
    _MEASURED_ON_THEIR_OWN.add(process.pid)
    try:
        with sampler, open_new_log(log_path) as log:
            assert process.stdout is not None
            try:
                for line in process.stdout:
                    log.write(line)
                    if echo_line is not None:
                        echo_line(line)
                returncode = process.wait()
            except BaseException:  # Ctrl-C, SIGTERM turned into an exception, a full disk: the child does not outlive us
                stop_process(process)
                raise
    finally:
        _MEASURED_ON_THEIR_OWN.discard(process.pid)
    return RunMeasurements(
        returncode=returncode,
        wall_seconds=time.perf_counter() - started,
        peak_rss_bytes=sampler.peak_rss,
        peak_pss_bytes=sampler.peak_pss,
        cpu_seconds=sampler.cpu_seconds,
        first_record_seconds=state["first"],
        last_record_seconds=state["last"],
    )
