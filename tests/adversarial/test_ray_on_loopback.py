"""A one-node Ray that verl-ext starts listens on loopback only.

``main_ppo`` on the CPU backend starts its own Ray with ``ray.init`` (the CPU profile's ``ray_kwargs.ray_init``:
``address=local`` and its logical resources), in a process with the CPU profile's environment. Ray's default
node IP is the machine's network address, so every socket of that Ray listened on all interfaces (the GCS, the
raylet's two servers, the agents, each worker; 8 of 9 here, the ninth on the network address). Here the same
start, in a child process with the profile's environment, with one actor: every listening socket of the
process tree is on loopback. The same for the CPU backend's in-process session (``CPURaySession``: the lab, the
tests, the benchmarks), in a process that imported Ray before the profile's environment was set. (A local cluster's
nodes and the driver inside it: tests/cpu/test_local_cluster.py.) About 15 s per test: one Ray start each."""

import json
import os
import subprocess
import sys

import pytest

from tests.run_scripts.scripts import REPO
from verl_ext.cpu.profile import cpu_environment

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}

LISTENING = """
def listening():
    me = psutil.Process()
    found = {}
    for process in [me, *me.children(recursive=True)]:
        try:
            sockets = [c.laddr.ip for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            continue
        if sockets:
            found[f"{process.pid} {process.name()}"] = sockets
    return found
"""

ONE_NODE_RAY = LISTENING + """
import json, os, psutil, ray, yaml
from verl_ext.cpu_runtime.topology import Topology, ray_init_overrides
kwargs = {}
for override in ray_init_overrides(Topology()):  # what the CPU profile gives main_ppo's ray.init
    key, value = override.lstrip("+").split("=", 1)
    kwargs[key.rsplit(".", 1)[-1]] = yaml.safe_load(value)
ray.init(**kwargs, logging_level="ERROR")
@ray.remote
class Probe:
    def pid(self):
        return os.getpid()
probe = Probe.remote()
worker = ray.get(probe.pid.remote())
print(json.dumps({"kwargs": kwargs, "worker": worker, "listening": listening()}), flush=True)
ray.shutdown()
"""

IN_PROCESS_SESSION = LISTENING + """
import json, os, psutil, ray, sys  # Ray imported before the session sets the CPU profile's environment
from pathlib import Path
from verl_ext.cpu.ray_session import CPURaySession
with CPURaySession(Path(sys.argv[1]), Path(sys.argv[1]) / "assets"):
    @ray.remote
    class Probe:
        def pid(self):
            return os.getpid()
    probe = Probe.remote()  # kept: an actor without a handle is gone
    worker = ray.get(probe.pid.remote())
    print(json.dumps({"worker": worker, "listening": listening()}), flush=True)
"""


def run_and_report(script, *arguments, environment):
    completed = subprocess.run([sys.executable, "-c", script, *map(str, arguments)], cwd=REPO, env=environment,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def assert_on_loopback(report):
    listening = report["listening"]
    names = " ".join(listening)
    assert "gcs_server" in names and "raylet" in names and any(key.startswith(f"{report['worker']} ") for key in listening)
    assert sum(len(sockets) for sockets in listening.values()) >= 8, listening
    assert {ip for sockets in listening.values() for ip in sockets} <= LOOPBACK, listening


def test_main_ppos_one_node_ray_listens_on_loopback_only():
    environment = {**os.environ, **cpu_environment(), "PYTHONPATH": str(REPO)}
    environment.pop("RAY_ADDRESS", None)
    report = run_and_report(ONE_NODE_RAY, environment=environment)
    assert report["kwargs"]["address"] == "local"  # a new Ray of its own, as main_ppo's driver starts it
    assert_on_loopback(report)


def test_the_in_process_sessions_ray_listens_on_loopback_only(tmp_path):
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    for name in (*cpu_environment(), "RAY_ADDRESS"):
        environment.pop(name, None)  # set by the session itself, after Ray was imported
    assert_on_loopback(run_and_report(IN_PROCESS_SESSION, tmp_path, environment=environment))
