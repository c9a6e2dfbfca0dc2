"""A local cluster whose node stops at Ray's own 30-second registration limit (an overloaded machine: the suite saw
it with every core busy) is stopped and started again from nothing, once; any other failure is raised at once.

``ray start`` itself is the collaborator replaced here (a real raylet cannot be made to miss Ray's limit on
purpose): a stand-in node program that says what ``ray start`` says -- "Ray runtime started." when its node is up,
Ray's exception text when it is not -- and then blocks, as ``ray start --block`` does. Everything else is the
cluster's own code: its launch, its wait, its stop (by the cluster's marker) and its retry."""

import sys

import pytest

from verl_ext.cpu import local_cluster
from verl_ext.cpu.local_cluster import RAY_NODE_START_TIMEOUT_TEXT, ClusterStartError, LocalRayCluster, cluster_processes

STAND_IN = """
import os, signal, sys
arguments, attempts = sys.argv[1:], os.environ["STAND_IN_ATTEMPTS"]
if "--head" not in arguments:
    with open(attempts, "a") as file:
        file.write("worker\\n")
    failures = int(os.environ["STAND_IN_FAILURES"])
    if sum(1 for _ in open(attempts)) <= failures:
        print("Exception: " + os.environ["STAND_IN_MESSAGE"], flush=True)
        sys.exit(1)
print("Ray runtime started.", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:  # blocks as `ray start --block` does, until the cluster's stop sends SIGTERM
    signal.pause()
"""


@pytest.fixture
def stand_in_nodes(monkeypatch, tmp_path):
    """Nodes run the stand-in; returns (attempts file, set the failures and message)."""
    program = tmp_path / "ray_start_stand_in.py"
    program.write_text(STAND_IN)
    attempts = tmp_path / "attempts"
    monkeypatch.setattr(local_cluster.ray_loopback, "node_command", lambda arguments: [sys.executable, str(program), *arguments])
    monkeypatch.setenv("STAND_IN_ATTEMPTS", str(attempts))

    def fail(times: int, message: str) -> None:
        monkeypatch.setenv("STAND_IN_FAILURES", str(times))
        monkeypatch.setenv("STAND_IN_MESSAGE", message)

    return attempts, fail


def test_a_node_at_rays_start_up_limit_has_the_cluster_started_again_once(stand_in_nodes, capsys):
    attempts, fail = stand_in_nodes
    fail(1, RAY_NODE_START_TIMEOUT_TEXT + ". This could happen because some of the raylet failed to startup.")
    cluster = LocalRayCluster(nodes=2, gpus_per_node=1, cpus_per_node=1, join_timeout=30)
    with cluster:
        assert cluster.address and len(cluster.started_nodes) == 2  # the second start's head and worker only
        assert all(node.process.poll() is None for node in cluster.started_nodes)
        marker = cluster.marker
    assert attempts.read_text().splitlines() == ["worker", "worker"]
    assert "starting the cluster again (2 of 2)" in capsys.readouterr().err
    assert not cluster_processes(marker)  # nothing of either start is left


def test_a_node_that_fails_twice_at_the_limit_is_raised_after_the_second_start(stand_in_nodes):
    attempts, fail = stand_in_nodes
    fail(2, RAY_NODE_START_TIMEOUT_TEXT + ".")
    cluster = LocalRayCluster(nodes=2, gpus_per_node=1, cpus_per_node=1, join_timeout=30)
    with pytest.raises(ClusterStartError, match="worker node 1 stopped while starting") as raised:
        cluster.start()
    assert raised.value.overloaded and RAY_NODE_START_TIMEOUT_TEXT in str(raised.value)
    assert attempts.read_text().splitlines() == ["worker", "worker"]
    assert cluster.temp_dir is None and not cluster_processes(cluster.marker)


def test_any_other_failure_is_raised_at_once_without_a_second_start(stand_in_nodes):
    attempts, fail = stand_in_nodes
    fail(1, "ValueError: --num-gpus must be a number")
    cluster = LocalRayCluster(nodes=2, gpus_per_node=1, cpus_per_node=1, join_timeout=30)
    with pytest.raises(ClusterStartError, match="--num-gpus must be a number") as raised:
        cluster.start()
    assert not raised.value.overloaded
    assert attempts.read_text().splitlines() == ["worker"]
    assert not cluster_processes(cluster.marker)


# --- the one-node Ray of an in-process session (verl_ext.cpu.ray_session.start_ray) ------------------------------
# ``ray.init`` is the collaborator replaced: a stand-in that starts a process of its own (as Ray's GCS and raylet are
# children of the process that calls ray.init) and then raises Ray's text, or returns.


@pytest.fixture
def stand_in_ray_init(monkeypatch):
    """ray.init fails the first ``failures`` calls with ``message``; returns (calls made, the processes it left)."""
    import subprocess

    import ray

    calls, left = [], []
    shutdowns = []
    settings = {"failures": 0, "message": ""}

    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) <= settings["failures"]:
            left.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]))
            raise Exception(settings["message"])  # what ray._private.node.Node raises: a plain Exception

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(True))

    def fail(times: int, message: str) -> None:
        settings.update(failures=times, message=message)

    return calls, left, shutdowns, fail


def test_a_one_node_ray_at_the_start_up_limit_is_started_again_and_the_failed_starts_processes_stopped(
        stand_in_ray_init, capsys):
    from verl_ext.cpu.ray_session import start_ray

    calls, left, shutdowns, fail = stand_in_ray_init
    fail(1, RAY_NODE_START_TIMEOUT_TEXT + ". This could happen because some of the raylet failed to startup.")
    start_ray({"num_cpus": 2})
    assert calls == [{"num_cpus": 2}, {"num_cpus": 2}] and shutdowns == [True]
    assert len(left) == 1
    left[0].wait(timeout=10)  # the failed start's process was stopped: it would sleep for two minutes
    assert "starting it again (2 of 2)" in capsys.readouterr().err


def test_a_one_node_ray_failing_twice_at_the_limit_or_otherwise_once_is_raised(stand_in_ray_init):
    from verl_ext.cpu.ray_session import start_ray

    calls, left, shutdowns, fail = stand_in_ray_init
    fail(2, RAY_NODE_START_TIMEOUT_TEXT + ".")
    with pytest.raises(Exception, match=RAY_NODE_START_TIMEOUT_TEXT):
        start_ray({})
    assert len(calls) == 2
    calls.clear()
    fail(1, "ValueError: num_cpus must be a number")
    with pytest.raises(Exception, match="num_cpus must be a number"):
        start_ray({})
    assert len(calls) == 1
    for process in left:
        process.kill()
        process.wait()
