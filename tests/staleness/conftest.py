"""Fixtures of the delayed_sync tests that run verl's real ``fit`` loop (tests/staleness/fit_harness.py)."""

import pytest
from omegaconf import OmegaConf


TRANSFER_QUEUE_GROUP = "transfer_queue"
# the time limit of a test using it: the first one's includes the start (12 s alone; over 120 s on two cores beside a
# background run's start-up and the other test process, seen in a clean-clone session)
TRANSFER_QUEUE_TIMEOUT_SECONDS = 300


def pytest_collection_modifyitems(config, items):
    """The tests that use :func:`transfer_queue` run in one test process, their files one after another, under
    run_scripts/test.sh's two (tests/file_scheduling.py): one local Ray with its actors at a time, started once."""
    for item in items:
        if "transfer_queue" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(TRANSFER_QUEUE_GROUP))
            if not item.get_closest_marker("timeout"):  # the first one's limit includes the fixture's start
                item.add_marker(pytest.mark.timeout(TRANSFER_QUEUE_TIMEOUT_SECONDS))


@pytest.fixture(scope="package")
def transfer_queue():
    """verl's TransferQueue on a local Ray, started once for this folder and stopped after its last test -- or
    when the e2e tests begin (they run last, also this folder's, and never use it: its controller and storage
    actors would poll beside their runs: tests/conftest.py's RELEASE_BEFORE_E2E)."""
    ray = pytest.importorskip("ray")
    import transfer_queue as tq

    from tests.background_runs import ahead_of_the_background_runs
    from tests.conftest import RELEASE_BEFORE_E2E

    from verl_ext.cpu.ray_session import start_ray

    started_ray = not ray.is_initialized()
    with ahead_of_the_background_runs():
        if started_ray:  # started again once if it hits Ray's 30-second start-up limit (a loaded machine)
            start_ray(dict(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False))
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    stopped = []

    def stop() -> None:
        if stopped:
            return
        stopped.append(True)
        tq.close()
        if started_ray:
            ray.shutdown()

    RELEASE_BEFORE_E2E.append(stop)
    yield tq
    stop()
    if stop in RELEASE_BEFORE_E2E:
        RELEASE_BEFORE_E2E.remove(stop)


@pytest.fixture(scope="package")
def dataset_file(tmp_path_factory):
    """64 prompts in verl's RL parquet format; extra_info.index identifies each prompt in the data stream."""
    from datasets import Dataset

    rows = [
        {
            "data_source": "staleness_test",
            "prompt": [{"role": "user", "content": f"count {index % 9 + 1}"}],
            "ability": "count",
            "reward_model": {"style": "rule", "ground_truth": str(index)},
            "extra_info": {"split": "train", "index": index},
        }
        for index in range(64)
    ]
    path = tmp_path_factory.mktemp("data") / "prompts.parquet"
    Dataset.from_list(rows).to_parquet(str(path))
    return path


@pytest.fixture
def log_dir(tmp_path, monkeypatch):
    """Where verl's file logger writes each run's metrics (``<log_dir>/staleness/<experiment>.jsonl``)."""
    monkeypatch.setenv("VERL_FILE_LOGGER_ROOT", str(tmp_path / "logs"))
    return tmp_path / "logs"
