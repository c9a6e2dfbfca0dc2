"""The local multi-node Ray cluster (verl_ext.cpu.local_cluster): real `ray start` nodes on this machine.

Both tests start real Ray nodes (about 10-25 s each on two cores). They check what a user relies on: the
nodes join with the logical GPUs asked for, the cluster never becomes the one a plain ``ray.init()`` on this
machine finds, nobody else reaches it (every listening socket of its nodes, of a worker on each node and of
the command inside is on loopback; its logs are in a private folder), a node that does not join is named within
the timeout, and no Ray process is left behind -- after a normal exit, after Ctrl-C (SIGINT to the launcher's
process group) and after a failed start. Processes are counted by the cluster's own marker, so other Ray
clusters on the machine do not interfere. Its bad arguments: tests/adversarial/test_local_cluster_inputs.py.
"""

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.background_runs import ahead_of_the_background_runs
from verl_ext.cpu.local_cluster import ClusterStartError, LocalRayCluster, cluster_processes

DEFAULT_ADDRESS_FILE = Path("/tmp/ray/ray_current_cluster")  # what a plain ray.init() on this machine reads

CONNECT = """
import json, os, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address=os.environ["VERL_EXT_CPU_RAY_ADDRESS"], logging_level="ERROR")
nodes = [node for node in ray.nodes() if node["Alive"]]
print(json.dumps([{"id": node["NodeID"], "gpus": node["Resources"].get("GPU")} for node in nodes]), flush=True)
@ray.remote(num_cpus=1)
class Probe:
    def pid(self):
        return os.getpid()
probes = [Probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
          for node in nodes]
print(json.dumps(ray.get([probe.pid.remote() for probe in probes])), flush=True)  # a worker on each node
print("READY", flush=True)
import time; time.sleep(600)
"""
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
# real Ray nodes start here (tens of seconds on two cores, minutes when they are loaded): above pytest.ini's limit
pytestmark = pytest.mark.timeout(600)


def address_file_state():
    return DEFAULT_ADDRESS_FILE.read_text() if DEFAULT_ADDRESS_FILE.exists() else None


def process_names(pids):
    names = []
    for pid in pids:
        try:
            names.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode())
        except OSError:
            pass
    return names


def listening_sockets(pids):
    """pid -> the addresses its TCP sockets listen on (every socket of those processes, IPv4 and IPv6)."""
    found = {}
    for pid in pids:
        try:
            connections = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue  # gone
        found[pid] = [(c.laddr.ip, c.laddr.port) for c in connections if c.status == psutil.CONN_LISTEN]
    return found


def stdout_file(pid) -> Path:
    """Where a process writes its standard output (each node's `ray start` writes its log there)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/fd/1"))
    except OSError:
        return Path("/nonexistent")


def wait_until_gone(marker, seconds=30.0):
    deadline = time.monotonic() + seconds
    while cluster_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    return cluster_processes(marker)


def test_two_nodes_join_and_ctrl_c_leaves_no_ray_process(tmp_path):
    before = address_file_state()
    with ahead_of_the_background_runs():  # the launcher and its nodes, at Ray's own 30-s start-up limit
        launcher = subprocess.Popen(
            [sys.executable, "-m", "verl_ext.cpu.local_cluster", "--nodes", "2", "--gpus-per-node", "2", "--",
             sys.executable, "-c", CONNECT],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            # SIGINT at its default, as a terminal's Ctrl-C finds it: a suite started with & by a script ignores SIGINT,
            # and Python then installs no KeyboardInterrupt handler (the launcher would sit out the Ctrl-C)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        banner = ""
        while "local Ray cluster of" not in banner:  # printed once every node joined
            banner = launcher.stderr.readline()
            assert banner, "the launcher ended without starting the cluster"
        marker = re.search(r"temporary folder (\S+)\)", banner).group(1)
        nodes = json.loads(launcher.stdout.readline())
        workers = json.loads(launcher.stdout.readline())
        assert launcher.stdout.readline().strip() == "READY"
        # two raylets, each with the logical GPUs asked for, one GCS: all carrying this cluster's marker
        assert len(nodes) == 2 and len({node["id"] for node in nodes}) == 2
        assert [node["gpus"] for node in nodes] == [2.0, 2.0]
        names = process_names(cluster_processes(marker))
        assert sum(name.endswith("/raylet") for name in names) == 2
        assert sum(name.endswith("/gcs_server") for name in names) == 1
        # nobody else reaches it: every socket of every node, of a worker on each node and of the command inside
        # listens on loopback (Ray's default node IP is the machine's network address: 10 of 12 on all interfaces)
        command = [child.pid for child in psutil.Process(launcher.pid).children(recursive=True)
                   if "VERL_EXT_CPU_RAY_ADDRESS" in child.cmdline()[-1]]
        sockets = listening_sockets({*cluster_processes(marker), *workers, *command})
        assert {*workers, *command} <= {pid for pid, listening in sockets.items() if listening}
        # the GCS and both raylets listen too (how many sockets the rest has open varies with when it is looked at)
        core = [pid for pid in cluster_processes(marker) if process_names([pid])[0:1] and
                process_names([pid])[0].endswith(("/raylet", "/gcs_server"))]
        assert len(core) == 3 and all(sockets.get(pid) for pid in core), {pid: sockets.get(pid) for pid in core}
        assert {ip for listening in sockets.values() for ip, _ in listening} <= LOOPBACK, sockets
        # and its nodes' logs are in a private folder of its own (mode 0700, a name no one can guess)
        logs = {log for log in map(stdout_file, cluster_processes(marker)) if re.fullmatch(r"node_\d+\.log", log.name)}
        assert len(logs) == 2 and len({log.parent for log in logs}) == 1, logs
        folder = next(iter(logs)).parent
        assert folder != Path(f"{marker}_logs") and stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert all(stat.S_IMODE(log.stat().st_mode) == 0o600 for log in logs)
        # its address is recorded in its own folder, never where a plain ray.init() looks
        assert (Path(marker) / "ray_current_cluster").is_file()
        assert address_file_state() == before
        os.killpg(launcher.pid, signal.SIGINT)  # Ctrl-C in the terminal: the launcher and its command
        assert launcher.wait(timeout=300) == 130  # at most ~50 s (the stop's deadline); generous for a loaded CI
        # the launcher stopped the cluster before exiting (the nodes' parent-death signal is only a backstop)
        assert cluster_processes(marker) == []
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert wait_until_gone(marker) == []
    assert not Path(marker).exists() and not folder.exists()  # the default log folder goes with the cluster
    assert address_file_state() == before


def test_a_node_that_does_not_join_is_named_within_the_timeout_and_nothing_is_left(tmp_path):
    cluster = LocalRayCluster(nodes=2, join_timeout=1.0, log_dir=tmp_path / "logs")
    # it ends by the join timeout it names (a hang fails at the test's limit, pytest.ini), not by the clock here
    with pytest.raises(ClusterStartError, match=r"worker node 1 did not join within 1 s \(join_timeout\)"):
        cluster.start()
    assert wait_until_gone(cluster.marker) == []
    assert cluster.address is None and not Path(cluster.marker).exists()
    assert (tmp_path / "logs" / "node_1.log").is_file()  # the log the error quoted stays where it was asked to be
