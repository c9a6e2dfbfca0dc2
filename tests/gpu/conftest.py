"""tests/gpu: tests marked ``gpu`` need a CUDA GPU and vLLM and are skipped, with the reason, without them;
the unmarked tests here check the GPU code's CPU-verifiable parts (profile, smoke checks, loss-reference
comparison on CPU) and run in the normal suite."""

import pytest

GPU_TESTS_RUN = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config, items):
    marked = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not marked:
        return
    from verl_ext.gpu.device import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    config.stash[GPU_TESTS_RUN] = reason is None
    if reason is not None:
        skip = pytest.mark.skip(reason=f"needs a CUDA GPU and vLLM: {reason}")
        for item in marked:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_gpu_assets(tmp_path_factory):
    from verl_ext.tiny.assets import build_tiny_assets

    out = tmp_path_factory.mktemp("tiny_gpu_assets") / "tiny-gpu"
    build_tiny_assets(out, size="gpu")
    return out


@pytest.fixture(scope="session")
def gpu_runs(tiny_gpu_assets, tmp_path_factory):
    """The GPU tests' real main_ppo runs (tests/gpu/gpu_runs.py), each started on first use."""
    from tests.gpu.gpu_runs import GPURuns

    return GPURuns(tmp_path_factory.mktemp("gpu_runs"), tiny_gpu_assets)


def pytest_terminal_summary(terminalreporter, config):
    """The closing note of a session that ran gpu tests: on which device and versions they ran."""
    if config.stash.get(GPU_TESTS_RUN, False):
        from verl_ext.gpu.device import describe_device, format_device

        terminalreporter.write_line(f"gpu tests ran on: {format_device(describe_device())}")
