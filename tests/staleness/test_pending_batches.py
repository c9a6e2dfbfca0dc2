"""Reading the TransferQueue listing: complete steps and the leftovers to clear, each with its reason."""

from verl_ext.staleness.pending_batches import BEHAVIOUR_VERSION_TAG, STEP_TAG, prompt_uid, read_pending_batches


def prompt(step, status="finished", version=0):
    tag = {"is_prompt": True, "status": status, "global_steps": 1, BEHAVIOUR_VERSION_TAG: version}
    if step is not None:
        tag[STEP_TAG] = step
    return tag


def trajectory():
    return {"status": "success", "max_global_steps": 0}


def test_complete_steps_and_their_trajectories_are_kept():
    listing = {
        "a": prompt(3),
        "b": prompt(3, status="failure"),
        "a_0_0": trajectory(),
        "a_1_0": trajectory(),
        "b_0_0": trajectory(),
        "c": prompt(4),
        "d": prompt(4),
        "c_0_0": trajectory(),
        "d_0_0": trajectory(),
    }
    pending = read_pending_batches(listing, batch_size=2)
    assert pending.complete_steps == {3, 4}
    assert pending.keys_to_clear == {}


def test_leftovers_are_cleared_with_reasons():
    listing = {
        # step 5: one group still running -> the whole step is cleared
        "a": prompt(5),
        "b": prompt(5, status="running"),
        "a_0_0": trajectory(),
        # step 6: one group of two
        "c": prompt(6),
        "c_0_0": trajectory(),
        # a group written by another trainer mode
        "d": prompt(None),
        "d_0_0": trajectory(),
        # trajectories of the batch being trained when the checkpoint was saved (prompt already cleared)
        "e_0_0": trajectory(),
        "e_1_0": trajectory(),
        # a complete step
        "f": prompt(7),
        "g": prompt(7),
        "f_0_0": trajectory(),
    }
    pending = read_pending_batches(listing, batch_size=2)
    assert pending.complete_steps == {7}
    assert set(pending.keys_to_clear) == {"a", "b", "a_0_0", "c", "c_0_0", "d", "d_0_0", "e_0_0", "e_1_0"}
    assert "step 5" in pending.keys_to_clear["a_0_0"]
    assert "1 of 2" in pending.keys_to_clear["c"]
    assert "without a delayed_sync step tag" in pending.keys_to_clear["d_0_0"]
    assert pending.keys_to_clear["e_1_0"] == "trajectory of an already consumed batch"
    assert sum(pending.clear_reasons().values()) == len(pending.keys_to_clear)


def test_prompt_uid_of_trajectory_keys():
    assert prompt_uid("0f1e-22_3_0") == "0f1e-22"
    assert prompt_uid("0f1e-22") == "0f1e-22"
