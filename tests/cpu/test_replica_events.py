"""Several rollout replicas in one event log: every push must reach every replica with the same weights, and each
replica says which Ray node it ran on. Records as two CPURolloutServer processes write them (RolloutEventLog)."""

import pytest

from verl_ext.rollout_events import ReplicasDisagree, RolloutEventLog, push_rounds, read_rollout_events, replica_nodes


def write_run(path, pushes_by_replica, nodes=("node-a", "node-b")):
    """Two replicas appending to one log, interleaved as Ray runs them: initialized, then pushes."""
    logs = [RolloutEventLog(path, replica_rank=rank) for rank in range(len(pushes_by_replica))]
    for log, node in zip(logs, nodes):
        log.write("initialized", weights="checkpoint", weight_version=None, weight_checksum="c0", requests_served=0,
                  node_id=node, pid=1)
    for index in range(max(len(pushes) for pushes in pushes_by_replica)):
        for log, pushes in zip(logs, pushes_by_replica):
            if index < len(pushes):
                version, checksum, transfer = pushes[index]
                log.write("update_weights", weights="pushed", weight_version=version, weight_checksum=checksum,
                          transfer_checksum=transfer, requests_served=4)
    return read_rollout_events(path)


def test_identical_pushes_to_both_replicas_make_one_round_each(tmp_path):
    pushes = [(0, "w0", "t0"), (2, "w2", "t2")]
    events = write_run(tmp_path / "events.jsonl", [pushes, pushes])
    assert push_rounds(events, 2) == [
        {"weight_version": 0, "weight_checksum": "w0", "transfer_checksum": "t0", "replicas": [0, 1]},
        {"weight_version": 2, "weight_checksum": "w2", "transfer_checksum": "t2", "replicas": [0, 1]},
    ]
    assert replica_nodes(events) == {0: "node-a", 1: "node-b"}


@pytest.mark.parametrize(
    "second, message",
    [
        ([(0, "w0", "t0"), (2, "stale", "t2")], r"push 1: .*weight_checksum \['stale', 'w2'\]"),
        ([(0, "w0", "t0"), (1, "w2", "t2")], r"push 1: .*weight_version \['1', '2'\]"),
        ([(0, "w0", "t0"), (2, "w2", "other")], r"push 1: .*transfer_checksum"),
        ([(0, "w0", "t0")], r"different numbers of pushes: \{0: 2, 1: 1\}"),
    ],
)
def test_a_replica_that_missed_or_garbled_a_push_is_named(tmp_path, second, message):
    events = write_run(tmp_path / "events.jsonl", [[(0, "w0", "t0"), (2, "w2", "t2")], second])
    with pytest.raises(ReplicasDisagree, match=message):
        push_rounds(events, 2)


def test_a_missing_replica_is_named(tmp_path):
    events = write_run(tmp_path / "events.jsonl", [[(0, "w0", "t0")]], nodes=("node-a",))
    with pytest.raises(ReplicasDisagree, match=r"replicas 0..1, found replicas \[0\]"):
        push_rounds(events, 2)
