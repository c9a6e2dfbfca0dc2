"""verl's import-time warnings about optional engines are hidden in the processes of a CPU run, and nothing else is."""

import os
import subprocess
import sys

from verl_ext.cpu.profile import cpu_environment
from verl_ext.verl_warnings import OPTIONAL_ENGINE_WARNINGS, python_warnings

CHILD = (
    "import warnings\n"
    "warnings.warn(\"torchtitan engine is not available: ModuleNotFoundError('torchtitan')\", stacklevel=1)\n"
    "warnings.warn('Transformer Engine and Apex are not installed. Falling back to Torch optimizers.')\n"
    "warnings.warn('APEX IS NOT INSTALLED. Falling back to Torch Norm')\n"
    "warnings.warn('a warning of the run itself')\n"
    "warnings.warn('torchtitan engine is not available', DeprecationWarning)\n"
)


def run_child(environment: dict) -> str:
    env = {**os.environ, **environment}
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True).stderr


def test_a_process_started_with_the_cpu_environment_hides_only_the_optional_engine_warnings(monkeypatch):
    """Python reads PYTHONWARNINGS as each process starts (a Ray worker inherits it): the listed messages of category
    UserWarning are hidden, any other warning is shown; the user's own entries are kept."""
    monkeypatch.setenv("PYTHONWARNINGS", "error::ResourceWarning")
    environment = cpu_environment()
    assert environment["PYTHONWARNINGS"].startswith("error::ResourceWarning,")
    shown = run_child(environment)
    assert "a warning of the run itself" in shown
    assert "DeprecationWarning: torchtitan engine is not available" in shown  # another category: shown
    assert "UserWarning: torchtitan" not in shown and "Apex" not in shown and "APEX" not in shown
    before = run_child({"PYTHONWARNINGS": ""})
    assert before.count("UserWarning") == 4


def test_the_value_keeps_the_users_entries_once_each():
    value = python_warnings("default,ignore::DeprecationWarning")
    entries = value.split(",")
    assert entries[:2] == ["default", "ignore::DeprecationWarning"]
    assert len(entries) == 2 + len(OPTIONAL_ENGINE_WARNINGS)
    assert python_warnings(value) == value  # sourcing the shell profile twice adds nothing
