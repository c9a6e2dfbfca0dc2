"""verl loads verl-ext's plugin on the first ``import verl``, whichever module makes it. When that first import
comes from inside verl-ext (``verl_ext.algorithms.loss_config`` imports ``verl.workers.config``), the plugin must still load
completely: verl swallows a plugin's import error, and the run would fail later with "Unknown trainer"."""

import subprocess
import sys

import pytest

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

CODE = """
import verl_ext.algorithms.loss_config  # its own import of verl loads the plugin while verl_ext.algorithms.loss_config is half-initialised
from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY
from verl.trainer.ppo.v1.trainer_base import get_trainer_cls
from verl_ext.algorithms.registry import POLICY_LOSSES
get_trainer_cls("delayed_sync")
missing = sorted(set(POLICY_LOSSES) - set(POLICY_LOSS_REGISTRY))
assert not missing, missing
print("plugin loaded")
"""


def test_a_first_import_of_verl_from_verl_ext_config_still_loads_the_whole_plugin():
    result = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "plugin loaded" in result.stdout
