"""Every command line of verl-ext refuses a bad argument before torch, verl or Ray is imported: each ``verl-ext``
subcommand, ``python -m verl_ext.lab`` / ``.preflight`` / ``.experiments`` / ``.cpu.quickstart`` / ``.gpu.smoke``
/ ``.tiny.assets`` and each ``python -m data_prep.<dataset>``. A refusal that came after ``import torch`` took
3-13 s on a busy machine (``verl-ext quickstart --steps 0`` did, through the ``verl_ext.cpu`` package's eager
import of the CPU platform); one that comes while the arguments are parsed takes a fraction of a second.

Each entry point runs as ``python -m`` would run it (``runpy``, ``alter_sys``), in its own process (a module one
command imported would hide the next one's), all processes at once; the probe reports the exit status and which
heavy packages ``sys.modules`` holds after the refusal. (The launcher's environment variables:
``tests/adversarial/test_launcher_variables.py``.)
"""

import json
import os
import subprocess
import sys

import pytest

from tests.run_scripts.scripts import REPO

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

HEAVY = ("torch", "verl", "ray", "transformers", "vllm", "matplotlib", "pandas", "pyarrow", "datasets")

# entry point -> (module run with python -m, its bad arguments, what its error names)
ENTRY_POINTS = {
    "verl-ext schedule": ("verl_ext.cli", ["schedule", "--steps", "-1"], "argument --steps: expected an integer >= 0"),
    "verl-ext lab": ("verl_ext.cli", ["lab", "--lr", "-1"], "argument --lr: expected a number > 0"),
    "verl-ext quickstart": ("verl_ext.cli", ["quickstart", "--steps", "0"], "--steps must be >= 1, got 0"),
    "verl-ext gpu-smoke": ("verl_ext.cli", ["gpu-smoke", "--steps", "0"], "argument --steps: expected an integer in 1..1000"),
    "verl-ext quickstart --algorithm": ("verl_ext.cli", ["quickstart", "--algorithm", "rec_onesided"],
                                        "argument --algorithm: unknown algorithm 'rec_onesided'; allowed: rec_reinforce"),
    "verl-ext gpu-smoke --algorithm": ("verl_ext.cli", ["gpu-smoke", "--algorithm", "rec_reinforce@0.6_2"],
                                       "'rec_reinforce' has no clipping range"),
    "verl-ext plot": ("verl_ext.cli", ["plot", "x.jsonl", "--window", "zero"], "argument --window"),
    "verl-ext tiny-assets": ("verl_ext.cli", ["tiny-assets", "--seed", "x"], "argument --seed"),
    "verl-ext doctor": ("verl_ext.cli", ["doctor", "--bogus"], "unrecognized arguments: --bogus"),
    "verl-ext list": ("verl_ext.cli", ["list", "--bogus"], "unrecognized arguments: --bogus"),
    "verl-ext run": ("verl_ext.cli", ["run", "gsm8k", "grpo", "sync_interval_0"],
                     "sync_interval=0 is invalid: allowed values are an integer >= 1"),
    "verl-ext sweep": ("verl_ext.cli", ["sweep", "gsm8k", "--algorithms", "grpo", "--settings", "mixed,mixed"],
                       "sync_interval_16_offset_8 given twice"),
    "verl-ext figure": ("verl_ext.cli", ["figure", "no-such-figure"], "unknown figure 'no-such-figure'"),
    "python -m verl_ext.lab": ("verl_ext.lab", ["--settings", "offline", "--sync-offset", "2"],
                               "--settings names the settings"),
    "python -m verl_ext.preflight": ("verl_ext.preflight", ["--name", "x"], "nothing to check"),
    "python -m verl_ext.experiments": ("verl_ext.experiments", ["run", "gsm8k", "grpo", "sync_intervall_3"],
                                       "unknown setting 'sync_intervall_3'"),
    "python -m verl_ext.cpu.quickstart": ("verl_ext.cpu.quickstart", ["--steps", "-2"], "--steps must be >= 1"),
    "python -m verl_ext.gpu.smoke": ("verl_ext.gpu.smoke", ["--sync-offset", "-1"], "argument --sync-offset"),
    "python -m verl_ext.tiny.assets": ("verl_ext.tiny.assets", ["--size", "huge"], "argument --size"),
    "python -m data_prep.gsm8k": ("data_prep.gsm8k", ["--local_save_dir="], "expected a path, got an empty value"),
    "python -m data_prep.math": ("data_prep.math", ["--local_save_dir="], "expected a path, got an empty value"),
    "python -m data_prep.guru": ("data_prep.guru", ["--local_save_dir="], "expected a path, got an empty value"),
    "python -m data_prep.toolace": ("data_prep.toolace", ["--test_size", "0"], "expected an integer >= 1, got 0"),
    "python -m data_prep.manifest": ("data_prep.manifest", [], "the following arguments are required"),
}

PROBE = """
import json, runpy, sys

module, heavy, argv = sys.argv[1], sys.argv[2].split(","), sys.argv[3:]
sys.argv = [module, *argv]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    status = 0
except SystemExit as exit_:
    status = exit_.code
print(json.dumps({"status": status, "heavy": sorted({name.split(".")[0] for name in sys.modules} & set(heavy))}))
"""


@pytest.fixture(scope="module")
def refusals(tmp_path_factory):
    """Each entry point's (exit status, heavy packages imported, stderr), from processes run side by side."""
    folder = tmp_path_factory.mktemp("entry_points")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("VERL_EXT_", "VERL_FILE_LOGGER"))}
    env.update(OUTPUT_DIR=str(folder / "outputs"), DATA_DIR=str(folder / "data"), PYTHONPATH=str(REPO))
    processes = {
        name: subprocess.Popen([sys.executable, "-c", PROBE, module, ",".join(HEAVY), *argv], env=env, cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (module, argv, _) in ENTRY_POINTS.items()
    }
    results = {}
    for name, process in processes.items():
        out, err = process.communicate(timeout=300)
        report = json.loads(out.strip().splitlines()[-1])
        results[name] = (report["status"], report["heavy"], err)
    return results


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
def test_a_bad_argument_is_refused_before_torch_or_verl_is_imported(refusals, entry_point):
    status, heavy, err = refusals[entry_point]
    assert status == 2, (status, err[-2000:])
    assert ENTRY_POINTS[entry_point][2] in err and "Traceback" not in err, err[-2000:]
    assert heavy == [], f"{entry_point} imported {heavy} before refusing its argument"
