"""The plugin registers the CPU backend with verl's registries; the platform is chosen only explicitly.

verl swallows a plugin's import error, so these tests read verl's registries rather than trusting the
import. Platform selection is decided once per process, so it is checked in fresh interpreters.
"""

import json
import os
import subprocess
import sys

import verl  # noqa: F401  (loads the verl.plugins entry points, as in every verl process)

from verl_ext.cpu_runtime import patches
from verl_ext.cpu_runtime.registration import ROLLOUT_NAME, SERVER_ADAPTER_PATH

import pytest

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)


def test_platform_and_rollout_are_in_verls_registries():
    from verl.plugin.platform import PlatformBase, PlatformRegistry
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import RolloutReplica, get_rollout_replica_class

    from verl_ext.cpu_runtime.platform import cpu_platform_class
    from verl_ext.cpu_runtime.rollout_replica import CPURolloutReplica
    from verl_ext.cpu_runtime.server_adapter import CPUServerAdapter

    assert PlatformRegistry.get("cpu") is cpu_platform_class()
    assert issubclass(PlatformRegistry.get("cpu"), PlatformBase)
    assert get_rollout_replica_class(ROLLOUT_NAME) is CPURolloutReplica
    assert issubclass(CPURolloutReplica, RolloutReplica)
    assert get_rollout_class(ROLLOUT_NAME, "async") is CPUServerAdapter


def test_private_rollout_registry_is_still_how_verl_finds_adapters():
    """We add to verl's private ``_ROLLOUT_REGISTRY`` dict; fail loudly if verl changes how it is read."""
    import inspect

    from verl.workers.rollout import base

    assert base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] == SERVER_ADAPTER_PATH
    source = inspect.getsource(base.get_rollout_class)
    assert "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in source, "verl changed get_rollout_class: revisit registration"
    public = [name for name in dir(base) if "register" in name.lower() and not name.startswith("_")]
    assert not public, f"verl now has a public rollout registration API {public}: use it instead of the private dict"


PROBE = """
import json, sys, torch, verl
from verl.plugin.platform import get_platform
from verl_ext.cpu_runtime.patches import active_patches
platform = get_platform()
report = {
    "device_name": platform.device_name,
    "class": type(platform).__name__,
    "patches": list(active_patches()),
    "init_process_group_patched": hasattr(torch.distributed.init_process_group, "__verl_ext_patch__"),
    "loopback_scheme": "verl-ext-loopback" in sys.modules["torch.distributed.rendezvous"]._rendezvous_handlers,
}
if platform.device_name == "cpu":
    # verl's own process-group start-up, with the CPU profile's DIST_INIT_METHOD: where does rank 0's store listen?
    import os, socket, psutil
    from verl.utils.distributed import initialize_global_process_group_ray
    from verl_ext.cpu.profile import cpu_environment
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    os.environ.update(DIST_INIT_METHOD=cpu_environment()["DIST_INIT_METHOD"], MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
    initialize_global_process_group_ray(timeout_second=120)
    report["store_listens_on"] = sorted(connection.laddr.ip for connection in psutil.Process().net_connections("tcp")
                                        if connection.status == "LISTEN" and connection.laddr.port == port)
    torch.distributed.destroy_process_group()
    module = platform.device_module
    free, total = module.mem_get_info()
    device = platform.current_device()
    report.update(
        tensor_device=str(torch.zeros(1).to(device).device),
        backend=platform.communication_backend_name(),
        ray_resource=platform.ray_resource_name(),
        ipc=platform.is_ipc_supported(),
        memory_ok=0 < module.memory_allocated() <= module.max_memory_allocated() and 0 < free <= total,
        empty_cache=module.empty_cache(),
        auto_detected=platform.is_platform_available(use_smi_check=True),
    )
print("REPORT" + json.dumps(report))
"""


def probe(verl_platform):
    env = {key: value for key, value in os.environ.items() if key != "VERL_PLATFORM"}
    if verl_platform is not None:
        env["VERL_PLATFORM"] = verl_platform
    output = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    return json.loads(next(line for line in output.splitlines() if line.startswith("REPORT"))[len("REPORT") :])


def test_cpu_platform_when_selected_with_its_patches():
    report = probe("cpu")
    assert report["class"] == "CPUPlatform" and report["device_name"] == "cpu"
    assert report["tensor_device"] == "cpu" and report["backend"] == "gloo" and report["ray_resource"] == "GPU"
    assert report["ipc"] is False and report["memory_ok"] is True and report["empty_cache"] is None
    assert report["auto_detected"] is False
    assert set(report["patches"]) == {patch.name for patch in patches.PATCHES}
    assert report["init_process_group_patched"] is True
    # verl's init_process_group in a CPU run: rank 0's store listens on MASTER_ADDR only (torch's env:// would
    # listen on '::', every interface: verl_ext.cpu_runtime.loopback_store)
    assert report["loopback_scheme"] is True
    assert report["store_listens_on"] == ["127.0.0.1"]


def test_not_selected_without_verl_platform_and_no_patches():
    report = probe(None)
    assert report["class"] != "CPUPlatform"
    assert report["patches"] == [] and report["init_process_group_patched"] is False
    assert report["loopback_scheme"] is True  # registered everywhere: only a DIST_INIT_METHOD naming it uses it
