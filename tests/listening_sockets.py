"""Every TCP socket that listens in this process's tree while a block runs: who listens, and on which addresses.

A background e2e child (tests/background_runs.py) samples its whole tree while its runs go on -- the Ray its
in-process session started, a child ``main_ppo`` with its own Ray, each one's workers -- so that the e2e tests can
check that nothing of a CPU run listens beyond loopback, at no start-up of its own."""

import dataclasses
import threading
import time
from dataclasses import dataclass

import psutil

LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})
CPU_SHARE = 0.02  # the most of a core the sampling thread takes


@dataclass(frozen=True)
class Listener:
    """A process that listened: its pid and name (a Ray worker's: ``ray::`` and its actor's class), the addresses it
    listened on, its ancestors' pids (nearest first) and the command line of the sampling process's child it descends
    from ("" for the sampler's own)."""

    pid: int
    name: str
    addresses: frozenset
    ancestors: tuple
    under: str


def listening_now(root: psutil.Process) -> list[Listener]:
    """One sample of ``root``'s tree (processes that end meanwhile are skipped): the machine's TCP tables read once
    (psutil maps each socket to its process), not once per process."""
    members = {process.pid for process in root.children(recursive=True)} | {root.pid}
    addresses: dict[int, set] = {}
    for connection in psutil.net_connections(kind="tcp"):
        if connection.status == psutil.CONN_LISTEN and connection.pid in members:
            addresses.setdefault(connection.pid, set()).add(connection.laddr.ip)
    found = []
    for pid, listening in addresses.items():
        try:
            process = psutil.Process(pid)
            ancestors = tuple(parent.pid for parent in process.parents())
            chain = (pid, *ancestors)  # itself, then its parents up to init
            # the sampler's child on the way down to it: the process itself, its parent, ... ("" for the sampler)
            under = "" if pid == root.pid else " ".join(psutil.Process(chain[chain.index(root.pid) - 1]).cmdline())
            # a Ray worker's name is its actor's class and the method it runs now (ray::WorkerDict.update_actor)
            name = process.name().split(".", 1)[0] if process.name().startswith("ray::") else process.name()
            found.append(Listener(pid, name, frozenset(listening), ancestors, under))
        except (psutil.Error, ValueError):
            continue
    return found


class ListeningSockets:
    """``with ListeningSockets() as sockets:`` samples this process's tree every ``every`` seconds in a thread, or
    less often where a sample costs more than :data:`CPU_SHARE` of a core; ``sockets.listeners`` is every process seen
    listening, its addresses the union over the samples."""

    def __init__(self, every: float = 2.0):
        self.every = every
        self._seen: dict[int, Listener] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="listening-sockets", daemon=True)

    def __enter__(self) -> "ListeningSockets":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        root = psutil.Process()
        while True:
            started = time.thread_time()
            for listener in listening_now(root):
                earlier = self._seen.get(listener.pid)
                if earlier is not None:
                    listener = dataclasses.replace(listener, addresses=earlier.addresses | listener.addresses)
                self._seen[listener.pid] = listener
            # never more than CPU_SHARE of a core: on a loaded machine a sample costs more, the next comes later
            if self._stop.wait(max(self.every, (time.thread_time() - started) / CPU_SHARE)):
                return

    @property
    def listeners(self) -> list[Listener]:
        return sorted(self._seen.values(), key=lambda listener: listener.pid)
