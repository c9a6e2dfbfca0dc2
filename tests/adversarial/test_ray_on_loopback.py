"""A one-node Ray that verl-ext starts listens on loopback only.

``main_ppo`` on the CPU backend starts its own Ray with ``ray.init`` (the CPU profile's ``ray_kwargs.ray_init``:
``address=local`` and its logical resources), in a process with the CPU profile's environment. Ray's default
node IP is the machine's network address, so every socket of that Ray listened on all interfaces (the GCS, the
raylet's two servers, the agents, each worker; 8 of 9 here, the ninth on the network address). Here the same
start, in a child process with the profile's environment, with one actor: every listening socket of the
process tree is on loopback. (A local cluster's nodes and the driver inside it: tests/cpu/test_local_cluster.py.)
About 15 s: one Ray start."""

import json
import os
import subprocess
import sys

from tests.run_scripts.scripts import REPO
from verl_ext.cpu.profile import cpu_environment

LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}

ONE_NODE_RAY = """
import json, os, psutil, ray, yaml
from verl_ext.cpu.topology import Topology, ray_init_overrides
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
me = psutil.Process()
listening = {}
for process in [me, *me.children(recursive=True)]:
    try:
        sockets = [c.laddr.ip for c in process.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    except psutil.Error:
        continue
    if sockets:
        listening[f"{process.pid} {process.name()}"] = sockets
print(json.dumps({"kwargs": kwargs, "worker": worker, "listening": listening}), flush=True)
ray.shutdown()
"""


def test_main_ppos_one_node_ray_listens_on_loopback_only():
    environment = {**os.environ, **cpu_environment(), "PYTHONPATH": str(REPO)}
    environment.pop("RAY_ADDRESS", None)
    completed = subprocess.run([sys.executable, "-c", ONE_NODE_RAY], cwd=REPO, env=environment, capture_output=True,
                               text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["kwargs"]["address"] == "local"  # a new Ray of its own, as main_ppo's driver starts it
    listening = report["listening"]
    names = " ".join(listening)
    assert "gcs_server" in names and "raylet" in names and any(key.startswith(f"{report['worker']} ") for key in listening)
    assert sum(len(sockets) for sockets in listening.values()) >= 8, listening
    assert {ip for sockets in listening.values() for ip in sockets} <= LOOPBACK, listening
