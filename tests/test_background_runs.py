"""tests/background_runs.py: a module's ``background_runs`` runs in a child process, one module at a time until the
queue is widened to two; its results come back whole, a failure comes back with the child's output, and closing
stops the children."""

import os
import textwrap
import time

import pytest

from tests.background_runs import RESULTS, BackgroundRuns


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
    body = """
        import os, time
        from pathlib import Path
        def background_runs(root):
            root.mkdir(parents=True)
            started = time.time(); time.sleep(0.3)
            return {"pid": os.getpid(), "root": root, "span": (started, time.time())}
    """
    first, second = module(tmp_path, "first", body), module(tmp_path, "second", body)
    background.enqueue(first)
    background.enqueue(second)
    a, b = background.results(first), background.results(second)
    assert a["pid"] != os.getpid() and a["pid"] != b["pid"]  # each in its own child
    assert a["root"].is_dir() and a["root"].parent.name == "0_first" and b["root"].parent.name == "1_second"
    assert a["span"][1] <= b["span"][0]  # one at a time, in queue order


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
    assert running.started.wait(10)
    started = time.perf_counter()
    background.close()
    assert running.done.wait(30) and waiting.done.wait(5)
    assert time.perf_counter() - started < 25
    assert running.process.poll() is not None
    with pytest.raises(RuntimeError, match="session ended before it started"):
        background.results(queued)


def test_widened_two_modules_run_at_once_and_close_stops_both(tmp_path, background):
    body = """
        import os, time
        def background_runs(root):
            started = time.time(); time.sleep(1.5)
            return {"span": (started, time.time())}
    """
    first, second = module(tmp_path, "first", body), module(tmp_path, "second", body)
    background.enqueue(first)
    background.enqueue(second)
    background.widen()
    background.widen()  # once: still two at a time
    a, b = background.results(first), background.results(second)
    assert b["span"][0] < a["span"][1] and a["span"][0] < b["span"][1]  # the spans overlap
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
    body = """
        import time
        def background_runs(root):
            started = time.time(); time.sleep(1.0)
            return {"span": (started, time.time())}
    """
    names = ("big", "also_big", "small")
    paths = {name: module(tmp_path, name, body) for name in names}
    runs = BackgroundRuns(tmp_path / "out", dict(os.environ), workers=2, memory_gib=10)
    try:
        runs.enqueue(paths["big"], peak_gib=7)
        runs.enqueue(paths["also_big"], peak_gib=6)
        runs.enqueue(paths["small"], peak_gib=3)
        spans = {name: runs.results(paths[name])["span"] for name in names}
    finally:
        runs.close()

    def overlap(a, b):
        return spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1]

    assert overlap("big", "small") and not overlap("big", "also_big")
    assert spans["also_big"][0] >= spans["big"][1]


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
