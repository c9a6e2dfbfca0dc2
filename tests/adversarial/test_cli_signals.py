"""Ctrl-C and SIGTERM to the ``verl-ext`` console script: exit status 130 and one line, never a traceback.

The console script is ``from verl_ext.cli import main; sys.exit(main())``; the child below is exactly that (it prints a
line before calling ``main``, and the signal comes once ``main`` is seen to run: the doctor's first line, or the run's
SIGTERM handler installed, not a time guessed). ``verl-ext run`` in dry-run mode composes its run
with Hydra, which imports verl: seconds in which the signal arrives. SIGTERM is sent once the command has installed
its handler (``/proc/<pid>/status`` lists SIGTERM as caught), which it does around its runs, as a scheduler's
SIGTERM would find it; outside that block SIGTERM ends the process the default way, with no traceback either.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.run_scripts.scripts import REPO

CONSOLE_SCRIPT = "import sys\nfrom verl_ext.cli import main\nprint('started', flush=True)\nsys.exit(main(sys.argv[1:]))"


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (the SigCgt mask of /proc/<pid>/status)."""
    with open(f"/proc/{pid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigCgt:"))
    return bool(mask & (1 << (signum - 1)))


@pytest.mark.parametrize("argv, signum", [
    (["run", "gsm8k", "rec_oneside_nois"], signal.SIGINT),
    (["run", "gsm8k", "rec_oneside_nois"], signal.SIGTERM),
    (["doctor"], signal.SIGINT),
], ids=["run-ctrl-c", "run-sigterm", "doctor-ctrl-c"])
def test_an_interrupted_console_command_exits_130_without_a_traceback(tmp_path, argv, signum):
    env = {**os.environ, "PYTHONPATH": str(REPO), "VERL_EXT_DRY_RUN": "1", "DATA_DIR": str(tmp_path / "data"),
           "OUTPUT_DIR": str(tmp_path / "outputs")}
    # SIGINT at its default, as a terminal's Ctrl-C finds it (a suite started with & by a script ignores SIGINT, and
    # a child inherits that: Python would then install no handler)
    process = subprocess.Popen([sys.executable, "-c", CONSOLE_SCRIPT, *argv], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert process.stdout.readline() == "started\n"
        if argv[0] == "doctor":  # inside main: the doctor says it is importing verl (its first line), then does
            assert "verl-ext doctor:" in process.stdout.readline()
        else:  # inside main, around the runs: the command's SIGTERM handler is installed (a wait on an event, not a
            #    sleep guessing how long Python takes to get there; a wait that never ends fails at the test's limit)
            while not catches(process.pid, signal.SIGTERM) and process.poll() is None:
                time.sleep(0.01)
        assert process.poll() is None, "the command ended before the signal: nothing was tested"
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert f"[verl-ext] {argv[0]}: interrupted" in err.splitlines()[-1]
