"""A Ray cluster of several nodes on this machine, for CPU runs with ``trainer.nnodes > 1``.

    python -m verl_ext.cpu.local_cluster --nodes 2 --gpus-per-node 1 -- <command>   # or LocalRayCluster(...)

Each node is one ``ray start --block`` process (the head with ``--head``), so each has its own raylet, object
store and worker processes, as two machines would; they talk over the machine's own address. The nodes get
``--gpus-per-node`` logical GPUs (the CPU platform's Ray resource) and the logical CPUs the CPU profile
gives one node (:mod:`verl_ext.cpu_runtime.topology`), so verl's placement groups of one node's trainer ranks fit
on exactly one node each and a two-node run really uses both.

It never becomes anyone else's cluster, and nobody else reaches it:

- private temporary folder (``ray start --temp-dir``, made by ``mkdtemp``: mode 0700, a name no one can guess):
  Ray records the cluster's address in ``<temp dir>/ray_current_cluster``, not in
  ``/tmp/ray/ray_current_cluster``, which a plain ``ray.init()`` elsewhere on this machine reads to find "the"
  cluster;
- its own authentication token (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``), given only to its nodes and to
  what runs inside it; the token file ``~/.ray/auth_token`` is neither read nor written;
- every socket of every node, and of the command it runs, listens on loopback only
  (:mod:`verl_ext.cpu.ray_loopback`: the node IP is ``127.0.0.1``);
- the nodes' logs in a private folder: by default another ``mkdtemp`` (removed on stop), or ``log_dir``,
  made with mode 0700 when missing; a log file is never written through a symbolic link;
- free ports picked for it, the dashboard off.

Before any node starts, the machine's memory is checked for a CPU run of this topology
(:func:`verl_ext.cpu_runtime.topology.check_memory`: ``--nodes 500`` is refused, not 500 ``ray start`` processes), and
every argument is bounded: the CLI exits 2 with ``error: ...`` naming the option, the class raises
:class:`verl_ext.config_values.ConfigError` naming the field.

Inside it, :data:`verl_ext.cpu_runtime.topology.RAY_ADDRESS_ENV` holds its address (the CPU profile's
``ray_kwargs.ray_init.address`` reads it), with the token. Every process of the cluster carries
:data:`MARKER_ENV` in its environment (Ray's workers inherit it from their raylet), which is how
:func:`cluster_processes` finds them, and how :meth:`LocalRayCluster.stop` makes sure none is left: it
stops each node's ``ray start`` (which drains its node and stops its processes), waits, then kills
whatever still carries the marker. It runs on leaving the ``with`` block, on Ctrl-C, on SIGTERM of the
CLI, and -- through the kernel's parent-death signal -- when the process that started the nodes dies.

A node that does not come up within ``join_timeout`` seconds (or whose ``ray start`` exits) stops the
start with :class:`ClusterStartError` naming the node and showing the end of its log, never a hang.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Sequence

from verl_ext.checks.arguments import positive_float, positive_int, split_at_double_dash
from verl_ext.config_values import ConfigError, reject, require_int, require_number
from verl_ext.cpu import ray_loopback
from verl_ext.cpu_runtime.topology import RAY_ADDRESS_ENV, Topology, check_memory

MARKER_ENV = "VERL_EXT_LOCAL_CLUSTER"
READY_LINE = "Ray runtime started."  # what `ray start` prints once its node is registered with the cluster
DEFAULT_JOIN_TIMEOUT = 180.0
DEFAULT_STOP_TIMEOUT = 45.0  # `ray start` drains its node for up to 30 s on SIGTERM
MAX_TIMEOUT = 3600.0  # the longest any start or stop may wait (seconds): a bound, never "forever"
OBJECT_STORE_BYTES = 512 * 2**20
MIN_OBJECT_STORE_BYTES = 75 * 2**20  # Ray refuses a smaller object store
LOG_TAIL_LINES = 30
# Ray's own limit: a node whose raylet has not registered with the GCS within 30 s (hard-coded in
# ray._private.node.Node) stops with this message; on an overloaded machine that is load, not a broken setup
RAY_NODE_START_TIMEOUT_TEXT = "The current node timed out during startup"
START_ATTEMPTS = 2  # a cluster that hit Ray's limit above is stopped entirely and started once more


class ClusterStartError(RuntimeError):
    """A node of the local cluster did not come up; the message names it and shows its log's end.
    ``overloaded``: the node stopped at Ray's own 30-second registration limit (worth one more try)."""

    def __init__(self, message: str, overloaded: bool = False):
        super().__init__(message)
        self.overloaded = overloaded


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((ray_loopback.LOOPBACK_IP, 0))
        return probe.getsockname()[1]


def _open_log(path: Path) -> int:
    """A node's log file, for writing by this user only; a symbolic link in its place is refused, not followed."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as error:
        raise ClusterStartError(f"local Ray cluster: cannot write the node log {path} ({error.strerror or error}; "
                                "a symbolic link there is never followed)") from None


def _private_folder(folder: Optional[Path]) -> Path:
    """The nodes' log folder: a new ``mkdtemp`` (0700, unguessable), or ``folder``, made with mode 0700 when
    missing; an existing one must be a real folder of this user (not a link, not someone else's)."""
    if folder is None:
        return Path(tempfile.mkdtemp(prefix="vxrc_logs_"))
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "another file or owner"
            raise ClusterStartError(f"local Ray cluster: {folder} is not a folder of this user ({what}): the node "
                                    "logs go into a folder of their own, never through a link") from None
    return folder


def _die_with_parent() -> None:  # pragma: no cover -- runs in the child between fork and exec
    """Linux: SIGTERM this process when the thread that started it dies (then `ray start` stops its node)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class Node:
    """One ``ray start --block`` process and its log."""

    index: int
    command: list[str]
    log_path: Path
    process: Optional[subprocess.Popen] = None

    @property
    def name(self) -> str:
        return "head node 0" if self.index == 0 else f"worker node {self.index}"

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def ready(self) -> bool:
        try:
            return READY_LINE in self.log_path.read_text(errors="replace")
        except OSError:
            return False


def cluster_processes(marker: Optional[str] = None) -> list[int]:
    """Process ids carrying the local-cluster marker in their environment (``marker``: one cluster's, else any)."""
    return processes_with_variable(MARKER_ENV, marker)


def processes_with_variable(name: str, value: Optional[str] = None) -> list[int]:
    """Process ids (not this one's) whose environment holds ``name`` (set to ``value``, when given)."""
    found = []
    needle = f"{name}=".encode() + (value.encode() + b"\0" if value is not None else b"")
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ:
            found.append(int(entry))
    return found


@dataclass
class LocalRayCluster:
    """``nodes`` Ray nodes on this machine (see the module docstring); use as a context manager."""

    nodes: int = 2
    gpus_per_node: int = 1
    cpus_per_node: Optional[int] = None  # default: what the CPU profile gives one node of this size
    env: Mapping[str, str] = field(default_factory=dict)  # more variables for every process of the cluster
    join_timeout: float = DEFAULT_JOIN_TIMEOUT  # seconds each worker node may take to join the head
    head_timeout: float = DEFAULT_JOIN_TIMEOUT  # seconds the head node may take to start
    stop_timeout: float = DEFAULT_STOP_TIMEOUT
    object_store_bytes: int = OBJECT_STORE_BYTES
    log_dir: Optional[Path] = None  # default: beside the temporary folder, removed with it

    topology: Optional[Topology] = field(default=None, init=False)  # nodes x gpus_per_node, checked
    address: Optional[str] = field(default=None, init=False)
    temp_dir: Optional[Path] = field(default=None, init=False)
    marker: Optional[str] = field(default=None, init=False)  # MARKER_ENV's value in its processes (kept after stop)
    started_nodes: list[Node] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.topology = Topology(self.nodes, self.gpus_per_node)  # names trainer.nnodes / n_gpus_per_node when < 1
        if self.cpus_per_node is None:
            self.cpus_per_node = self.topology.logical_cpus_per_node
        require_int("LocalRayCluster.cpus_per_node", self.cpus_per_node, 1)
        for name in ("join_timeout", "head_timeout", "stop_timeout"):
            require_number(f"LocalRayCluster.{name}", getattr(self, name), f"seconds in (0, {MAX_TIMEOUT:g}]",
                           low=0, high=MAX_TIMEOUT, low_open=True)
        require_int("LocalRayCluster.object_store_bytes", self.object_store_bytes, MIN_OBJECT_STORE_BYTES)
        if not all(isinstance(key, str) and isinstance(value, str) for key, value in dict(self.env).items()):
            reject("LocalRayCluster.env", dict(self.env), "a mapping of variable names to strings")
        self._token = secrets.token_hex(32)
        self._in_this_process = contextlib.ExitStack()

    # ------------------------------------------------------------------ what runs inside

    def client_environment(self) -> dict[str, str]:
        """Variables a process needs to join this cluster (a driver: ``ray.init(address=...)``)."""
        if self.address is None:
            raise RuntimeError("the local Ray cluster is not started")
        return {
            RAY_ADDRESS_ENV: self.address,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self._token,
            **ray_loopback.LOOPBACK_ENVIRONMENT,  # the driver's own RPC server on loopback too
        }

    def join_from_this_process(self) -> dict[str, str]:
        """Set :meth:`client_environment` in this process, for a ``ray.init`` here (a driver in this process);
        returns the variables set. Ray reads its authentication mode once per process into a cached config:
        a process that imported Ray before must refresh it, as Ray itself does when it turns token
        authentication on (``ray._raylet.Config.initialize``); likewise its one-machine switch, kept on
        loopback until :meth:`stop` (:func:`verl_ext.cpu.ray_loopback.loopback_in_this_process`)."""
        environment = self.client_environment()
        os.environ.update(environment)
        from ray._raylet import Config

        Config.initialize("")
        self._in_this_process.enter_context(ray_loopback.loopback_in_this_process())
        return environment

    def _node_environment(self, address: str) -> dict[str, str]:
        environment = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
        environment.update(self.env)
        # `ray start` refuses a worker node under Ray's one-machine switch; the node command keeps it on loopback
        environment.pop(ray_loopback.LOOPBACK_VARIABLE, None)
        environment.update(
            {
                RAY_ADDRESS_ENV: address,
                "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": self._token,
                MARKER_ENV: str(self.temp_dir),
                "RAY_DISABLE_USAGE_STATS": "1",
            }
        )
        return environment

    # ------------------------------------------------------------------ start and stop

    def __enter__(self) -> "LocalRayCluster":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> "LocalRayCluster":
        """Start the head, then the worker nodes. A node that stops at Ray's own registration limit (an overloaded
        machine: :data:`RAY_NODE_START_TIMEOUT_TEXT`) has the whole cluster stopped and started again from
        nothing, once (:data:`START_ATTEMPTS`), saying so; any other failure stops it and is raised."""
        if self.temp_dir is not None:
            raise RuntimeError("this LocalRayCluster was already started")
        check_memory(self.topology)  # before any node: a cluster the run cannot fit in is never started
        for attempt in range(1, START_ATTEMPTS):  # every attempt but the last may be retried
            try:
                return self._start_once()
            except ClusterStartError as error:  # stopped already: nothing of this attempt is left
                if not error.overloaded:
                    raise
                print(f"[verl-ext] local Ray cluster: a node hit Ray's 30-second start-up limit (the machine is "
                      f"overloaded); starting the cluster again ({attempt + 1} of {START_ATTEMPTS})",
                      file=sys.stderr, flush=True)
        return self._start_once()

    def _start_once(self) -> "LocalRayCluster":
        logs = _private_folder(self.log_dir)
        # Ray's socket paths live under the temporary folder: keep it short (107-byte limit of a socket path)
        self.temp_dir = Path(tempfile.mkdtemp(prefix="vxrc_", dir="/tmp"))
        self.marker = str(self.temp_dir)
        self._logs = logs
        port = _free_port()
        address = f"{ray_loopback.LOOPBACK_IP}:{port}"
        try:
            head = self._launch(0, ["--head", f"--port={port}", f"--ray-client-server-port={_free_port()}",
                                    "--include-dashboard=false", f"--dashboard-port={_free_port()}"], address)
            self._wait_until_ready([head], self.head_timeout, "head_timeout")
            workers = [self._launch(index, [f"--address={address}"], address) for index in range(1, self.nodes)]
            self._wait_until_ready(workers, self.join_timeout, "join_timeout")
        except BaseException:
            self.stop()
            raise
        self.address = address
        return self

    def _launch(self, index: int, role_arguments: list[str], address: str) -> Node:
        command = ray_loopback.node_command([
            "start", "--block", *role_arguments,
            f"--temp-dir={self.temp_dir}",
            f"--node-ip-address={ray_loopback.LOOPBACK_IP}",
            f"--num-cpus={self.cpus_per_node}",
            f"--num-gpus={self.gpus_per_node}",
            f"--object-store-memory={self.object_store_bytes}",
            f"--dashboard-agent-listen-port={_free_port()}",
            "--disable-usage-stats",
        ])
        node = Node(index, command, self._logs / f"node_{index}.log")
        with os.fdopen(_open_log(node.log_path), "wb") as log:
            node.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._node_environment(address),
                start_new_session=True,  # Ctrl-C reaches the launcher, which stops the nodes in order
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        self.started_nodes.append(node)
        return node

    def _wait_until_ready(self, nodes: Sequence[Node], timeout: float, timeout_name: str) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(nodes)
        while waiting:
            for node in list(waiting):
                if node.ready():
                    waiting.remove(node)
                elif node.process.poll() is not None:
                    tail = node.log_tail()
                    raise ClusterStartError(
                        f"local Ray cluster: {node.name} stopped while starting (exit status "
                        f"{node.process.returncode}): {' '.join(node.command)}\n{tail}",
                        overloaded=RAY_NODE_START_TIMEOUT_TEXT in tail,
                    )
            if waiting and time.monotonic() > deadline:
                node = waiting[0]
                raise ClusterStartError(
                    f"local Ray cluster: {node.name} did not join within {timeout:g} s "
                    f"({timeout_name}): {' '.join(node.command)}\n{node.log_tail()}"
                )
            if waiting:
                time.sleep(0.2)

    def stop(self) -> None:
        """Stop every node and whatever process of this cluster is left; remove its temporary folder."""
        if self.temp_dir is None:
            return
        running = [node for node in self.started_nodes if node.process and node.process.poll() is None]
        for node in reversed(running):  # workers first: the head's GCS keeps serving their draining
            try:
                node.process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + self.stop_timeout
        for node in running:
            try:
                node.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait()
        # raylets start their workers in sessions of their own: anything still carrying the marker is ours
        while True:
            left = cluster_processes(self.marker)
            if not left or time.monotonic() > deadline + 5:
                break
            time.sleep(0.2)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if self.log_dir is None:
            shutil.rmtree(self._logs, ignore_errors=True)
        self._in_this_process.close()
        self.temp_dir = None
        self.address = None
        self.started_nodes = []


def _timeout(text: str) -> float:
    """``--join-timeout``: seconds, finite, in (0, MAX_TIMEOUT] (``nan`` would wait forever)."""
    value = positive_float(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, {MAX_TIMEOUT:g}], got {value:g}")
    return value


def _executable(command: Sequence[str]) -> Optional[str]:
    """Why ``command`` cannot be run (None when it can): checked before any node starts."""
    program = command[0]
    if os.sep in program:
        if not os.path.exists(program):
            return f"{program}: no such file"
        if not os.path.isfile(program):
            return f"{program}: not a program (a folder?)"
        if not os.access(program, os.X_OK):
            return f"{program}: not executable"
        return None
    if shutil.which(program) is None:
        return f"{program}: command not found (not on PATH)"
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv, command = split_at_double_dash(argv)
    parser = argparse.ArgumentParser(
        prog="python -m verl_ext.cpu.local_cluster",
        usage="%(prog)s [--nodes N] [--gpus-per-node G] [--join-timeout SECONDS] -- command ...",
        description="Run a command inside a Ray cluster of several nodes on this machine (stopped afterwards).",
    )
    parser.add_argument("--nodes", type=positive_int, default=2, help="Ray nodes (trainer.nnodes; default 2)")
    parser.add_argument("--gpus-per-node", type=positive_int, default=1,
                        help="logical GPUs per node (trainer.n_gpus_per_node; default 1)")
    parser.add_argument("--join-timeout", type=_timeout, default=DEFAULT_JOIN_TIMEOUT,
                        help=f"seconds a node may take to join (default {DEFAULT_JOIN_TIMEOUT:g}, at most {MAX_TIMEOUT:g})")
    args = parser.parse_args(argv)
    if not command:
        parser.error("give the command to run after --")
    problem = _executable(command)
    if problem is not None:
        parser.error(problem)
    try:
        cluster = LocalRayCluster(args.nodes, args.gpus_per_node, join_timeout=args.join_timeout)
        check_memory(cluster.topology)  # LocalRayCluster.start checks it again; here it is a usage error
    except ConfigError as error:
        parser.error(f"--nodes {args.nodes} x --gpus-per-node {args.gpus_per_node}: {error}")
    from verl_ext.runs.monitor import sigterm_as_interrupt

    try:
        with sigterm_as_interrupt(), cluster:
            print(f"[verl-ext] local Ray cluster of {args.nodes} nodes at {cluster.address} (temporary folder "
                  f"{cluster.temp_dir})", file=sys.stderr, flush=True)
            try:
                return subprocess.call(command, env={**os.environ, **cluster.client_environment()})
            except OSError as error:  # it vanished or lost its permission since the check
                print(f"error: {command[0]}: cannot run it ({error.strerror or error})", file=sys.stderr)
                return 2
    except ClusterStartError as error:
        print(f"[verl-ext] {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("[verl-ext] interrupted: the local Ray cluster was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
