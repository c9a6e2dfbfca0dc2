"""End-to-end runs that start in a background process when collection ends, and that their tests collect.

Why: an e2e module's runs (verl's real ``main_ppo`` on the CPU backend) spend most of their wall time
starting Ray workers one after another, using about 60% of this machine's two cores, while pytest's other
tests run in one process on about one core. So ``tests/conftest.py`` moves the e2e tests to the end of
the session and, when collection ends, queues the runs of every selected e2e module that defines
``background_runs(root: Path)`` (returning picklable results), longest first (the module's
``BACKGROUND_MINUTES``); one child process at a time runs them while the rest of the suite goes on, two once
it only waits (:meth:`BackgroundRuns.widen`), as long as the two modules' peak memory (``BACKGROUND_PEAK_GIB``)
fits (a job that fits nowhere runs once it is alone). (Two children from the start starve the other tests, measured:
22% of them done after 11 minutes instead of ~60%.) The module's ``runs`` fixture asks for ``background_results`` and gets what the function
returned, waiting while it still runs (a module nobody queued is run then).

The child is ``python -m tests.background_runs MODULE_FILE OUT``: it imports the test module from its file,
calls ``background_runs(OUT/work)`` and writes ``OUT/results.pickle`` (under a temporary name, then
renamed: complete or absent); its output goes to ``OUT/child.log``, whose end a failure shows.

Each child is a session of its own, and Linux shares the CPU between sessions first (autogroups): a child's Ray and
workers would weigh as much as pytest's two test processes together, more while the child starts its runs (1.5-1.7 of
two cores, measured: a ~1-s unit test then took 90 s). So a child's session runs at a lower priority
(:data:`BACKGROUND_NICE`) except while one of its Ray nodes starts (:func:`ray_node_starting`), which has Ray's hard
30-s limit to register (:meth:`BackgroundRuns._pace`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[1]
FUNCTION = "background_runs"
# Each of these two a module declares as a number, or as {"default": ..., "extended": ...} when the runs of its two
# tiers differ (module_figure: the larger of the tiers the session selected)
BACKGROUND_MINUTES = "BACKGROUND_MINUTES"  # a module's measured duration: longer ones are queued first
BACKGROUND_PEAK_GIB = "BACKGROUND_PEAK_GIB"  # the memory a module's runs take at their peak (measured)
# In a user's shell: yes (1, yes, true, on) runs the extended tier too, in the same session as the tests selected
# (tests/conftest.py); no (0, no, false, off, or unset) changes nothing; anything else is refused before collection.
# In a child's environment it is always the session's decision, "1" or "0": "1" when the session selected tests of the
# child's module marked ``extended`` (pytest.ini), and its background_runs then also makes the runs only those tests
# read; a default session never pays for them, whatever the user's shell says.
EXTENDED_ENV = "VERL_EXT_TESTS_EXTENDED"
# In a child's environment only, "1" or "0": whether the session selected tests of the child's module outside the
# extended tier; "0" (``pytest -m extended``) lets background_runs skip the runs only those tests read. Unset (a child
# started by hand): yes.
DEFAULT_TIER_ENV = "VERL_EXT_TESTS_DEFAULT_TIER"
YES = ("1", "yes", "true", "on", "y")
NO = ("0", "no", "false", "off", "n", "")
# a module's runs take 2-8 minutes on two cores; this only stops a hung child (with its log), before the e2e test that
# waits for it reaches its own limit (tests/conftest.py's E2E_TIMEOUT_SECONDS)
TIMEOUT_SECONDS = 25 * 60
RESULTS = "results.pickle"
FAILURE = "failure.txt"  # why a job gave no results, beside where they would be (read by another process's test)


@dataclass
class Job:
    module_file: Path
    out: Path
    peak_gib: float = 0.0  # the memory its runs take at their peak (the module's BACKGROUND_PEAK_GIB)
    environment: dict[str, str] = field(default_factory=dict)  # the child's, over the session's (tier_environment)
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    process: Optional[subprocess.Popen] = None
    failure: Optional[str] = None
    seconds: Optional[float] = None
    nice: Optional[int] = None  # its session's autogroup nice value as last set (None: not set, or not possible here)


class BackgroundRuns:
    """A queue of test modules whose ``background_runs`` run one at a time in child processes."""

    def __init__(self, base_dir: Path, environment: dict[str, str], workers: int = 1,
                 memory_gib: Optional[float] = None):
        """``workers`` children at most at a time, and together no more than ``memory_gib`` of their modules'
        declared peaks (None: no limit); a job that fits nowhere runs once nothing else does."""
        self.memory_gib = memory_gib
        self.running: list[Job] = []
        self.base_dir = Path(base_dir)
        # the environment when the session started: tests that monkeypatch os.environ meanwhile do not leak into a child
        self.environment = dict(environment)
        self.jobs: dict[Path, Job] = {}
        self.queue: list[Job] = []
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.closed = False
        self.threads = [threading.Thread(target=self._work, name=f"background-runs-{index + 1}", daemon=True)
                        for index in range(workers)]
        for thread in self.threads:
            thread.start()
        self.pacer = threading.Thread(target=self._pace, name="background-runs-pacer", daemon=True)
        self.pacer.start()

    def widen(self) -> None:
        """From now on, two children at a time (once): what the session calls when its own tests are done and it
        only waits, so that the second core is not left to one child's waits (idempotent)."""
        with self.lock:
            if len(self.threads) > 1 or self.closed:
                return
            thread = threading.Thread(target=self._work, name="background-runs-2", daemon=True)
            self.threads.append(thread)
        thread.start()

    def enqueue(self, module_file: Path, first: bool = False, peak_gib: float = 0.0,
                environment: Optional[dict[str, str]] = None) -> Job:
        """Queue ``module_file``'s runs (once); ``first``: ahead of the others (a test is waiting for them);
        ``peak_gib``: the memory they take at their peak; ``environment``: its child's, over the session's (which
        tiers of the module the session selected: :func:`tier_environment`)."""
        module_file = Path(module_file).resolve()
        with self.lock:
            job = self.jobs.get(module_file)
            if job is None:
                out = job_folder(self.base_dir, module_file)
                job = self.jobs[module_file] = Job(module_file, out, peak_gib, environment=dict(environment or {}))
                if self.closed:
                    job.failure = "the session ended before it started"
                    job.done.set()
                else:
                    self.queue.append(job)
            if first and job in self.queue:
                self.queue.remove(job)
                self.queue.insert(0, job)
            self.wakeup.notify_all()
            return job

    def results(self, module_file: Path) -> Any:
        """What ``background_runs`` of ``module_file`` returned (waits for it; queues it first if nobody did)."""
        job = self.enqueue(module_file, first=True)
        job.done.wait()
        if job.failure is not None:
            raise RuntimeError(f"background runs of {job.module_file.name}: {job.failure}")
        return read_results(job.out)

    def close(self) -> None:
        """Stop the queue; a child still running is terminated with its process group (its Ray cluster)."""
        with self.lock:
            self.closed = True
            self.queue.clear()
            self.wakeup.notify_all()
            running = [job.process for job in self.jobs.values() if job.process is not None and not job.done.is_set()]
        for process in running:
            _terminate(process)

    def _pace(self) -> None:
        """Every PACE_SECONDS: each running child's session at autogroup nice 0 while one of its Ray nodes starts,
        BACKGROUND_NICE otherwise (nothing where this kernel has no autogroups)."""
        while True:
            with self.lock:
                if self.closed:
                    return
                jobs = [job for job in self.running if job.process is not None]
            for job in jobs:
                _pace_job(job)
            with self.lock:
                self.wakeup.wait(PACE_SECONDS)

    def _next_job(self) -> Optional[Job]:
        """The first queued job whose peak fits beside the running ones (any job when none runs)."""
        in_use = sum(job.peak_gib for job in self.running)
        for job in self.queue:
            if not self.running or self.memory_gib is None or in_use + job.peak_gib <= self.memory_gib:
                return job
        return None

    def _work(self) -> None:
        while True:
            with self.lock:
                while not self.closed and (job := self._next_job()) is None:
                    self.wakeup.wait()
                if self.closed:
                    for job in self.jobs.values():
                        if not job.done.is_set():
                            job.failure = "the session ended before it started"
                            job.done.set()
                    return
                self.queue.remove(job)
                self.running.append(job)
            try:
                self._run(job)
            finally:
                with self.lock:
                    self.running.remove(job)
                    self.wakeup.notify_all()

    def _run(self, job: Job) -> None:
        job.out.mkdir(parents=True, exist_ok=True)
        log_path = job.out / "child.log"
        started = time.perf_counter()
        with open(log_path, "w", encoding="utf-8") as log:
            with self.lock:  # close() either sees this process or this sees close()
                if self.closed:
                    job.failure = "the session ended before it started"
                    job.done.set()
                    return
                job.process = subprocess.Popen(
                    [sys.executable, "-m", "tests.background_runs", str(job.module_file), str(job.out)],
                    cwd=REPO, env={**self.environment, **job.environment}, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            _pace_job(job)  # at once, not at the pacer's next look: the child's first seconds are imports, no Ray yet
            job.started.set()
            try:
                returncode = job.process.wait(timeout=TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                _terminate(job.process)
                returncode = None
        job.seconds = time.perf_counter() - started
        if returncode is None:
            job.failure = f"no result after {TIMEOUT_SECONDS} s (stopped); log: {log_path}"
        elif returncode != 0 or not (job.out / RESULTS).is_file():
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-6000:]
            job.failure = f"child exited with status {returncode}; log: {log_path}\n...{tail}"
        if job.failure is not None:  # for a test in another process (an xdist worker): complete or absent
            partial = job.out / (FAILURE + ".partial")
            partial.write_text(job.failure, encoding="utf-8")
            os.replace(partial, job.out / FAILURE)
        job.done.set()


def job_folder(base_dir: Path, module_file: Path) -> Path:
    """Where the runs of ``module_file`` go below ``base_dir``: the same in every process of a session (the xdist
    controller that runs them, the worker whose test reads them)."""
    module_file = Path(module_file).resolve()
    digest = hashlib.sha1(str(module_file).encode()).hexdigest()[:8]
    return Path(base_dir) / f"{module_file.stem}-{digest}"


def read_results(out: Path) -> Any:
    """What a finished job whose folder is ``out`` returned (its child wrote it whole or not at all)."""
    with open(out / RESULTS, "rb") as file:
        return pickle.load(file)


def wait_for_results(out: Path, poll_seconds: float = 1.0) -> Any:
    """What a job whose folder is ``out`` returned, waiting until another process (the session's xdist controller)
    has made it; its failure as a RuntimeError. The e2e test's own time limit bounds the wait."""
    while True:
        if (out / RESULTS).is_file():
            return read_results(out)
        if (out / FAILURE).is_file():
            raise RuntimeError(f"background runs in {out}: {(out / FAILURE).read_text(encoding='utf-8')}")
        time.sleep(poll_seconds)


def yes_or_no(value: Optional[str], name: str = EXTENDED_ENV) -> bool:
    """``value`` of the variable ``name`` as a yes (True) or a no (False), case and surrounding blanks ignored; unset
    is no. Anything else is a ValueError naming the variable, the value and the spellings allowed."""
    if value is None:
        return False
    word = value.strip().lower()
    if word in YES:
        return True
    if word in NO:
        return False
    raise ValueError(f"{name}={value!r}: not a yes or a no; use one of {', '.join(YES)} (yes) "
                     f"or {', '.join(repr(word) if not word else word for word in NO)} (no), or leave it unset")


def tier_environment(default: bool, extended: bool) -> dict[str, str]:
    """What a module's child is told: whether the session selected its tests outside the extended tier (``default``)
    and in it (``extended``)."""
    return {DEFAULT_TIER_ENV: "1" if default else "0", EXTENDED_ENV: "1" if extended else "0"}


def module_figure(module, name: str, default: bool, extended: bool) -> float:
    """A module's ``BACKGROUND_MINUTES`` or ``BACKGROUND_PEAK_GIB`` (``name``; 0 when it declares none) for a session
    that selected its default tests, its extended ones, or both: a per-tier declaration gives the larger of the
    selected tiers' figures (a tier's runs include what its tests read)."""
    figure = getattr(module, name, 0.0)
    if not isinstance(figure, dict):
        return float(figure)
    selected = [figure[tier] for tier, chosen in (("default", default), ("extended", extended)) if chosen]
    return float(max(selected, default=0.0))


def extended_runs_wanted() -> bool:
    """In a child: whether the session selected the module's ``extended`` tests, whose runs background_runs makes
    only then (the session writes "1" or "0"; a child started by hand reads the user's spelling, an unknown one
    refused)."""
    return yes_or_no(os.environ.get(EXTENDED_ENV))


def default_runs_wanted() -> bool:
    """In a child: whether the session selected the module's tests outside the extended tier; ``pytest -m extended``
    says no, and background_runs then skips the runs only they read (unset, a child started by hand: yes)."""
    return yes_or_no(os.environ.get(DEFAULT_TIER_ENV, "1"), DEFAULT_TIER_ENV)


# --- the children's CPU share (the module docstring) ---------------------------------------------------------------

BACKGROUND_NICE = 5  # a child session's autogroup nice value but while a Ray node of it starts (0): ~1/4 of the CPU
# beside a busy pytest session instead of ~1/2 (weights 335 and 1024); measured in the README's command from a clean
# clone: the unit tests were done after ~11 minutes instead of 16-17 (docs/results.md)
RAY_NODE_PROCESSES = ("gcs_server", "raylet")  # the processes of a Ray node, as the kernel names them
RAY_START_SECONDS = 45  # a node process younger than this is starting: Ray's 30-s registration limit and a margin
PACE_SECONDS = 1.0  # how often the pacer looks (a pass reads /proc: ~4 ms per 70 processes)


def _pace_job(job: Job) -> None:
    """``job``'s child's session at autogroup nice 0 while one of its Ray nodes starts, BACKGROUND_NICE otherwise
    (written only when it changes)."""
    wanted = 0 if ray_node_starting(job.process.pid) else BACKGROUND_NICE
    if job.nice != wanted and set_autogroup_nice(job.process.pid, wanted):
        job.nice = wanted


def ray_node_starting(session: int, now: Optional[float] = None) -> bool:
    """Whether a Ray node process (:data:`RAY_NODE_PROCESSES`) of the session ``session`` (a session leader's pid)
    is younger than :data:`RAY_START_SECONDS` at ``now`` (a time.time(); default: now). Sessions, not process trees:
    ``ray start`` (a several-node cluster) leaves its node processes to the init process."""
    import psutil

    now = time.time() if now is None else now
    for process in psutil.process_iter(["name", "create_time"]):
        if process.info["name"] not in RAY_NODE_PROCESSES or now - process.info["create_time"] >= RAY_START_SECONDS:
            continue
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            if os.getsid(process.pid) == session:
                return True
    return False


def autogroup_nice(pid) -> Optional[int]:
    """The autogroup nice value of the session of ``pid`` (a pid, or "self"), read from ``/proc/PID/autogroup``
    ("/autogroup-N nice V"); None where the kernel has none or the process is gone."""
    try:
        with open(f"/proc/{pid}/autogroup", encoding="ascii") as file:
            return int(file.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def set_autogroup_nice(pid: int, nice: int) -> bool:
    """Set the autogroup nice value of ``pid``'s session (0 to 19: raising one back to 0 needs no privilege; the kernel
    takes one change per 100 ms from a user without CAP_SYS_ADMIN, so a refusal for that is tried again). Whether it
    was set; False where autogroups are off or missing, or the process is gone."""
    if not _autogroups_on():
        return False
    for _ in range(5):
        try:
            with open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as file:
                file.write(str(nice))
            return True
        except BlockingIOError:  # EAGAIN: another change less than 100 ms ago
            time.sleep(0.1)
        except OSError:
            return False
    return False


def _autogroups_on() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled", encoding="ascii") as file:
            return file.read().strip() == "1"
    except OSError:
        return False


BOOST = 10  # how much higher the priority of a Ray start-up is (nice values) under ahead_of_the_background_runs


@contextlib.contextmanager
def ahead_of_the_background_runs():
    """Within, this process and what it starts (a test's own Ray: its GCS, raylet and agents, TransferQueue's actors)
    get a higher CPU priority, where the user may give one (root), and only while they start: on two cores beside a
    background run's start-up and the other test process, Ray's own start-up limits (30 s for the raylet, the
    dashboard's) were missed in clean-clone sessions. On leaving, every thread the block started or raised -- here
    and in the processes started within -- goes back down by the same amount: a Ray left at the raised priority
    for the rest of a test folder takes the CPU from the other test process (Linux: a nice value is a thread's,
    and a thread or process inherits its creator's). Elsewhere nothing changes."""
    original = os.getpriority(os.PRIO_PROCESS, 0)
    before = _threads_of_this_process_tree()
    try:
        os.setpriority(os.PRIO_PROCESS, 0, original - BOOST)
    except PermissionError:
        yield
        return
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, original)
        lower_back(before)


def _threads_of_this_process_tree() -> set[int]:
    """The ids of every thread of this process and of its descendants (on Linux, /proc/PID/task)."""
    import psutil

    me = psutil.Process()
    ids = set()
    for process in (me, *me.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            ids.update(thread.id for thread in process.threads())
    return ids


def lower_back(before: set[int]) -> int:
    """Lower by BOOST the priority of every thread of this process tree that is not in ``before`` (started under the
    boost, so it inherited it), passing over again until a pass finds none new (a Ray process may start threads
    meanwhile, from a thread not yet lowered). How many threads it lowered."""
    lowered: set[int] = set()
    while True:
        fresh = _threads_of_this_process_tree() - before - lowered
        if not fresh:
            return len(lowered)
        for thread in fresh:
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.setpriority(os.PRIO_PROCESS, thread, min(19, os.getpriority(os.PRIO_PROCESS, thread) + BOOST))
        lowered |= fresh


def print_costs(results) -> None:
    """One line per run result (a launched run's ``RunResult``): its wall time, CPU time and peak memory, for the
    child's log (what a module's ``BACKGROUND_MINUTES`` and ``BACKGROUND_PEAK_GIB`` come from)."""
    for result in results:
        measured = result.measurements
        print(f"{result.run.name}: {measured.wall_seconds:.0f} s wall, {measured.cpu_seconds:.0f} CPU-s, "
              f"{measured.peak_pss_bytes / 2**30:.1f} GiB peak PSS", flush=True)


def _terminate(process: Optional[subprocess.Popen]) -> None:
    if process is None or process.poll() is not None:
        return
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str]) -> int:
    module_file, out = Path(argv[0]), Path(argv[1])
    spec = importlib.util.spec_from_file_location(f"background_{module_file.stem}", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    started = time.perf_counter()
    results = getattr(module, FUNCTION)(out / "work")
    partial = out / (RESULTS + ".partial")
    partial.write_bytes(pickle.dumps(results))
    os.replace(partial, out / RESULTS)
    print(f"{module_file.name}: background runs done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
