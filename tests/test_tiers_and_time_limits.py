"""The test tiers and their time limits (docs/testing.md): pytest-timeout fails a hung test with a traceback of where it
hung and the session goes on; e2e tests get the longer limit; ``VERL_EXT_TESTS_EXTENDED`` in a user's shell chooses
the tests (a yes adds the extended tier, an unknown spelling is refused), never what the background children make
behind a session's back. Each session here is a real pytest process with this suite's conftest as its plugin, on a
small test folder of its own."""

import configparser
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.background_runs import DEFAULT_TIER_ENV, EXTENDED_ENV, NO, YES, yes_or_no
from tests.conftest import E2E_TIMEOUT_SECONDS

REPO = Path(__file__).resolve().parents[1]
GUARD_SECONDS = 300  # only stops a session of this test that hangs (a failure either way); nothing is timed


def repo_ini() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "pytest.ini")
    return parser["pytest"]


def session(tmp_path: Path, files: dict[str, str], *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """pytest in ``tmp_path`` on ``files``, with this suite's markers, addopts, time limits and conftest (as a plugin)."""
    ini = repo_ini()
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =" + ini["markers"] + "\n"
        f"addopts = {ini['addopts'].replace('--import-mode=importlib', '')}\n"
        f"timeout = {ini['timeout']}\ntimeout_method = {ini['timeout_method']}\n"
    )
    for name, body in files.items():
        (tmp_path / name).write_text(textwrap.dedent(body))
    environment = {key: value for key, value in os.environ.items() if key != EXTENDED_ENV}
    environment.update(env or {}, PYTHONPATH=os.pathsep.join([str(REPO), environment.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=GUARD_SECONDS,
    )


# --- time limits -------------------------------------------------------------------------------------------------

def test_the_suite_has_a_tight_limit_by_signal_and_e2e_tests_a_generous_one():
    ini = repo_ini()
    assert ini["timeout_method"] == "signal"  # the test fails, the session (and its stopping of Ray) goes on
    assert 30 <= int(ini["timeout"]) <= 300
    assert E2E_TIMEOUT_SECONDS >= 10 * int(ini["timeout"])


HANGING = """
    import threading

    def wait_for_nothing():
        threading.Event().wait()  # nobody sets it

    def test_hangs():
        wait_for_nothing()

    def test_after_it():
        assert True
"""


def test_a_hanging_unit_test_fails_at_its_limit_with_a_traceback_of_where_it_hung(tmp_path):
    """The hung test fails (pytest-timeout's SIGALRM ends the wait), the traceback shows the function and the line it
    waited on, and the next test still runs: the session is not killed."""
    result = session(tmp_path, {"test_hanging.py": HANGING}, "-o", "timeout=2")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Timeout (>2.0s) from pytest-timeout" in output, output
    assert "in wait_for_nothing" in output and "threading.Event().wait()  # nobody sets it" in output, output
    assert "1 failed, 1 passed" in output, output


E2E_MODULE = f"""
    import os

    import pytest

    pytestmark = pytest.mark.e2e

    def background_runs(root):
        return {{"extended": os.environ["{EXTENDED_ENV}"], "default": os.environ["{DEFAULT_TIER_ENV}"]}}

    @pytest.fixture(scope="module")
    def runs(background_results):
        return background_results

    def test_default(runs, request):
        print("limit", request.node.get_closest_marker("timeout").args[0], "child saw", runs["extended"])

    @pytest.mark.extended
    def test_extended(runs):
        saw = f"extended child saw {{runs['extended']}} default tier {{runs['default']}}"
        print(saw)
        if "SAW_LOG" in os.environ:  # an xdist worker's output is not shown
            with open(os.environ["SAW_LOG"], "a") as log:
                log.write(saw + "\\n")
"""


# --- the extended tier's variable --------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [*YES, "YES", " True ", "On"])
def test_yes_spellings_are_yes(value):
    assert yes_or_no(value) is True


@pytest.mark.parametrize("value", [*NO, "No", " FALSE ", None])
def test_no_spellings_and_unset_are_no(value):
    assert yes_or_no(value) is False


@pytest.mark.parametrize("value", ["2", "yes please", "enabled", "ja"])
def test_an_unknown_spelling_is_refused_naming_the_variable_and_the_spellings(value):
    with pytest.raises(ValueError) as raised:
        yes_or_no(value)
    message = str(raised.value)
    assert f"{EXTENDED_ENV}={value!r}" in message and "yes" in message and "false" in message


def test_a_yes_in_the_shell_selects_the_extended_tier_and_its_runs(tmp_path):
    result = session(tmp_path, {"test_fake_e2e.py": E2E_MODULE}, "-s", env={EXTENDED_ENV: "Yes"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout and "extended child saw 1 default tier 1" in result.stdout


@pytest.mark.parametrize("processes", [(), ("-n", "2", "--dist", "loadfile")], ids=["one process", "xdist"])
def test_the_extended_tier_alone_tells_the_child_to_skip_the_default_tiers_runs(tmp_path, processes):
    """``pytest -m extended`` (CI's second session) selects no default test of the module: its child is told so and
    makes only the runs the extended tests read (one process, and the xdist controller from the workers' selection)."""
    if processes:
        pytest.importorskip("xdist")
    saw = tmp_path / "saw.log"
    result = session(tmp_path, {"test_fake_e2e.py": E2E_MODULE}, "-m", "extended", *processes, env={"SAW_LOG": str(saw)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and saw.read_text() == "extended child saw 1 default tier 0\n"


def test_a_yes_in_the_shell_does_not_make_a_session_without_extended_tests_pay_for_their_runs(tmp_path):
    """The user's own -m leaves the extended tests out: the child is told "0" (makes no extended run), not the
    shell's "1". (And the e2e test got the e2e limit.)"""
    result = session(tmp_path, {"test_fake_e2e.py": E2E_MODULE}, "-s", "-m", "not extended", env={EXTENDED_ENV: "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 deselected" in result.stdout and f"limit {E2E_TIMEOUT_SECONDS} child saw 0" in result.stdout


def test_an_unknown_spelling_in_the_shell_is_a_usage_error_before_collection(tmp_path):
    result = session(tmp_path, {"test_fake_e2e.py": E2E_MODULE}, env={EXTENDED_ENV: "sure"})
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's usage error
    assert f"{EXTENDED_ENV}='sure': not a yes or a no" in result.stderr
    assert "Traceback" not in result.stderr and "passed" not in result.stdout


# --- pytest-xdist: the controller makes each module's runs once, every worker's tests read them ---------------------

XDIST_E2E_MODULE = f"""
    import os

    import pytest

    pytestmark = pytest.mark.e2e

    def background_runs(root):
        with open(os.environ["RUNS_LOG"], "a") as log:  # one line per time a module's runs are made
            log.write(os.path.basename(__file__) + "\\n")
        if "failing" in __file__:
            raise RuntimeError("this module's runs fail")
        return {{"made_by": os.getpid(), "extended": os.environ["{EXTENDED_ENV}"],
                 "default": os.environ["{DEFAULT_TIER_ENV}"]}}

    @pytest.fixture(scope="module")
    def runs(background_results):
        return background_results

    @pytest.mark.parametrize("case", range(4))
    def test_reads_the_runs(runs, case):
        assert runs["made_by"] != os.getpid() and (runs["extended"], runs["default"]) == ("0", "1")
"""


def test_under_xdist_the_controller_makes_each_modules_runs_once_and_a_failure_reaches_its_tests(tmp_path):
    pytest.importorskip("xdist")
    runs_log = tmp_path / "runs.log"
    files = {"test_fake_e2e_one.py": XDIST_E2E_MODULE, "test_fake_e2e_two.py": XDIST_E2E_MODULE,
             "test_fake_e2e_failing.py": XDIST_E2E_MODULE,
             "test_unit.py": "import pytest\n\n@pytest.mark.parametrize('n', range(20))\ndef test_unit(n):\n    pass\n"}
    result = session(tmp_path, files, "-n", "2", "--dist", "loadfile", env={"RUNS_LOG": str(runs_log)})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "4 errors" in output and "28 passed" in output, output  # the failing module's 4 tests, the other 28
    assert "this module's runs fail" in output, output  # the end of the child's log, in the test's error
    assert sorted(runs_log.read_text().split()) == ["test_fake_e2e_failing.py", "test_fake_e2e_one.py",
                                                    "test_fake_e2e_two.py"]


GROUPED_MODULE = """
    import os

    import pytest

    pytestmark = pytest.mark.xdist_group("shared")

    @pytest.mark.parametrize("n", range(3))
    def test_where(n):
        with open(os.environ["WHERE_LOG"], "a") as log:
            log.write(os.path.basename(__file__) + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""


def test_under_xdist_the_files_of_one_xdist_group_run_in_one_process(tmp_path):
    """tests/file_scheduling.py: files with a test in one xdist_group are one unit of work (plain loadfile would
    hand the first two to the two processes at once); the other files stay units of their own; e2e files come last."""
    pytest.importorskip("xdist")
    where_log = tmp_path / "where.log"
    files = {f"test_grouped_{name}.py": GROUPED_MODULE for name in "ab"}
    files["test_grouped_c.py"] = GROUPED_MODULE.replace('xdist_group("shared")', 'xdist_group(name="shared")')
    files.update({f"test_free_{n}.py": GROUPED_MODULE.replace('pytestmark = pytest.mark.xdist_group("shared")', "")
                  for n in range(4)})
    # an e2e file larger than every other: xdist's own order (largest first) would hand it out first
    files["test_fake_e2e.py"] = GROUPED_MODULE.replace('pytest.mark.xdist_group("shared")', "pytest.mark.e2e").replace(
        "range(3)", "range(12)")
    result = session(tmp_path, files, "-n", "2", "--dist", "loadfile", env={"WHERE_LOG": str(where_log)})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line.split() for line in where_log.read_text().splitlines()]
    workers: dict[str, set[str]] = {}
    for file, worker in lines:
        workers.setdefault(file, set()).add(worker)
    assert len(lines) == 7 * 3 + 12, lines  # every test once
    assert len(workers["test_fake_e2e.py"]) == 1, workers  # one file, one process
    in_its_process = [file for file, worker in lines if worker in workers["test_fake_e2e.py"]]
    first = in_its_process.index("test_fake_e2e.py")
    assert first > 0 and set(in_its_process[first:]) == {"test_fake_e2e.py"}, lines  # after that process's others
    del workers["test_fake_e2e.py"]
    assert len(workers) == 7 and all(len(used) == 1 for used in workers.values()), workers
    assert len({worker for file, used in workers.items() if "grouped" in file for worker in used}) == 1, workers
    assert len({worker for used in workers.values() for worker in used}) == 2, workers  # both processes had work
