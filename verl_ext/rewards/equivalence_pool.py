"""Run :func:`~verl_ext.rewards.math_equivalence.are_equivalent` under a wall-clock budget, from any thread.

verl calls reward functions in a thread pool of the reward-loop worker, where signal-based timeouts (what
math-verify uses) do not work, and a Python thread cannot be stopped. So the check runs in a child
process (:mod:`verl_ext.rewards.equivalence_worker`): the caller waits at most ``timeout_s`` for the
answer; past that the child is killed (a replacement starts at once in the background) and the outcome is
"timed out", scored 0. Children are reused; a caller waits for a free one. All ``max_workers`` children
start together, in the background, on the first check, so a check arriving while one child is being
replaced usually finds another idle. Starting a child (importing sympy and math-verify) takes one to three
seconds and is not counted in any check's budget: a check that finds no idle child waits for one to start.

Settings (environment variables, read when the first check runs; :func:`configure` overrides them):

    VERL_EXT_MATH_SANDBOX    process (default) | thread
    VERL_EXT_MATH_WORKERS    child processes (or threads) per reward worker, default min(4, CPUs)
    VERL_EXT_MATH_TIMEOUT_S  budget per check in seconds, default 5 (a call's math_timeout_s overrides it)
    VERL_EXT_MATH_MEMORY_MB  address-space cap of each child, default 4096

``thread`` mode runs the check in a thread pool and stops *waiting* after the budget, but the thread
itself runs on (it cannot be killed), holding a slot and the GIL: use it only where child processes
cannot be started. If a child cannot be started, the process checker falls back to thread mode and logs
the reason once.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from verl_ext.rewards.equivalence_worker import MEMORY_ENV
from verl_ext.rewards.math_equivalence import are_equivalent

logger = logging.getLogger(__name__)

SANDBOX_ENV, WORKERS_ENV, TIMEOUT_ENV = "VERL_EXT_MATH_SANDBOX", "VERL_EXT_MATH_WORKERS", "VERL_EXT_MATH_TIMEOUT_S"
SANDBOXES = ("process", "thread")
DEFAULT_TIMEOUT_S = 5.0
STARTUP_TIMEOUT_S = 120.0  # importing sympy on a busy machine; not part of any check's budget
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds verl_ext/


@dataclass(frozen=True)
class CheckOutcome:
    equivalent: bool
    timed_out: bool = False
    failed: bool = False  # the child died or answered garbage (scored 0, reported as a scorer error)


class _WorkerDied(Exception):
    pass


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
    """One running equivalence_worker, spoken to over pipes."""

    def __init__(self, memory_limit_mb: int | None):
        env = environment_snapshot()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        if memory_limit_mb is not None:
            env[MEMORY_ENV] = str(memory_limit_mb)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from verl_ext.rewards.equivalence_worker import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=_PACKAGE_ROOT,  # not the caller's folder: a stray math.py there would shadow the standard library
            close_fds=True,
        )
        self._pending = b""
        try:
            line = self._read_line(time.monotonic() + STARTUP_TIMEOUT_S)
        except (TimeoutError, _WorkerDied):
            self.kill()
            raise _WorkerDied("the equivalence worker did not start") from None
        if line != b"ready":
            self.kill()
            raise _WorkerDied(f"the equivalence worker said {line[:200]!r} instead of 'ready'")

    def ask(self, gold: str, predicted: str, timeout_s: float) -> bool:
        request = json.dumps({"gold": gold, "predicted": predicted}).encode() + b"\n"
        try:
            self.process.stdin.write(request)
            self.process.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _WorkerDied("the equivalence worker is gone") from None
        line = self._read_line(time.monotonic() + timeout_s)
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

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.wait(timeout=10)
        except Exception:
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except Exception:
                pass


class ThreadChecker:
    """Budgeted wait on a thread pool; a check past its budget keeps its thread (see the module docstring)."""

    def __init__(self, max_workers: int):
        self.max_workers = max_workers
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix="math-equivalence")

    def check(self, gold: str, predicted: str, timeout_s: float) -> CheckOutcome:
        future = self._executor.submit(are_equivalent, gold, predicted)
        try:
            return CheckOutcome(bool(future.result(timeout=timeout_s)))
        except concurrent.futures.TimeoutError:
            future.cancel()
            return CheckOutcome(False, timed_out=True)
        except BaseException:
            return CheckOutcome(False, failed=True)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class ProcessChecker:
    """Checks in child processes, each killed when it overruns its budget and replaced in the background."""

    def __init__(self, max_workers: int, memory_limit_mb: int | None = None):
        self.max_workers = max_workers
        self.memory_limit_mb = memory_limit_mb
        self._reset()
        self._fallback: ThreadChecker | None = None

    def _reset(self) -> None:
        self._owner_pid = os.getpid()
        self._condition = threading.Condition()
        self._slots = threading.BoundedSemaphore(self.max_workers)
        self._idle: list[_ChildProcess] = []
        self._spares_starting = 0
        self._closed = False
        self._warmed_up = False

    def check(self, gold: str, predicted: str, timeout_s: float) -> CheckOutcome:
        if self._owner_pid != os.getpid():  # forked: the parent's children and locks are not ours
            self._reset()
        if self._fallback is not None:
            return self._fallback.check(gold, predicted, timeout_s)
        if not self._warmed_up:  # start every child at once, in the background: a killed one then has a twin
            with self._condition:
                starting, self._warmed_up = not self._warmed_up, True
            for _ in range(self.max_workers if starting else 0):
                self._start_spare()
        with self._slots:
            try:
                child = self._take_child()
            except (_WorkerDied, OSError) as error:
                logger.error("verl_ext.rewards: %s; checking math answers in threads instead", error)
                self._fallback = self._fallback or ThreadChecker(self.max_workers)
                return self._fallback.check(gold, predicted, timeout_s)
            try:
                equivalent = child.ask(gold, predicted, timeout_s)
            except (TimeoutError, _WorkerDied) as error:
                child.kill()
                self._start_spare()
                return CheckOutcome(
                    False, timed_out=isinstance(error, TimeoutError), failed=isinstance(error, _WorkerDied)
                )
            self._give_back(child)
            return CheckOutcome(equivalent)

    def _take_child(self) -> _ChildProcess:
        """An idle child; else the spare being started in the background; else a new one, started here."""
        with self._condition:
            while not self._idle and self._spares_starting > 0:
                self._condition.wait()
            if self._idle:
                return self._idle.pop()
        return _ChildProcess(self.memory_limit_mb)

    def _give_back(self, child: _ChildProcess) -> None:
        with self._condition:
            if not self._closed and len(self._idle) < self.max_workers:
                self._idle.append(child)
                self._condition.notify_all()
                return
        child.kill()

    def _start_spare(self) -> None:
        """Replace a killed child in a background thread, so the next check need not wait for a start-up."""
        with self._condition:
            self._spares_starting += 1

        def start() -> None:
            child = None
            try:
                child = _ChildProcess(self.memory_limit_mb)
            except (_WorkerDied, OSError):
                pass  # the next check starts one itself (and falls back to threads if that fails too)
            except Exception:  # noqa: BLE001 -- a background thread must not die with an unreported error
                logger.exception("verl_ext.rewards: starting a spare math-equivalence child failed")
            finally:
                with self._condition:
                    self._spares_starting -= 1
                    self._condition.notify_all()
            if child is not None:
                self._give_back(child)

        threading.Thread(target=start, name="math-equivalence-spare", daemon=True).start()

    def close(self) -> None:
        if self._owner_pid != os.getpid():
            return
        with self._condition:
            self._closed = True
            children, self._idle = self._idle, []
        for child in children:
            child.kill()
        if self._fallback is not None:
            self._fallback.close()


_checker: ProcessChecker | ThreadChecker | None = None
_checker_lock = threading.RLock()
_default_timeout_s: float | None = None


def _env_int(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        raise ValueError(f"{name}={os.environ[name]!r}: expected a positive integer") from None


def default_timeout_s() -> float:
    if _default_timeout_s is not None:
        return _default_timeout_s
    try:
        return float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S))
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={os.environ[TIMEOUT_ENV]!r}: expected seconds as a number") from None


def configure(sandbox: str | None = None, workers: int | None = None, timeout_s: float | None = None):
    """Replace the process-wide checker; arguments left None come from the environment. Returns it."""
    global _checker, _default_timeout_s
    sandbox = sandbox or os.environ.get(SANDBOX_ENV, "process")
    if sandbox not in SANDBOXES:
        raise ValueError(f"math equivalence sandbox {sandbox!r}: expected one of {SANDBOXES} ({SANDBOX_ENV})")
    workers = workers if workers is not None else _env_int(WORKERS_ENV, min(4, os.cpu_count() or 1))
    if workers < 1:
        raise ValueError(f"math equivalence workers must be at least 1, got {workers}")
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"math equivalence timeout_s must be positive, got {timeout_s}")
    with _checker_lock:
        if _checker is not None:
            _checker.close()
        _default_timeout_s = timeout_s
        memory = _env_int(MEMORY_ENV, 4096)
        _checker = ProcessChecker(workers, memory) if sandbox == "process" else ThreadChecker(workers)
        return _checker


def get_checker() -> ProcessChecker | ThreadChecker:
    """The process-wide checker, made from the environment on first use."""
    if _checker is None:
        with _checker_lock:
            if _checker is None:
                configure()
    return _checker


def check_equivalent(gold: str, predicted: str, timeout_s: float | None = None) -> CheckOutcome:
    """Layer 1 in this thread, then the full check under ``timeout_s`` (default: see module docstring)."""
    from verl_ext.rewards.math_equivalence import normalized_equal

    if normalized_equal(gold, predicted):
        return CheckOutcome(True)
    budget = default_timeout_s() if timeout_s is None else float(timeout_s)
    return get_checker().check(gold, predicted, budget)


@atexit.register
def _close_checker() -> None:
    if _checker is not None:
        _checker.close()
