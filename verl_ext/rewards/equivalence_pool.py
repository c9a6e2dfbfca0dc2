"""Run :func:`~verl_ext.rewards.math_equivalence.are_equivalent` under a deadline, from any thread, at any load.

verl calls reward functions in a thread pool of the reward-loop worker, where signal-based timeouts (what
math-verify uses) do not work, and a Python thread cannot be stopped. So the check runs in a child
process (:mod:`verl_ext.rewards.equivalence_worker`), killed when it overruns and replaced in the
background. Children are reused; they start in the background on the first check (one, then the other
``workers - 1`` once it is up). No call ever starts a child itself or waits for one without a deadline.

The bound, per call (``budget`` = ``math_timeout_s`` or ``VERL_EXT_MATH_TIMEOUT_S``, ``allowance`` =
``VERL_EXT_MATH_STARTUP_S``; see :mod:`verl_ext.rewards.math_settings`)::

    deadline  = arrival + budget + allowance        the call returns by then (see the limits below)
    run time  = min(budget, deadline - now)         when it gets a child

Waiting (for a child to start, or in line behind other checks) is taken from the allowance first and
then from the budget; the check itself never runs longer than the budget. A call still in line at its
deadline scores 0 as timed out without running. Callers are served first come, first served
(:class:`~verl_ext.rewards.fifo_turns.FifoTurns`), so an easy check waits behind at most the checks that
arrived before it, and never past its own deadline.

If children cannot be started (a start fails while no child is alive), the checker falls back to
:class:`ThreadChecker` for good and logs the reason once. Its threads are daemon threads: a check past
its deadline is abandoned (counted in ``abandoned``), keeps its slot until it ends, and never keeps the
process from exiting. Check counts (``counts``) say how often each of these happened.

What the bound cannot cover, and why (issue 21 measured every case past the deadline):

* Nothing a caller does after its deadline waits on anything but the lock: a killed child's exit (the
  kernel frees its memory first: ~0.2 s per GB, up to the 4 GB cap) is awaited in the background, and
  threads (reaping a child, starting a replacement) are started by :class:`ThreadStarter`, not by the
  caller. Answers over ``MAX_ANSWER_CHARS`` never go to a child (50 MB of JSON through a pipe cost
  0.6 s past the deadline). Only the first waiter in line wakes when a child frees up
  (:class:`~verl_ext.rewards.fifo_turns.FifoTurns`).
* What remains is the time the operating system takes to run the calling thread once its deadline has
  come, and for that thread to get the GIL and the lock: no code can return before it runs. On the
  2-core development machine, 24 threads checking at once ended a median 1 to 2 ms and at worst 0.06
  to 0.3 s past their deadlines at load averages of 7 to 40 (other jobs ahead of them in the run queue).
* In the thread fallback, the check runs in this process and holds the GIL whenever sympy is inside
  one long C call, e.g. big-integer arithmetic: ``(9^{200})^{10000}`` (it passes the guard) holds it for
  1.2 s on an idle core, 3.5 s at load 33 (measured, 0.6 s bound), and the waiting caller cannot return
  until it is released. A Python thread cannot be interrupted inside a C call, and no guard rule is
  complete; this is why child processes are the default and threads only a fallback.
"""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from verl_ext.rewards import math_settings
from verl_ext.rewards.fifo_turns import FifoTurns
from verl_ext.rewards.math_equivalence import are_equivalent, math_verify_equal
from verl_ext.rewards.math_settings import MEMORY_ENV, MathSettings, MathSettingsError

logger = logging.getLogger(__name__)

STARTUP_TIMEOUT_S = 120.0  # a child that is not ready by then counts as failed to start (in the background)
START_RETRY_S = 30.0  # after a failed start, wait this long before starting another while others still run
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds verl_ext/
WORKER_COMMAND = [sys.executable, "-c", "from verl_ext.rewards.equivalence_worker import serve; serve()"]


@dataclass(frozen=True)
class CheckOutcome:
    equivalent: bool
    timed_out: bool = False
    failed: bool = False  # the child died or answered garbage (scored 0, reported as a scorer error)


TIMED_OUT = CheckOutcome(False, timed_out=True)
FAILED = CheckOutcome(False, failed=True)


class _WorkerDied(Exception):
    pass


class ThreadStarter:
    """Starts daemon threads for callers that must not wait for a thread to start.

    ``Thread.start()`` returns only once the new thread runs, which on a loaded machine takes milliseconds;
    a caller past its deadline (it has just killed a child, whose exit must be awaited and whose
    replacement must be started) must not spend them. :meth:`start_soon` only queues the request; one
    long-lived daemon thread starts the threads. It is started on first use, and again in a forked child
    (which inherits no threads).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._queue: queue.SimpleQueue | None = None

    def start_soon(self, target, name: str, on_failure=None) -> None:
        """Start ``target`` in a daemon thread soon; ``on_failure(error)`` runs (in the starter's thread)
        if it cannot be started. Raises ``RuntimeError`` if the starter thread itself cannot start."""
        with self._lock:
            if self._pid != os.getpid():
                requests: queue.SimpleQueue = queue.SimpleQueue()
                threading.Thread(target=self._serve, args=(requests,), name="math-equivalence-starter", daemon=True).start()
                self._pid, self._queue = os.getpid(), requests
            self._queue.put((target, name, on_failure))

    @staticmethod
    def _serve(requests: queue.SimpleQueue) -> None:
        while True:
            target, name, on_failure = requests.get()
            try:
                threading.Thread(target=target, name=name, daemon=True).start()
            except RuntimeError as error:  # cannot start a new thread
                if on_failure is not None:
                    on_failure(error)


_threads = ThreadStarter()


def environment_snapshot(attempts: int = 100) -> dict[str, str]:
    """A copy of ``os.environ`` that is safe to take off the main thread.

    Children are started from background threads, while another thread may set a variable (pytest sets
    ``PYTEST_CURRENT_TEST`` at every test phase; Ray and verl set some at run time); copying the mapping then
    can fail with "dictionary changed size during iteration". The copy is retried until it reads a stable
    mapping.
    """
    for _ in range(attempts - 1):
        try:
            return dict(os.environ)
        except RuntimeError:
            time.sleep(0.001)
    return dict(os.environ)


class _ChildProcess:
    """One equivalence_worker, spoken to over pipes. Constructing it only spawns; :meth:`wait_ready` waits."""

    def __init__(self, memory_limit_mb: int | None):
        env = environment_snapshot()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        if memory_limit_mb is not None:
            env[MEMORY_ENV] = str(memory_limit_mb)
        self.process = subprocess.Popen(
            WORKER_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=_PACKAGE_ROOT,  # not the caller's folder: a stray math.py there would shadow the standard library
            close_fds=True,
        )
        self._pending = b""

    def wait_ready(self, timeout_s: float) -> None:
        try:
            line = self._read_line(time.monotonic() + timeout_s)
        except (TimeoutError, _WorkerDied):
            raise _WorkerDied(f"the equivalence worker did not say 'ready' within {timeout_s:g} s") from None
        if line != b"ready":
            raise _WorkerDied(f"the equivalence worker said {line[:200]!r} instead of 'ready'")

    def ask(self, gold: str, predicted: str, deadline: float) -> bool:
        """The child's verdict, or ``TimeoutError`` at ``deadline`` (``time.monotonic()`` seconds). The request
        is at most a few kB (answers over ``MAX_ANSWER_CHARS`` never come here), well inside a pipe's
        buffer, so writing it never waits for the child."""
        request = json.dumps({"gold": gold, "predicted": predicted}).encode() + b"\n"
        try:
            self.process.stdin.write(request)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _WorkerDied("the equivalence worker is gone") from None
        line = self._read_line(deadline)
        try:
            return json.loads(line)["equivalent"] is True
        except (ValueError, KeyError, TypeError):
            raise _WorkerDied(f"unreadable answer {line[:200]!r}") from None

    def _read_line(self, deadline: float) -> bytes:
        descriptor = self.process.stdout.fileno()
        poller = select.poll()
        poller.register(descriptor, select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not poller.poll(remaining * 1000):
                raise TimeoutError
            chunk = os.read(descriptor, 65536)
            if not chunk:
                raise _WorkerDied("the equivalence worker exited")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.strip()

    def kill(self, wait: bool = False) -> None:
        """SIGKILL the child and close its pipes. Its exit is waited for in a background thread unless
        ``wait``: the kernel frees a killed process's memory before the exit completes, which takes
        ~0.2 s per GB (0.56 s for a child holding 3 GB, measured), and a caller past its deadline must
        not spend that."""
        try:
            self.process.kill()
        except Exception:
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except Exception:
                pass
        if wait:
            self._reap()
        else:
            try:
                _threads.start_soon(self._reap, "math-equivalence-reap")
            except RuntimeError:  # no thread to spare: subprocess reaps it when the next child starts
                pass

    def _reap(self) -> None:
        try:
            self.process.wait(timeout=60)
        except Exception:
            pass


class ThreadChecker:
    """Checks in daemon threads, at most ``max_workers`` at once; a check past its deadline is abandoned.

    A Python thread cannot be stopped: an abandoned check runs on (holding its slot and the GIL) until
    sympy gives up, but as a daemon thread it never keeps the process from exiting.
    """

    def __init__(self, max_workers: int, startup_allowance_s: float = math_settings.DEFAULT_STARTUP_S):
        self.max_workers = max_workers
        self.startup_allowance_s = startup_allowance_s
        self._reset()

    def _reset(self) -> None:
        self._owner_pid = os.getpid()
        self.counts: collections.Counter[str] = collections.Counter()
        self._condition = threading.Condition()
        self._turns = FifoTurns(self._condition)
        self._running = 0
        self.warmed_up = threading.Event()  # math-verify and sympy imported (else the first checks pay for it)
        threading.Thread(target=self._warm_up, name="math-equivalence-warm-up", daemon=True).start()

    def _warm_up(self) -> None:
        try:
            math_verify_equal("x^2+2x+1", "(x+1)^2")
        except Exception:  # noqa: BLE001 -- the checks themselves will report it
            pass
        self.warmed_up.set()

    def check(self, gold: str, predicted: str, timeout_s: float, arrived: float | None = None) -> CheckOutcome:
        arrived = time.monotonic() if arrived is None else arrived
        deadline = arrived + timeout_s + self.startup_allowance_s
        if self._owner_pid != os.getpid():  # forked: the parent's threads are not running here
            self._reset()
        with self._condition:
            if not self._turns.wait(lambda: self._running < self.max_workers, deadline):
                self.counts["timed out in line"] += 1
                return TIMED_OUT
            self._running += 1
        answer: list[bool] = []
        done = threading.Event()

        def run() -> None:
            try:
                answer.append(bool(are_equivalent(gold, predicted)))
            except BaseException:  # noqa: BLE001 -- RecursionError, MemoryError, anything sympy raises: failed
                pass
            finally:
                with self._condition:
                    self._running -= 1
                    self._turns.notify()
                done.set()

        try:
            threading.Thread(target=run, name="math-equivalence", daemon=True).start()
        except RuntimeError:  # cannot start a new thread
            with self._condition:
                self._running -= 1
                self.counts["failed"] += 1
                self._turns.notify()
            return FAILED
        finished = done.wait(max(0.0, min(timeout_s, deadline - time.monotonic())))
        with self._condition:
            self.counts["abandoned" if not finished else "answered" if answer else "failed"] += 1
        if not finished:
            return TIMED_OUT
        return CheckOutcome(answer[0]) if answer else FAILED

    def close(self) -> None:
        """Nothing to stop: abandoned threads are daemons and end with the process."""


class ProcessChecker:
    """Checks in child processes, each killed when it overruns and replaced in the background."""

    def __init__(
        self, max_workers: int, memory_limit_mb: int | None = None, startup_allowance_s: float = math_settings.DEFAULT_STARTUP_S
    ):
        self.max_workers = max_workers
        self.memory_limit_mb = memory_limit_mb
        self.startup_allowance_s = startup_allowance_s
        self._reset()

    def _reset(self) -> None:
        self._owner_pid = os.getpid()
        self._condition = threading.Condition()
        self._turns = FifoTurns(self._condition)
        self._children: set[_ChildProcess] = set()  # every child spawned and not yet killed
        self._idle: list[_ChildProcess] = []
        self._starting = 0
        self._busy = 0
        self._retry_starts_at = 0.0
        self._closed = False
        self._fallback: ThreadChecker | None = None
        self.counts: collections.Counter[str] = collections.Counter()

    @property
    def fallback(self) -> ThreadChecker | None:
        """The thread checker every check goes to since children could not be started, else None."""
        return self._fallback

    def check(self, gold: str, predicted: str, timeout_s: float, arrived: float | None = None) -> CheckOutcome:
        arrived = time.monotonic() if arrived is None else arrived
        deadline = arrived + timeout_s + self.startup_allowance_s
        if self._owner_pid != os.getpid():  # forked: the parent's children and locks are not ours
            self._reset()
        with self._condition:
            starts = self._claim_missing_children()
        self._launch(starts)
        with self._condition:
            ready = lambda: bool(self._idle) or self._fallback is not None or self._closed  # noqa: E731
            if not self._turns.wait(ready, deadline):
                self.counts["timed out in line"] += 1
                return TIMED_OUT
            fallback = self._fallback
            if fallback is None:
                if self._closed:
                    return FAILED
                child = self._idle.pop()
                self._busy += 1
        if fallback is not None:
            return fallback.check(gold, predicted, timeout_s, arrived)
        try:
            equivalent = child.ask(gold, predicted, min(time.monotonic() + timeout_s, deadline))
        except BaseException as error:
            outcome = "killed at the deadline" if isinstance(error, TimeoutError) else "failed"
            self._retire(child, outcome)
            if isinstance(error, TimeoutError):
                return TIMED_OUT
            if isinstance(error, _WorkerDied):
                return FAILED
            raise
        with self._condition:
            self._busy -= 1
            self.counts["answered"] += 1
            if self._closed:
                self._children.discard(child)
            else:
                self._idle.append(child)
                child = None
            self._turns.notify()
        if child is not None:
            child.kill()
        return CheckOutcome(equivalent)

    def _retire(self, child: _ChildProcess, outcome: str) -> None:
        """Kill a child that overran or broke (its exit is awaited in the background), count why, and
        start its replacement in the background."""
        child.kill()
        with self._condition:
            self.counts[outcome] += 1
            self._busy -= 1
            self._children.discard(child)
            starts = self._claim_missing_children()
            self._turns.notify()
        self._launch(starts)

    def _claim_missing_children(self) -> int:
        """With the condition held: how many children to start (counted as starting now) so that
        ``max_workers`` are alive; the caller starts them with :meth:`_launch` once the lock is released.

        While none is up, one starts at a time: on a busy machine two children importing sympy at once
        take twice as long each, and the first one ready serves the line while the others start. After a
        failed start, a new one starts only once ``START_RETRY_S`` has passed (unless none is alive).
        """
        up = len(self._idle) + self._busy
        alive = up + self._starting
        if self._closed or self._fallback is not None or (alive and time.monotonic() < self._retry_starts_at):
            return 0
        count = max(0, (self.max_workers if up else 1) - alive)
        self._starting += count
        return count

    def _launch(self, count: int) -> None:
        """Start ``count`` claimed children, each from a background thread (:class:`ThreadStarter`: the
        caller does not wait for the threads to start)."""
        for _ in range(count):
            try:
                _threads.start_soon(self._start_child, "math-equivalence-start", on_failure=self._thread_failed)
            except RuntimeError as error:
                self._thread_failed(error)

    def _thread_failed(self, error: BaseException) -> None:
        """A claimed start whose thread could not be started: a failed start."""
        with self._condition:
            self._starting -= 1
            self._start_failed(error)
            self._turns.notify()

    def _start_child(self) -> None:
        child, failure = None, None
        try:
            child = _ChildProcess(self.memory_limit_mb)
            with self._condition:
                self._children.add(child)
            child.wait_ready(STARTUP_TIMEOUT_S)
        except (_WorkerDied, OSError) as error:
            failure = error
        except Exception as error:  # noqa: BLE001 -- a background thread must not die with an unreported error
            logger.exception("verl_ext.rewards: starting a math-equivalence child failed")
            failure = error
        if failure is not None and child is not None:
            child.kill()
        starts = 0
        with self._condition:
            self._starting -= 1
            if failure is None and not self._closed:
                self._idle.append(child)
                child = None
                starts = self._claim_missing_children()
            elif failure is not None:
                self._children.discard(child)
                self._start_failed(failure)
            self._turns.notify()
        if child is not None and failure is None:  # closed while it started
            child.kill()
        self._launch(starts)

    def _start_failed(self, failure: BaseException) -> None:
        """With the condition held: retry later while other children run; with none alive, use threads."""
        if self._closed or self._fallback is not None:
            return
        self.counts["failed to start"] += 1
        self._retry_starts_at = time.monotonic() + START_RETRY_S
        if self._idle or self._busy or self._starting:
            logger.warning("verl_ext.rewards: a math-equivalence child failed to start (%s); retrying later", failure)
            return
        logger.error("verl_ext.rewards: %s; checking math answers in threads from now on", failure)
        self._fallback = ThreadChecker(self.max_workers, self.startup_allowance_s)

    def close(self) -> None:
        """Kill every child (idle, busy or starting); checks in progress end as failed."""
        if self._owner_pid != os.getpid():
            return
        with self._condition:
            self._closed = True
            children, self._idle = list(self._children), []
            self._children.clear()
            self._turns.notify()
        for child in children:
            child.kill(wait=True)


_checker: ProcessChecker | ThreadChecker | None = None
_settings: MathSettings | None = None
_lock = threading.RLock()


def settings() -> MathSettings:
    """The settings in force: from the environment, read and checked once (first use), unless
    :func:`configure` replaced them. Raises :class:`MathSettingsError` naming a bad variable."""
    global _settings
    if _settings is None:
        with _lock:
            if _settings is None:
                _settings = math_settings.from_environment()
    return _settings


def default_timeout_s() -> float:
    return settings().timeout_s


def configure(
    sandbox: str | None = None,
    workers: int | None = None,
    timeout_s: float | None = None,
    startup_allowance_s: float | None = None,
):
    """Replace the process-wide checker: the environment is read again, then arguments not None override it.
    Returns the new checker."""
    given = {"sandbox": sandbox, "workers": workers, "timeout_s": timeout_s, "startup_allowance_s": startup_allowance_s}
    checks = {
        "sandbox": math_settings.sandbox,
        "workers": lambda name, value: math_settings.integer(name, value, 1, math_settings.MAX_WORKERS),
        "timeout_s": math_settings.seconds,
        "startup_allowance_s": math_settings.seconds,
    }
    overrides = {key: checks[key](key, value) for key, value in given.items() if value is not None}
    return _install(replace(math_settings.from_environment(), **overrides))


def _install(new: MathSettings) -> ProcessChecker | ThreadChecker:
    global _checker, _settings
    with _lock:
        if _checker is not None:
            _checker.close()
        _settings = new
        if new.sandbox == "process":
            _checker = ProcessChecker(new.workers, new.memory_mb, new.startup_allowance_s)
        else:
            _checker = ThreadChecker(new.workers, new.startup_allowance_s)
        return _checker


def get_checker() -> ProcessChecker | ThreadChecker:
    """The process-wide checker, made from the (checked) environment on first use."""
    if _checker is None:
        with _lock:
            if _checker is None:
                _install(settings())
    return _checker


def check_equivalent(gold: str, predicted: str, timeout_s: float | None = None) -> CheckOutcome:
    """Layer 1 in this thread, then the full check under the deadline described in the module docstring.
    An answer over ``MAX_ANSWER_CHARS`` is decided by layer 1 alone (the guard refuses it for sympy
    anyway): sending megabytes to a child would cost time beyond the deadline."""
    from verl_ext.rewards.math_equivalence import MAX_ANSWER_CHARS, normalized_equal

    arrived = time.monotonic()
    if normalized_equal(gold, predicted):
        return CheckOutcome(True)
    if len(gold) > MAX_ANSWER_CHARS or len(predicted) > MAX_ANSWER_CHARS:
        return CheckOutcome(False)
    budget = default_timeout_s() if timeout_s is None else math_settings.seconds("math_timeout_s", timeout_s)
    return get_checker().check(gold, predicted, budget, arrived)


@atexit.register
def _close_checker() -> None:
    if _checker is not None:
        _checker.close()


__all__ = ["CheckOutcome", "MathSettingsError", "ProcessChecker", "ThreadChecker", "check_equivalent", "configure"]
