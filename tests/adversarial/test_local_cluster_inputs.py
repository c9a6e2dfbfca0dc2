"""Hostile arguments for the local Ray cluster (``python -m verl_ext.cpu.local_cluster``, ``LocalRayCluster``):
each is refused before any ``ray start`` process exists -- the CLI with ``error: ...`` and exit 2, never a
traceback or a wait without end; the class with a ConfigError naming the field -- and the nodes' logs are never
written through a link. In-process: starting a node here fails the test (``Node`` launches are a tripwire), so
a case that used to be accepted cannot start 500 processes or wait forever. The real nodes (their sockets on
loopback, their private logs, no process left): tests/cpu/test_local_cluster.py."""

import math

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verl_ext.config_values import ConfigError
from verl_ext.cpu import local_cluster
from verl_ext.cpu.local_cluster import ClusterStartError, LocalRayCluster

ANY_COMMAND = ["true"]
TOTAL_GIB = psutil.virtual_memory().total / 2**30
# the smallest world size a CPU run cannot fit in here (5 GiB plus 1.5 GiB per further rank: verl_ext.cpu_runtime.topology)
TOO_MANY_RANKS = math.floor((TOTAL_GIB - 5.0) / 1.5) + 2
HOSTILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class NodeStarted(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_node_may_start(monkeypatch):
    """A tripwire on the one place a node process is started."""

    def tripwire(*args, **kwargs):
        raise NodeStarted("a ray start process was launched for an argument that must be refused")

    monkeypatch.setattr(local_cluster.subprocess, "Popen", tripwire)
    monkeypatch.setattr(local_cluster.subprocess, "call", tripwire)


def refused(capsys, argv) -> str:
    """The CLI's usage error for ``argv``: exit 2, ``error: ...``, no traceback, nothing started."""
    with pytest.raises(SystemExit) as exit_info:
        local_cluster.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error: " in err and "Traceback" not in err, err
    return err


def not_a_count():
    """Text that is no integer >= 1: zero, negatives, fractions, nan/inf spellings, words, empty, huge floats."""
    return st.one_of(
        st.integers(max_value=0).map(str),
        st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not (x.is_integer() and x >= 1)).map(repr),
        st.sampled_from(["", " ", "nan", "inf", "-inf", "1e3", "0x2", "two", "1.5", "2,", "--", "1 2", "+-1"]),
    )


@HOSTILE
@given(value=not_a_count(), option=st.sampled_from(["--nodes", "--gpus-per-node"]))
def test_a_count_that_is_not_an_integer_of_at_least_one_is_refused(capsys, value, option):
    err = refused(capsys, [option, value, "--", *ANY_COMMAND])
    assert f"argument {option}" in err


@HOSTILE
@given(value=st.one_of(
    st.floats(max_value=0, allow_nan=False),
    st.floats(min_value=3600.0, exclude_min=True, allow_infinity=True),
    st.sampled_from(["nan", "NaN", "-nan", "inf", "Infinity", "-inf", "0", "-0", "1e400", "", "forever", "10s"]),
).map(lambda v: v if isinstance(v, str) else repr(v)))
def test_a_join_timeout_that_is_not_finite_positive_and_bounded_is_refused(capsys, value):
    """``--join-timeout nan`` once waited forever (every comparison with nan is false)."""
    assert "argument --join-timeout" in refused(capsys, ["--join-timeout", value, "--", *ANY_COMMAND])


@HOSTILE
@given(nodes=st.integers(min_value=TOO_MANY_RANKS, max_value=10**30), per_node=st.integers(min_value=1, max_value=4))
def test_a_cluster_larger_than_the_memory_allows_is_refused_before_any_node(capsys, nodes, per_node):
    """``--nodes 500`` once started 500 ``ray start`` processes."""
    err = refused(capsys, ["--nodes", str(nodes), "--gpus-per-node", str(per_node), "--", *ANY_COMMAND])
    assert f"--nodes {nodes} x --gpus-per-node {per_node}" in err and "GiB" in err


@pytest.mark.parametrize("argv,message", [
    ([], "give the command to run after --"),
    (["--nodes", "2"], "give the command to run after --"),
    (["--"], "give the command to run after --"),
    (["--", "verl-ext-no-such-command"], "verl-ext-no-such-command: command not found"),
    (["--", "/nonexistent/bin/tool"], "/nonexistent/bin/tool: no such file"),
    (["--", "/"], "/: not a program"),
    (["--", "{tmp}/notes.txt"], "{tmp}/notes.txt: not executable"),
    (["--nodes", "2", "--unknown", "3", "--", "true"], "unrecognized arguments"),
])
def test_a_missing_or_unrunnable_command_is_refused_before_any_node(capsys, tmp_path, argv, message):
    """A command that cannot run once started the whole cluster, then ended in a FileNotFoundError traceback."""
    (tmp_path / "notes.txt").write_text("not a program\n")
    argv = [part.format(tmp=tmp_path) for part in argv]
    assert message.format(tmp=tmp_path) in refused(capsys, argv)


@pytest.mark.parametrize("field,value", [
    ("nodes", 0), ("nodes", -1), ("nodes", 1.5), ("nodes", True), ("nodes", "2"),
    ("gpus_per_node", 0), ("gpus_per_node", None),
    ("join_timeout", math.nan), ("join_timeout", math.inf), ("join_timeout", -1.0), ("join_timeout", 0),
    ("join_timeout", 1e9), ("join_timeout", "180"),
    ("head_timeout", math.nan), ("stop_timeout", -math.inf), ("stop_timeout", True),
    ("cpus_per_node", 0), ("cpus_per_node", 2.5),
    ("object_store_bytes", 1024), ("object_store_bytes", math.nan),
    ("env", {"A": 1}), ("env", {1: "a"}),
])
def test_the_class_refuses_a_bad_field_naming_it(field, value):
    with pytest.raises(ConfigError) as raised:
        LocalRayCluster(**{field: value})
    assert field in str(raised.value) or (field == "nodes" and "trainer.nnodes" in str(raised.value)) \
        or (field == "gpus_per_node" and "trainer.n_gpus_per_node" in str(raised.value)), str(raised.value)


def test_the_class_checks_the_memory_before_any_node():
    with pytest.raises(ConfigError, match="GiB"):
        LocalRayCluster(nodes=TOO_MANY_RANKS).start()


@pytest.mark.parametrize("kind", ["the log folder", "a node's log file"])
def test_a_symbolic_link_in_the_log_folder_is_refused_not_followed(tmp_path, kind):
    """The logs went into ``log_dir`` through whatever link was there (``open(path, "wb")`` truncates the target)."""
    victim = tmp_path / "someone_elses.txt"
    victim.write_text("precious")
    logs = tmp_path / "logs"
    if kind == "the log folder":
        other = tmp_path / "elsewhere"
        other.mkdir()
        logs.symlink_to(other)
    else:
        logs.mkdir()
        (logs / "node_0.log").symlink_to(victim)
    cluster = LocalRayCluster(nodes=2, log_dir=logs)
    with pytest.raises(ClusterStartError, match="symbolic link"):
        cluster.start()
    assert victim.read_text() == "precious"
    assert cluster.temp_dir is None and cluster.address is None


def test_a_new_log_folder_is_private(tmp_path):
    """``log_dir`` is made with mode 0700; the default is a fresh ``mkdtemp`` (checked with real nodes)."""
    folder = local_cluster._private_folder(tmp_path / "deep" / "logs")
    assert (folder.stat().st_mode & 0o777) == 0o700
    defaults = [local_cluster._private_folder(None) for _ in range(2)]
    try:
        assert all((default.stat().st_mode & 0o777) == 0o700 for default in defaults)
        assert defaults[0] != defaults[1]
    finally:
        for default in defaults:
            default.rmdir()
