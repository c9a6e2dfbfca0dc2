"""tests/background_runs.py: a module's ``background_runs`` runs in a child process, one module at a time until the
queue is widened to two; its results come back whole, a failure comes back with the child's output, and closing
stops the children."""

import os
import textwrap

import pytest

from tests.background_runs import RESULTS, BackgroundRuns, job_folder


# A module whose children record, without any clock, which other modules' children were running when each started:
# each marks itself running (a file), then looks for the others' marks, so of two children alive at once the later
# one always sees the earlier. ``partner``: wait (a barrier, at most WAIT_S) until that module's child has started too
# (one at a time, the first of two partners would wait for the second forever: the guard fails it).
WAIT_S = 120  # only a guard: a partner that never comes fails the child (and its test) instead of hanging
MARKED = """
    import os, time
    from pathlib import Path
    SHARED = Path({shared!r})
    def background_runs(root):
        me = Path(__file__).stem
        root.mkdir(parents=True)
        (SHARED / (me + ".running")).touch()
        (SHARED / (me + ".arrived")).touch()  # stays: the partner's barrier
        try:
            others = sorted(path.stem for path in SHARED.glob("*.running") if path.stem != me)
            with open(SHARED / "order", "a") as order:
                order.write(me + "\\n")
            partner = {partner!r}
            if partner:
                give_up = time.monotonic() + {wait}
                while not (SHARED / (partner + ".arrived")).exists():
                    if time.monotonic() > give_up:
                        raise RuntimeError(partner + " never ran beside " + me)
                    time.sleep(0.01)
            return {{"pid": os.getpid(), "root": root, "others": others}}
        finally:
            (SHARED / (me + ".running")).unlink()
"""


def marked(tmp_path, name, partner=None):
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    return module(tmp_path, name, MARKED.format(shared=str(shared), partner=partner, wait=WAIT_S))


def order(tmp_path) -> list[str]:
    return (tmp_path / "shared" / "order").read_text().split()


def module(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.fixture
def background(tmp_path):
    runs = BackgroundRuns(tmp_path / "out", dict(os.environ))
    yield runs
    runs.close()


def test_results_come_back_as_returned_one_module_after_the_other(tmp_path, background):
    first, second = marked(tmp_path, "first"), marked(tmp_path, "second")
    background.enqueue(first)
    background.enqueue(second)
    a, b = background.results(first), background.results(second)
    assert a["pid"] != os.getpid() and a["pid"] != b["pid"]  # each in its own child
    # each module's folder is named for its file, the same in every process (an xdist worker reads it by that name)
    assert a["root"].is_dir() and a["root"].parent == job_folder(background.base_dir, first)
    assert b["root"].parent == job_folder(background.base_dir, second) and a["root"].parent.name.startswith("first-")
    assert a["others"] == b["others"] == [] and order(tmp_path) == ["first", "second"]  # one at a time, in queue order


def test_a_failure_is_raised_with_the_childs_output_and_leaves_no_results(tmp_path, background):
    failing = module(tmp_path, "failing", """
        def background_runs(root):
            print("about to fail")
            raise ValueError("no run for you")
    """)
    with pytest.raises(RuntimeError, match=r"(?s)failing\.py: child exited with status 1.*about to fail.*no run for you"):
        background.results(failing)
    assert not (background.jobs[failing.resolve()].out / RESULTS).exists()


def test_close_stops_the_running_child_and_fails_the_queued_ones(tmp_path, background):
    slow = module(tmp_path, "slow", """
        import time
        def background_runs(root):
            time.sleep(600)
    """)
    queued = module(tmp_path, "queued", "def background_runs(root):\n    return 1\n")
    running = background.enqueue(slow)
    waiting = background.enqueue(queued)
    assert running.started.wait(WAIT_S)
    background.close()
    # the child would sleep 600 s: only close() can end it before these guards
    assert running.done.wait(WAIT_S) and waiting.done.wait(WAIT_S)
    assert running.process.poll() is not None
    with pytest.raises(RuntimeError, match="session ended before it started"):
        background.results(queued)


def test_widened_two_modules_run_at_once_and_close_stops_both(tmp_path, background):
    # each waits for the other: both finish only if they run at once
    first, second = marked(tmp_path, "first", partner="second"), marked(tmp_path, "second", partner="first")
    background.enqueue(first)
    background.enqueue(second)
    background.widen()
    background.widen()  # once: still two at a time
    a, b = background.results(first), background.results(second)
    assert a["others"] == ["second"] or b["others"] == ["first"]
    assert len(background.threads) == 2
    slow = module(tmp_path, "slow", """
        import time
        def background_runs(root):
            time.sleep(600)
    """)
    other = module(tmp_path, "other", """
        import time
        def background_runs(root):
            time.sleep(600)
    """)
    jobs = [background.enqueue(slow), background.enqueue(other)]
    for job in jobs:
        assert job.started.wait(60)
    background.close()
    for job in jobs:
        assert job.done.wait(60) and job.process.poll() is not None


def test_two_workers_pair_only_modules_whose_peaks_fit_in_the_memory_given(tmp_path):
    """Two at a time, but never two whose declared peaks exceed the memory: the big one runs beside the small one
    that fits, and the two big ones one after the other, in queue order otherwise."""
    # big and small wait for each other (they must run at once); also_big waits for nobody
    partners = {"big": "small", "also_big": None, "small": "big"}
    names = tuple(partners)
    paths = {name: marked(tmp_path, name, partner=partners[name]) for name in names}
    runs = BackgroundRuns(tmp_path / "out", dict(os.environ), workers=2, memory_gib=10)
    try:
        runs.enqueue(paths["big"], peak_gib=7)
        runs.enqueue(paths["also_big"], peak_gib=6)
        runs.enqueue(paths["small"], peak_gib=3)
        others = {name: runs.results(paths[name])["others"] for name in names}
    finally:
        runs.close()
    # big ran beside small (their barrier passed), never beside also_big, which came after big
    assert "also_big" not in others["big"] and "big" not in others["also_big"]
    assert order(tmp_path).index("also_big") > order(tmp_path).index("big")


def test_what_the_other_tests_keep_running_is_released_once_when_the_e2e_tests_begin():
    """tests/conftest.py: a fixture's in-process Ray (tests/staleness/conftest.py's TransferQueue) is stopped when the
    first e2e test asks for its background results, not when the session ends after them."""
    from tests import conftest

    calls = []
    saved = list(conftest.RELEASE_BEFORE_E2E)
    conftest.RELEASE_BEFORE_E2E[:] = [lambda: calls.append("first"), lambda: calls.append("second")]
    try:
        conftest.release_before_e2e()
        conftest.release_before_e2e()  # nothing left: nothing called twice
    finally:
        conftest.RELEASE_BEFORE_E2E[:] = saved
    assert calls == ["second", "first"]


def test_a_modules_minutes_and_peak_are_those_of_the_tiers_the_session_selected():
    """tests/cpu/test_e2e_main_ppo.py's default tier runs the quickstart beside its session (10.5 GiB), its extended
    tier alone makes two runs (5.5 GiB): alone, the extended tier pairs it with a module the default figure would not
    fit beside. A plain number is every tier's."""
    from types import SimpleNamespace

    from tests.background_runs import BACKGROUND_MINUTES, BACKGROUND_PEAK_GIB, module_figure

    per_tier = SimpleNamespace(BACKGROUND_PEAK_GIB={"default": 10.5, "extended": 5.5}, BACKGROUND_MINUTES=4)
    assert module_figure(per_tier, BACKGROUND_PEAK_GIB, default=True, extended=False) == 10.5
    assert module_figure(per_tier, BACKGROUND_PEAK_GIB, default=False, extended=True) == 5.5
    assert module_figure(per_tier, BACKGROUND_PEAK_GIB, default=True, extended=True) == 10.5
    assert module_figure(per_tier, BACKGROUND_MINUTES, default=False, extended=True) == 4.0
    assert module_figure(SimpleNamespace(), BACKGROUND_MINUTES, default=True, extended=True) == 0.0


def test_a_ray_start_up_is_ahead_only_while_it_starts():
    """What starts under ahead_of_the_background_runs (a process, a thread, a process's own thread) runs at the
    raised priority inside, and at the session's once the block ends; threads that existed before are untouched."""
    import subprocess
    import sys
    import threading
    import time

    from tests.background_runs import BOOST, ahead_of_the_background_runs

    original = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, original - 1)  # a raised priority needs root (CI and this machine are)
    except PermissionError:
        pytest.skip("raising a priority needs root: ahead_of_the_background_runs changes nothing here")
    os.setpriority(os.PRIO_PROCESS, 0, original)

    def nice(thread_id):
        return os.getpriority(os.PRIO_PROCESS, thread_id)

    def sleeper(seconds, out):
        out.append(threading.get_native_id())
        time.sleep(seconds)

    older = []
    threading.Thread(target=sleeper, args=(5, older), daemon=True).start()
    while not older:
        time.sleep(0.01)
    # a child that starts a thread of its own and prints both ids
    child_code = ("import os, threading, time\n"
                  "ids = []\n"
                  "threading.Thread(target=lambda: (ids.append(threading.get_native_id()), time.sleep(60)), daemon=True).start()\n"
                  "time.sleep(0.2)\n"
                  "print(os.getpid(), ids[0], flush=True)\n"
                  "time.sleep(60)\n")
    with ahead_of_the_background_runs():
        inside = []
        threading.Thread(target=sleeper, args=(5, inside), daemon=True).start()
        child = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.PIPE, text=True)
        child_pid, child_thread = map(int, child.stdout.readline().split())
        while not inside:
            time.sleep(0.01)
        raised = [nice(0), nice(inside[0]), nice(child_pid), nice(child_thread), nice(older[0])]
    try:
        after = [nice(0), nice(inside[0]), nice(child_pid), nice(child_thread), nice(older[0])]
    finally:
        child.kill()
        child.wait()
    boosted = original - BOOST
    assert raised == [boosted, boosted, boosted, boosted, original]
    assert after == [original] * 5


# A module whose child records its own session's autogroup nice value as the pacer sets it: before, while and after a
# process named like a Ray node (a copy of `sleep`) runs in its session.
PACED = """
    import shutil, subprocess, time
    from pathlib import Path
    from tests.background_runs import autogroup_nice
    def background_runs(root):
        root.mkdir(parents=True)
        def settles_at(value):  # the pacer looks once a second: wait until it has set VALUE (a guard of 20 s)
            give_up = time.monotonic() + 20
            while autogroup_nice("self") != value and time.monotonic() < give_up:
                time.sleep(0.05)
            return autogroup_nice("self")
        seen = [settles_at({background})]
        node = root / "raylet"
        shutil.copy(shutil.which("sleep"), node)
        process = subprocess.Popen([str(node), "30"])
        seen.append(settles_at(0))
        process.kill()
        process.wait()
        seen.append(settles_at({background}))
        return seen
"""


def test_a_childs_session_runs_at_a_lower_priority_but_while_its_ray_node_starts(tmp_path, background):
    from tests.background_runs import BACKGROUND_NICE, _autogroups_on

    if not _autogroups_on():
        pytest.skip("this kernel shares the CPU without autogroups (/proc/sys/kernel/sched_autogroup_enabled)")
    paced = module(tmp_path, "paced", PACED.format(background=BACKGROUND_NICE))
    assert background.results(paced) == [BACKGROUND_NICE, 0, BACKGROUND_NICE]


def test_a_ray_node_process_counts_as_starting_only_in_its_session_and_while_young(tmp_path):
    import shutil
    import subprocess
    import time

    from tests.background_runs import RAY_START_SECONDS, ray_node_starting

    node = tmp_path / "gcs_server"
    shutil.copy(shutil.which("sleep"), node)
    process = subprocess.Popen([str(node), "30"], start_new_session=True)
    try:
        while not ray_node_starting(process.pid) and process.poll() is None:
            time.sleep(0.05)  # until /proc shows its name (the test's time limit guards it)
        assert ray_node_starting(process.pid)
        assert not ray_node_starting(os.getsid(0))  # this session has none
        assert not ray_node_starting(process.pid, now=time.time() + RAY_START_SECONDS)  # started long ago
    finally:
        process.kill()
        process.wait()
    assert not ray_node_starting(process.pid)
