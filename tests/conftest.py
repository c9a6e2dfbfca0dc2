"""Fixtures shared by every test folder, and the e2e tests' order and background runs (tests/background_runs.py)."""

import json
import os
from pathlib import Path
from typing import Optional

import pytest

from tests.file_scheduling import file_of, group_of
from tests.background_runs import (
    BACKGROUND_MINUTES,
    BACKGROUND_PEAK_GIB,
    EXTENDED_ENV,
    FUNCTION,
    TIMEOUT_SECONDS,
    BackgroundRuns,
    job_folder,
    module_figure,
    tier_environment,
    wait_for_results,
    yes_or_no,
)

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session", autouse=True)
def config_files_parsed_once():
    """Hydra parses each YAML file of a config tree once per test session, not at every compose (the launcher's
    memo for a batch of runs, :func:`verl_ext.runs.compose.memoised_config_files`): most of a composition's time,
    and the suite composes about two thousand configs. Each use gets a deep copy; a tree is keyed by its folder."""
    from verl_ext.runs.compose import memoised_config_files

    with memoised_config_files():
        yield


@pytest.fixture(scope="session")
def tiny_assets(tmp_path_factory) -> Path:
    """The tiny assets (model, tokenizer, counting task), built once per test session (about 5 s)."""
    from verl_ext.tiny.assets import build_tiny_assets

    out = tmp_path_factory.mktemp("tiny_assets") / "tiny"
    build_tiny_assets(out)
    return out


@pytest.fixture
def shared_datasets():
    path = SHARED / "datasets"
    if not path.is_dir():
        pytest.skip(f"{path} is absent (real datasets live in the project's shared folder, not in a user's clone)")
    return path


# --- e2e runs in the background (tests/background_runs.py) ---------------------------------------------

BACKGROUND = pytest.StashKey()
BASE_DIR = pytest.StashKey()
EXTENDED_SELECTED = pytest.StashKey()  # whether the session selected tests marked extended (pytest_collection_finish)
# what a fixture of the other tests keeps running in this process (a local Ray with its actors) and that the e2e
# tests, last, never use: each is called once, when the first e2e test starts, so that it does not hold a core's
# share and memory while the e2e runs finish (a fixture's own teardown then finds it stopped)
RELEASE_BEFORE_E2E: list = []


def release_before_e2e() -> None:
    """Call (once each, last registered first) and forget what :data:`RELEASE_BEFORE_E2E` holds."""
    while RELEASE_BEFORE_E2E:
        RELEASE_BEFORE_E2E.pop()()


# what pytest's own processes (up to ~2.5 GiB each: two xdist workers under run_scripts/test.sh) and the system keep
# beside the background runs
MEMORY_RESERVE_GIB = 7.0


def _base_dir(config) -> Path:
    """The folder of the session's background runs (made once): the session's numbered temporary folder, as
    tmp_path_factory gives it (pytest's own attribute)."""
    if BASE_DIR not in config.stash:
        config.stash[BASE_DIR] = config._tmp_path_factory.mktemp("background_runs")
    return config.stash[BASE_DIR]


def _background(config) -> BackgroundRuns:
    if BACKGROUND not in config.stash:
        base = _base_dir(config)
        # one child while the other tests run (they take the other core; two children beside them starve them, and
        # the suite then ends with them alone on one core), two once they are done, as long as the two modules' peaks
        # fit in this machine's memory beside pytest itself and the system
        import psutil

        memory_gib = psutil.virtual_memory().total / 2**30 - MEMORY_RESERVE_GIB
        # the children make the extended tier's runs only when this session selected its tests (the user's spelling
        # of the variable in the shell never reaches them: it chose the tests, pytest_configure)
        environment = {**os.environ, EXTENDED_ENV: "1" if config.stash.get(EXTENDED_SELECTED, False) else "0"}
        config.stash[BACKGROUND] = BackgroundRuns(base, environment, workers=1, memory_gib=memory_gib)
    return config.stash[BACKGROUND]


# --- tiers and time limits (docs/testing.md) ----------------------------------------------------------

DEFAULT_MARK_EXPRESSION = "not extended"  # pytest.ini's addopts: the default suite leaves the extended tier out
# an e2e test waits for its module's background runs (each child stops after TIMEOUT_SECONDS, failing with its log),
# which may first wait in the queue behind another module's: its limit leaves room for that, unit tests keep
# pytest.ini's tight one
E2E_TIMEOUT_SECONDS = TIMEOUT_SECONDS + 10 * 60


def pytest_configure(config):
    """``VERL_EXT_TESTS_EXTENDED`` in the user's shell: a yes adds the extended tier to a session that would leave it
    out (pytest.ini's ``-m "not extended"``, not a ``-m`` of the user's own); an unknown spelling is refused here,
    before collection, naming the variable and the spellings allowed (pytest's usage error, exit 4).
    Under pytest-xdist (``-n N``) the controller runs the background runs (:class:`XdistBackground`)."""
    try:
        wanted = yes_or_no(os.environ.get(EXTENDED_ENV))
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    own_expression = any(arg.startswith("-m") for arg in config.invocation_params.args)  # "-m EXPR" or "-mEXPR"
    if wanted and not own_expression and config.option.markexpr == DEFAULT_MARK_EXPRESSION:
        config.option.markexpr = ""
    if _xdist_controller(config):
        config.pluginmanager.register(XdistBackground(config), "verl-ext-xdist-background")


# --- pytest-xdist: the controller runs the background runs, the workers' tests read them ---------------------

WORKER_INPUT = "verl_ext_background_runs"  # the background runs' folder, handed to each xdist worker
SELECTION = "selection.json"  # what a worker selected: the e2e modules with runs, the e2e tests, the extended flag,
# and the files in an xdist_group


def _xdist_controller(config) -> bool:
    return getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput")


def _xdist_worker_base(config) -> Optional[Path]:
    """In an xdist worker: the folder where the controller makes the background runs (None elsewhere)."""
    worker_input = getattr(config, "workerinput", None)
    return Path(worker_input[WORKER_INPUT]) if worker_input and WORKER_INPUT in worker_input else None


class XdistBackground:
    """Under pytest-xdist the workers split the tests and the controller, which runs none, makes the background runs:
    once, however many workers there are. Each worker tells it what it selected (a file, written when its collection
    ends: every worker selects the same tests); the controller queues those modules' runs as a plain session would,
    and lets two children run once the first e2e test starts (the e2e tests are last). A worker's e2e test waits for
    the job's folder (:func:`tests.background_runs.wait_for_results`)."""

    def __init__(self, config):
        self.config = config
        self.e2e_tests: set[str] = set()
        self.file_groups: dict[str, str] = {}  # a test file -> its xdist_group (the workers' selection)
        self.e2e_files: set[str] = set()  # handed out last (tests/file_scheduling.py)

    def pytest_configure_node(self, node):
        node.workerinput[WORKER_INPUT] = str(_base_dir(self.config))

    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") == "loadfile":
            from tests.file_scheduling import FileScheduling

            return FileScheduling(config, log, self.file_groups, self.e2e_files)
        return None  # xdist's own

    def pytest_xdist_node_collection_finished(self, node, ids):
        if BACKGROUND in self.config.stash:
            return  # queued when the first worker finished collecting
        written = _base_dir(self.config) / SELECTION
        if not written.is_file():
            return  # the worker's session runs nothing (--collect-only, a collection error)
        selection = json.loads(written.read_text(encoding="utf-8"))
        self.config.stash[EXTENDED_SELECTED] = selection["extended"]
        self.e2e_tests = set(selection["e2e_tests"])
        self.file_groups.update(selection["file_groups"])  # before xdist schedules: it waits for every collection
        self.e2e_files.update(file_of(nodeid) for nodeid in self.e2e_tests)
        for module in selection["modules"]:
            _background(self.config).enqueue(Path(module["path"]), peak_gib=module["peak_gib"],
                                             environment=module["environment"])

    def pytest_runtest_logstart(self, nodeid, location):
        if nodeid in self.e2e_tests and BACKGROUND in self.config.stash:
            self.config.stash[BACKGROUND].widen()


def pytest_collection_modifyitems(config, items):
    """e2e tests last (in their order): their runs go on in the background while the others run. Each e2e test
    without a limit of its own gets E2E_TIMEOUT_SECONDS (pytest-timeout; unit tests keep pytest.ini's)."""
    items[:] = [item for item in items if not item.get_closest_marker("e2e")] + [
        item for item in items if item.get_closest_marker("e2e")
    ]
    for item in items:
        if item.get_closest_marker("e2e") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_SECONDS))


@pytest.hookimpl(tryfirst=True)  # in an xdist worker, before xdist tells the controller that collection ended
def pytest_collection_finish(session):
    """Queue the background runs of every selected e2e module that has them (in test order)."""
    option = session.config.option
    if option.collectonly or (session.testsfailed and not option.continue_on_collection_errors):
        return  # nothing will run (a collection error interrupts the session)
    modules = []
    for item in session.items:
        module = getattr(item, "module", None)
        if item.get_closest_marker("e2e") and hasattr(module, FUNCTION) and item.path not in modules:
            modules.append(item.path)
    # the extended runs when the session reads them (pytest -m extended), never otherwise, whatever the shell says
    session.config.stash[EXTENDED_SELECTED] = any(item.get_closest_marker("extended") for item in session.items)
    # which of each module's tiers the session selected: its child makes only the runs their tests read, and the
    # module's declared minutes and peak memory are those of these runs
    tiers = {path: {"default": False, "extended": False} for path in modules}
    for item in session.items:
        if item.path in tiers:
            tiers[item.path]["extended" if item.get_closest_marker("extended") else "default"] = True
    declared = {item.path: item.module for item in session.items if item.path in modules}
    minutes = {path: module_figure(declared[path], BACKGROUND_MINUTES, **tiers[path]) for path in modules}
    peak_gib = {path: module_figure(declared[path], BACKGROUND_PEAK_GIB, **tiers[path]) for path in modules}
    # longest first, so that the last runs to finish are short ones, two at a time
    ordered = sorted(modules, key=lambda path: -minutes[path])
    worker_base = _xdist_worker_base(session.config)
    if worker_base is not None:  # an xdist worker: the controller queues them (XdistBackground)
        selection = {
            "modules": [{"path": str(path), "peak_gib": peak_gib[path], "environment": tier_environment(**tiers[path])}
                        for path in ordered],
            "extended": session.config.stash[EXTENDED_SELECTED],
            "e2e_tests": [item.nodeid for item in session.items if item.get_closest_marker("e2e")],
            "file_groups": {file_of(item.nodeid): group for item in session.items
                            if (group := group_of(item)) is not None},
        }
        partial = worker_base / f"{SELECTION}.{os.getpid()}.partial"  # complete or absent: each worker writes it whole
        partial.write_text(json.dumps(selection), encoding="utf-8")
        os.replace(partial, worker_base / SELECTION)
        return
    for path in ordered:
        _background(session.config).enqueue(path, peak_gib=peak_gib[path], environment=tier_environment(**tiers[path]))


def pytest_sessionfinish(session):
    if BACKGROUND in session.config.stash:
        session.config.stash[BACKGROUND].close()


@pytest.fixture(scope="module")
def background_results(request):
    """What this module's ``background_runs(root)`` returned, run in a child process (see above). The first e2e test
    to ask comes after every other test (they are last): from then on two children run at a time."""
    release_before_e2e()
    worker_base = _xdist_worker_base(request.config)
    if worker_base is not None:  # the xdist controller makes them
        return wait_for_results(job_folder(worker_base, request.path))
    background = _background(request.config)
    background.widen()
    return background.results(request.path)
