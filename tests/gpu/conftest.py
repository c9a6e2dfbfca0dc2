"""tests/gpu: tests marked ``gpu`` need a CUDA GPU and vLLM and are skipped, with the reason, without them;
the unmarked tests here check the GPU code's CPU-verifiable parts (profile, smoke checks, loss-reference
comparison on CPU) and run in the normal suite."""

import pytest

GPU_TESTS_RUN = pytest.StashKey[bool]()


def pytest_collection_modifyitems(config, items):
    import os

    marked = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not marked or os.environ.get("VERL_EXT_GPU_TESTS_BACKEND") == "cpu":  # the rehearsal (tests/gpu/gpu_runs.py)
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
def gpu_runs(tmp_path_factory):
    """The GPU tests' real main_ppo runs (tests/gpu/gpu_runs.py), each started on first use; kept in
    $VERL_EXT_GPU_TEST_DIR (reused by later commands) when it is set."""
    import os
    from pathlib import Path

    from tests.gpu.gpu_runs import GPURuns
    from verl_ext.tiny.assets import build_tiny_assets

    base = os.environ.get("VERL_EXT_GPU_TEST_DIR")
    base = Path(base) if base else tmp_path_factory.mktemp("gpu_runs")
    backend = os.environ.get("VERL_EXT_GPU_TESTS_BACKEND", "gpu")
    size = "cpu" if backend == "cpu" else "gpu"
    assets = base / f"tiny-{size}"
    build_tiny_assets(assets, size=size)  # kept when current: same path, same overrides in every command
    return GPURuns(base, assets, backend)


def pytest_terminal_summary(terminalreporter, config):
    """The closing note of a session that ran gpu tests: on which device and versions they ran."""
    if config.stash.get(GPU_TESTS_RUN, False):
        from verl_ext.gpu.device import describe_device, format_device

        terminalreporter.write_line(f"gpu tests ran on: {format_device(describe_device())}")
