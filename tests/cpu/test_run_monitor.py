"""The run monitor measures a child process tree's peak memory and when metric records appear."""

import sys
import textwrap

from verl_ext.runs import monitor
from verl_ext.runs.monitor import run_and_measure

CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, time
    metrics, samples = sys.argv[1], sys.argv[2]

    def taken():  # the monitor's samples so far: the test's after_sample adds a byte to the file
        return os.path.getsize(samples) if os.path.exists(samples) else 0

    def after_samples(count):  # `count` samples ended since now: all but the first began after now
        target = taken() + count
        while taken() < target:
            time.sleep(0.01)

    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = b'x' * (300 * 2**20); print('allocated', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert grandchild.stdout.readline() == "allocated\\n"
    after_samples(3)  # two whole samples with the grandchild's 300 MiB: RSS read by each, PSS by one (read at most
    #                   every PSS_MIN_SECONDS, two samples apart)
    with open(metrics, "a") as f:
        f.write('{"step": 1, "data": {}}\\n')
    after_samples(2)  # a sample begun after the first record saw it: the second comes at a later sample
    with open(metrics, "a") as f:
        f.write('{"step": 2, "data": {}}\\n')
    after_samples(2)
    grandchild.stdin.close()
    grandchild.wait()
    print("done")
    """
)


def count_samples(path):
    """An ``after_sample`` that adds a byte to ``path`` per sample taken (the child waits on its size)."""
    def taken() -> None:
        with open(path, "ab") as file:
            file.write(b".")

    return taken


def test_measures_descendants_and_record_times(tmp_path):
    """The child moves on only once the monitor has sampled what it did (no sleep guessing how long that takes)."""
    metrics, samples = tmp_path / "metrics.jsonl", tmp_path / "samples"
    measured = run_and_measure(
        [sys.executable, "-c", CHILD, str(metrics), str(samples)], env=None, log_path=tmp_path / "log.txt",
        metrics_path=metrics, after_sample=count_samples(samples),
    )
    assert measured.returncode == 0
    assert (tmp_path / "log.txt").read_text().strip() == "done"
    assert measured.peak_rss_bytes > 300 * 2**20  # the grandchild's allocation is counted
    assert measured.peak_pss_bytes > 250 * 2**20
    assert 0 < measured.cpu_seconds < measured.wall_seconds * 2
    # the first record came after three samples, SAMPLE_SECONDS apart at least; the second after the first was seen
    assert monitor.SAMPLE_SECONDS < measured.first_record_seconds < measured.last_record_seconds < measured.wall_seconds
    assert measured.startup_seconds(0.25) == measured.first_record_seconds - 0.25
    assert 0 < measured.teardown_seconds < measured.wall_seconds


def wait_until(condition) -> None:
    """Poll ``condition`` (an event of another process); a wait that never ends fails at the test's time limit."""
    import time

    while not condition():
        time.sleep(0.02)


def reading(log) -> bool:
    """The monitor is in its reading loop: the child's first line (longer than the log's buffer) is in the log."""
    return log.exists() and log.stat().st_size > 0


FIRST_LINE = "print('tick' + '.' * 10000, flush=True)"  # past the log file's 8 KiB buffer: written through at once


def test_a_failing_command_reports_its_status(tmp_path):
    measured = run_and_measure([sys.executable, "-c", "raise SystemExit(3)"], env=None, log_path=tmp_path / "log")
    assert measured.returncode == 3 and measured.first_record_seconds is None and measured.teardown_seconds is None


def test_an_interrupt_while_the_child_runs_stops_the_child_too(tmp_path):
    """Ctrl-C (here KeyboardInterrupt raised in this thread while it reads the child's output) must not leave the
    child running: main_ppo and its Ray would go on without anyone reading their output."""
    import _thread
    import os
    import threading

    import psutil
    import pytest

    import signal

    pid_file = tmp_path / "pid"
    # ticks for at most 120 s: the test fails instead of hanging if the interrupt never arrives
    child = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n{FIRST_LINE}\n"
             "for _ in range(1200):\n    print('tick', flush=True)\n    time.sleep(0.1)")

    def interrupt_when_reading():  # inside run_and_measure's loop, where an interrupt must stop the child
        wait_until(lambda: reading(tmp_path / "log"))
        _thread.interrupt_main()

    # interrupt_main() does nothing while SIGINT is ignored, as it is in a suite started in the background by a
    # non-interactive shell (`pytest ... &`): Python's own handler for the test's duration
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_reading, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_and_measure([sys.executable, "-c", child], env=dict(os.environ), log_path=tmp_path / "log")
    finally:
        signal.signal(signal.SIGINT, previous)
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "tick" in (tmp_path / "log").read_text()


def test_output_that_is_not_utf8_is_kept_with_replacement_characters(tmp_path):
    """A worker printing raw bytes (a model's output, say) must not end the run with a decoding error."""
    child = "import sys; sys.stdout.buffer.write(b'before \\xff\\xfe after\\n'); sys.stdout.flush()"
    measured = run_and_measure([sys.executable, "-c", child], env=None, log_path=tmp_path / "log")
    assert measured.returncode == 0
    assert (tmp_path / "log").read_text(encoding="utf-8") == "before \ufffd\ufffd after\n"


def test_sigterm_to_a_command_stops_its_child_as_ctrl_c_does(tmp_path):
    """A command killed by a scheduler (SIGTERM) inside ``sigterm_as_interrupt`` leaves through the interrupt's path:
    its child is stopped, not left running without a reader."""
    import os
    import signal
    import subprocess

    import psutil

    pid_file = tmp_path / "pid"
    child = (f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n{FIRST_LINE}\n"
             "while True:\n    print('tick', flush=True)\n    time.sleep(0.1)")
    command = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from verl_ext.runs.monitor import run_and_measure, sigterm_as_interrupt
        try:
            with sigterm_as_interrupt():
                run_and_measure([sys.executable, "-c", {child!r}], env=None, log_path=Path({str(tmp_path / 'log')!r}))
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    parent = subprocess.Popen([sys.executable, "-c", command], env={**os.environ, "PYTHONPATH": os.getcwd()})
    wait_until(lambda: reading(tmp_path / "log") or parent.poll() is not None)  # inside sigterm_as_interrupt's block
    assert pid_file.exists() and parent.poll() is None, "the child did not start"
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(60) == 130
    pid = int(pid_file.read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


PARENT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from verl_ext.runs.monitor import run_and_measure

    run_and_measure([sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(120)"], None,
                    Path(sys.argv[1]), echo=True)
    """
)


def test_the_child_dies_with_its_parent_killed_by_sigkill(tmp_path):
    """A launcher killed with ``kill -9`` runs no ``finally``: the kernel's parent-death signal stops its child (the
    ``main_ppo`` that would otherwise go on training)."""
    import os
    import signal
    import subprocess
    import time

    import psutil

    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "log")], stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    assert child.ppid() == parent.pid
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_the_console_shows_verls_config_dump_as_one_line_and_the_log_keeps_every_line(tmp_path, capsys):
    """verl's TaskRunner pprints the whole composed config (~1,000 lines): the echo shows one line saying where it
    is, and every other line -- another worker's in the middle of the dump, the progress bars, the step lines --
    as it comes; the log file keeps all of it."""
    import json

    dump = [  # as verl's pprint writes it: nested dicts, a value on a line of its own, strings holding brackets and
        # quotes; and as Ray forwards it, a long line cut in pieces anywhere (before a comma, inside a string)
        "{'actor_rollout_ref': {'actor': {'_target_': 'verl.workers.config.FSDPActorConfig',",
        "                                 'checkpoint': {'save_contents': ['model',",
        "                                                                  'optimizer']},",
        "                                 'clip_ratio': 0.2",
        ",",
        "                                 'fsdp_size': -1},",
        "                       'model': {'path': \"/models/it's {ti",
        "ny}\"}},",
        " 'critic': ",
        "{'_target_': 'verl.workers.config.FSDPCriticConfig',",
        "            'ppo_epochs': 1},",
        " 'trainer': {'experiment_name': 'a ] b ) c } \\' (',",
        "             'logger': ['console', 'file']}}",
    ]
    runner, worker = "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m ", "\x1b[36m(WorkerDict pid=8)\x1b[0m "
    lines = ([runner + "Using dataset class: RLHFDataset"] + [runner + line for line in dump[:3]]
             + [worker + "Qwen2ForCausalLM contains 126.34K parameters"] + [runner + line for line in dump[3:]]
             + [runner + "  indented, right after the dump", runner, "Training Progress:   0%|  | 0/2",
                runner + "step:1 - critic/score/mean:0.1"])
    child = f"import json\nfor line in json.loads({json.dumps(json.dumps(lines))}):\n    print(line)"
    log = tmp_path / "main_ppo.log"
    assert run_and_measure([sys.executable, "-c", child], env=None, log_path=log, echo=True).returncode == 0
    assert log.read_text().splitlines() == lines
    assert capsys.readouterr().out.splitlines() == [
        runner + "Using dataset class: RLHFDataset",
        f"{runner}[verl-ext] verl's composed config: in {log}",
        worker + "Qwen2ForCausalLM contains 126.34K parameters",
        runner + "  indented, right after the dump",
        "Training Progress:   0%|  | 0/2",
        runner + "step:1 - critic/score/mean:0.1",
    ]


def test_a_config_dump_that_never_closes_is_left_out_for_a_bounded_number_of_lines(tmp_path, monkeypatch):
    """A lost piece would leave the brackets open for ever: after MAX_DUMP_LINES lines the echo shows lines again."""
    import io

    from verl_ext.runs import monitor

    monkeypatch.setattr(monitor, "MAX_DUMP_LINES", 3)
    console = io.StringIO()
    echo = monitor.ConsoleEcho(tmp_path / "log", console)
    for line in ["(T pid=1) {'actor_rollout_ref': {'a': 1,", *[f"(T pid=1)  'k{i}': {i}," for i in range(3)],
                 "(T pid=1) step:1 - x:1"]:
        echo(line + "\n")
    assert console.getvalue().splitlines() == [f"(T pid=1) [verl-ext] verl's composed config: in {tmp_path / 'log'}",
                                               "(T pid=1) step:1 - x:1"]


class _FakeProcess:
    """A process whose RSS the test sets; its PSS is 80% of it, and reading PSS is counted."""

    pid = 1

    def __init__(self):
        self.rss = 0
        self.pss_reads = 0

    def memory_info(self):
        return type("Memory", (), {"rss": self.rss})()

    def memory_full_info(self):
        self.pss_reads += 1
        return type("Memory", (), {"pss": int(self.rss * 0.8)})()

    def cpu_times(self):
        return type("Times", (), {"user": 1.0, "system": 0.0})()

    def create_time(self):
        return 0.0


def test_pss_is_read_while_memory_grows_and_not_once_it_is_steady(monkeypatch):
    """PSS is slow to read: the sampler reads it when the RSS sum reaches a new high (at most every PSS_MIN_SECONDS),
    so a steady run costs no PSS readings, and the peak of a growing run is still measured."""
    from verl_ext.runs import monitor

    clock = {"now": 0.0}
    monkeypatch.setattr(monitor.time, "monotonic", lambda: clock["now"])
    process = _FakeProcess()
    sampler = monitor.ProcessSampler(lambda: [process])

    def sample_at(seconds, rss):
        clock["now"], process.rss = seconds, rss
        sampler._sample()

    for tick in range(20):  # start-up: memory grows by 10% per second, sampled every half second
        sample_at(tick * 0.5, int(1e9 * 1.05 ** tick))
    peak_rss = process.rss
    sample_at(10.0, peak_rss)  # the growth of the last half second is read now (the reading was due)
    grown_reads = process.pss_reads
    assert 9 <= grown_reads <= 12  # about once a second while growing
    assert sampler.peak_pss == int(peak_rss * 0.8)
    for tick in range(21, 220):  # steady: the memory moves by less than the re-read growth
        sample_at(tick * 0.5, int(peak_rss * (1 + 0.01 * (tick % 2))))
    assert process.pss_reads == grown_reads
    high = int(peak_rss * 1.5)
    sample_at(200.0, high)  # a new high is read at once
    assert process.pss_reads == grown_reads + 1
    assert sampler.peak_pss == int(high * 0.8) and sampler.peak_rss == high


def test_a_costly_pss_reading_waits_until_its_cost_is_a_small_share_of_a_core(monkeypatch):
    """A big tree's PSS takes the kernel a while to read: after a reading that cost 0.3 CPU-s, the next waits
    0.3 / PSS_CPU_SHARE seconds however fast the memory grows, so reading PSS never takes more than that share of
    a core; the RSS (cheap) is still read at every sample, and the peak once the growth stops."""
    from verl_ext.runs import monitor

    clock = {"now": 0.0, "cpu": 0.0}
    monkeypatch.setattr(monitor.time, "monotonic", lambda: clock["now"])
    monkeypatch.setattr(monitor.time, "thread_time", lambda: clock["cpu"])
    process = _FakeProcess()
    reading = process.memory_full_info

    def costly_reading():
        clock["cpu"] += 0.3
        return reading()

    process.memory_full_info = costly_reading
    sampler = monitor.ProcessSampler(lambda: [process])
    pause = 0.3 / monitor.PSS_CPU_SHARE
    assert pause > 4 * monitor.PSS_MIN_SECONDS
    samples = int(3 * pause / 0.5)
    for tick in range(samples):  # memory grows by 5% every half second for three pauses
        clock["now"], process.rss = tick * 0.5, int(1e9 * 1.05 ** tick)
        sampler._sample()
    assert process.pss_reads == 3  # at 0 s, then one pause apart: not at every second of growth
    assert sampler.peak_rss == process.rss  # RSS at every sample
    assert clock["cpu"] / clock["now"] <= monitor.PSS_CPU_SHARE * 1.1
    clock["now"] = 3 * pause  # the growth has stopped; the reading due now takes the peak
    sampler._sample()
    assert process.pss_reads == 4 and sampler.peak_pss == int(process.rss * 0.8)


def test_a_run_measured_in_another_thread_is_left_out_of_this_process_tree(tmp_path):
    """An in-process session measures this process's tree (the Ray it started); a run launched beside it in another
    thread (the test suite's quickstart beside its session) is measured by its own run_and_measure and left out of
    the session's tree, with its descendants -- else both would count it. Once that run ends, a new child is in."""
    import subprocess
    import threading
    import time

    import psutil

    release = tmp_path / "release"
    child = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
        while not os.path.exists({str(release)!r}):
            time.sleep(0.05)
        grandchild.stdin.close()
        grandchild.wait()
        """
    )
    measured = {}
    thread = threading.Thread(target=lambda: measured.update(result=run_and_measure(
        [sys.executable, "-c", child], env=None, log_path=tmp_path / "log.txt")))
    thread.start()
    tree = monitor.this_process_tree()
    try:
        deadline = time.monotonic() + 60  # the child is registered, and it started the grandchild
        while not monitor._MEASURED_ON_THEIR_OWN and time.monotonic() < deadline:
            time.sleep(0.05)
        (launched,) = monitor._MEASURED_ON_THEIR_OWN
        child = psutil.Process(launched)
        while not child.children() and time.monotonic() < deadline:
            time.sleep(0.05)
        run_tree = {launched, *(process.pid for process in child.children(recursive=True))}
        members = {process.pid for process in tree()}
        assert len(run_tree) == 2 and run_tree <= {process.pid for process in psutil.Process().children(recursive=True)}
        assert psutil.Process().pid in members and not members & run_tree  # neither the run's child nor its grandchild
    finally:
        release.touch()
        thread.join(timeout=120)
    assert measured["result"].returncode == 0 and not monitor._MEASURED_ON_THEIR_OWN
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert other.pid in {process.pid for process in tree()}  # a child nobody measures is this tree's
    finally:
        other.stdin.close()
        other.wait()
