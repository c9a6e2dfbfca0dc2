"""``delayed_sync_state.json`` through the trainer's real ``_save_checkpoint`` / ``_load_checkpoint`` and verl's
real checkpoint layout: ``global_step_<g>/{actor/, data.pt, transfer_queue/, delayed_sync_state.json}`` and
``latest_checkpointed_iteration.txt`` (verl's save and load, verl's TransferQueue on the package's local Ray,
the dataloader over a parquet file). Stand-in: the actor worker group (tests/staleness/stand_ins.py).

The promises: the state is written whole before verl marks the checkpoint complete; a save that fails while
writing it keeps the earlier state and marks nothing; a resume reads it back with every field checked and a
damaged one stops the resume before verl loads anything, naming the file and the field (the counts of the
module docstring of verl_ext.staleness.checkpoint_state; the pure reader's cases are in
tests/adversarial/test_checkpoint_state_files.py).
"""

import json
import os

import pytest

from tests.staleness.fit_harness import compose
from tests.staleness.stand_ins import StandInActor
from verl_ext.staleness.checkpoint_state import STATE_FILE, CheckpointStateError

TRACKER = "latest_checkpointed_iteration.txt"
STEP = 3
GOOD = {"sync_interval": 3, "sync_offset": 1, "offline": False, "weight_syncs": 1, "weight_pushes": 2, "schedule_since": 0}


class RecordingActor(StandInActor):
    """Records, when verl saves the actor (the first part of its checkpoint), whether the state is already there."""

    def __init__(self):
        super().__init__()
        self.state_present_at_save = None
        self.loaded = False

    def save_checkpoint(self, local_path, *args, **kwargs):
        self.state_present_at_save = os.path.exists(os.path.join(os.path.dirname(local_path), STATE_FILE))
        super().save_checkpoint(local_path, *args, **kwargs)

    def load_checkpoint(self, local_path, del_local_after_load=False):
        self.loaded = True
        super().load_checkpoint(local_path, del_local_after_load)


def make_trainer(config):
    from verl_ext.staleness.trainer import DelayedSyncTrainer
    from verl_ext.tiny.tokenizer import build_tokenizer

    trainer = DelayedSyncTrainer(config)
    trainer.tokenizer, trainer.processor = build_tokenizer(), None
    trainer._init_dataloader()
    trainer.actor_rollout_wg = RecordingActor()
    return trainer


@pytest.fixture(scope="module")
def saved(transfer_queue, dataset_file, tmp_path_factory):
    """A checkpoint of global step 3 saved by the trainer (schedule m=3, n=1; one sync and two pushes so far)."""
    root = tmp_path_factory.mktemp("checkpoint")
    config = compose(dataset_file, root, "trainer.v1.delayed_sync.sync_interval=3", "trainer.v1.delayed_sync.sync_offset=1")
    trainer = make_trainer(config)
    trainer.global_steps, trainer.weight_syncs, trainer.weight_pushes = STEP, 1, 2
    trainer._save_checkpoint()
    return config, root / "checkpoints", trainer.actor_rollout_wg


def test_the_state_is_written_before_verl_marks_the_checkpoint_complete(saved):
    config, checkpoints, actor = saved
    folder = checkpoints / f"global_step_{STEP}"
    assert actor.state_present_at_save is True  # before verl's actor save, so before its tracker file
    assert (checkpoints / TRACKER).read_text() == str(STEP)
    assert json.loads((folder / STATE_FILE).read_text()) == GOOD
    assert {path.name for path in folder.iterdir()} == {"actor", "data.pt", "transfer_queue", STATE_FILE}  # no temp file


def test_a_resume_restores_the_counts(saved):
    config, _, _ = saved
    trainer = make_trainer(config)
    trainer._load_checkpoint()
    assert (trainer.global_steps, trainer.weight_syncs, trainer.weight_pushes) == (STEP, 1, 2)
    assert trainer.actor_rollout_wg.loaded


def test_a_failed_state_write_keeps_the_earlier_state_and_marks_nothing(saved, monkeypatch, tmp_path):
    """A save of step 4 over a folder that already holds a state (a step saved again after a resume), failing
    while the state is written (a full disk): the earlier state stays whole, verl's tracker still says 3."""
    config, checkpoints, _ = saved
    folder = checkpoints / "global_step_4"
    folder.mkdir()
    (folder / STATE_FILE).write_text(json.dumps(GOOD))
    trainer = make_trainer(config)
    trainer.global_steps, trainer.weight_syncs, trainer.weight_pushes = 4, 2, 3

    def full_disk(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        trainer._save_checkpoint()
    monkeypatch.undo()
    assert json.loads((folder / STATE_FILE).read_text()) == GOOD
    assert sorted(path.name for path in folder.iterdir()) == [STATE_FILE]  # no temp file, no verl part
    assert (checkpoints / TRACKER).read_text() == str(STEP)
    assert trainer.actor_rollout_wg.state_present_at_save is None  # verl's save never started


DAMAGED = {
    "empty": (b"", "empty"),
    "cut short": (json.dumps(GOOD).encode()[:25], "not JSON"),
    "garbled": (b"\x00\xff\xfe{", "not UTF-8"),
    "a list": (b"[1, 2]", "expected a JSON object"),
    "missing field": (json.dumps({k: v for k, v in GOOD.items() if k != "weight_pushes"}).encode(), "field 'weight_pushes': missing"),
    "unknown field": (json.dumps({**GOOD, "weight_sync": 1}).encode(), "field 'weight_sync': not a field"),
    "negative count": (json.dumps({**GOOD, "weight_syncs": -1}).encode(), "field 'weight_syncs': expected an integer in 0.."),
    "fractional count": (json.dumps({**GOOD, "weight_pushes": 2.5}).encode(), "field 'weight_pushes': expected an integer"),
    "integral float": (json.dumps({**GOOD, "weight_pushes": 2.0}).encode(), "field 'weight_pushes': expected an integer"),
    "boolean count": (json.dumps({**GOOD, "weight_syncs": True}).encode(), "field 'weight_syncs': expected an integer"),
    "string count": (json.dumps({**GOOD, "weight_syncs": "1"}).encode(), "field 'weight_syncs': expected an integer"),
    "null count": (json.dumps({**GOOD, "weight_pushes": None}).encode(), "field 'weight_pushes': expected an integer"),
    "huge count": (json.dumps({**GOOD, "weight_pushes": 2**64}).encode(), "field 'weight_pushes': expected an integer"),
    "zero interval": (json.dumps({**GOOD, "sync_interval": 0}).encode(), "field 'sync_interval': expected an integer in 1.."),
    "numeric offline": (json.dumps({**GOOD, "offline": 0}).encode(), "field 'offline': expected true or false"),
    "offline with an interval": (json.dumps({**GOOD, "offline": True}).encode(), "field 'offline': sync_interval=3 is invalid: allowed values are 1 (the default) with offline=true"),
    "5000 digits": (b'{"weight_syncs": ' + b"9" * 5000 + b"}", "not JSON"),
}


@pytest.fixture(scope="module")
def resuming_trainer(saved):
    """One trainer for every damaged case: a refused resume changes nothing in it."""
    return make_trainer(saved[0])


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_state_stops_the_resume_naming_the_file_and_field(saved, resuming_trainer, case):
    _, checkpoints, _ = saved
    path = checkpoints / f"global_step_{STEP}" / STATE_FILE
    content, message = DAMAGED[case]
    original = path.read_bytes()
    path.write_bytes(content)
    try:
        with pytest.raises(CheckpointStateError) as raised:
            resuming_trainer._load_checkpoint()
    finally:
        path.write_bytes(original)
    assert str(raised.value).startswith(str(path)) and message in str(raised.value), str(raised.value)
    assert not resuming_trainer.actor_rollout_wg.loaded  # refused before verl loaded anything


@pytest.mark.parametrize("kind", ["folder", "fifo", "link to /dev/zero", "broken link"])
def test_a_state_that_is_not_a_regular_file_stops_the_resume(saved, resuming_trainer, kind):
    _, checkpoints, _ = saved
    path = checkpoints / f"global_step_{STEP}" / STATE_FILE
    original = path.read_bytes()
    path.unlink()
    try:
        if kind == "folder":
            path.mkdir()
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "broken link":
            path.symlink_to(path.with_name("nowhere"))
        else:
            path.symlink_to("/dev/zero")
        with pytest.raises(CheckpointStateError, match="not a regular file|link to nothing") as raised:
            resuming_trainer._load_checkpoint()  # a FIFO would block, /dev/zero never end
        assert str(path) in str(raised.value)
    finally:
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
        path.write_bytes(original)
    assert not resuming_trainer.actor_rollout_wg.loaded


def test_a_checkpoint_without_a_state_resumes_with_the_schedules_count(saved, caplog):
    """A checkpoint written by another trainer mode has no state: recoverable, with a warning (as before)."""
    config, checkpoints, _ = saved
    path = checkpoints / f"global_step_{STEP}" / STATE_FILE
    original = path.read_bytes()
    path.unlink()
    try:
        trainer = make_trainer(config)
        with caplog.at_level("WARNING", logger="verl_ext.staleness.trainer"):
            trainer._load_checkpoint()
    finally:
        path.write_bytes(original)
    assert f"no {STATE_FILE} in the checkpoint of step {STEP}" in caplog.text
    assert trainer.global_steps == STEP and trainer.weight_syncs == trainer.schedule.sync_count(STEP - 1)
