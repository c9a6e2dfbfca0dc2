"""A FIFO, a device or a link to an endless file as a config the driver reads (issue 41): the multi-turn tool config,
the agent-loop config, the function tool file, a peft adapter's ``adapter_config.json``, the local model's
``config.json`` (read for LoRA's target modules).
Each is refused before it is read (a regular file of bounded size, :func:`verl_ext.files.open_regular`), naming the
key and the file -- never a hang (a FIFO blocked the driver before Ray) or a read until memory runs out (a link to
``/dev/zero``).

Each case runs the driver's check in a fresh process with a timeout and a memory limit, so that a regression fails the
test instead of hanging or exhausting the suite."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.run_scripts.scripts import REPO

# its child processes (a fresh interpreter importing verl or torch) may take minutes on a loaded machine: the
# per-test limit stays above their own time-outs, so a slow child fails with its own message, a hang still here
pytestmark = pytest.mark.timeout(600)

ROLLOUT = "actor_rollout_ref.rollout"
KEYS = {
    "tool config": (f"{ROLLOUT}.multi_turn.tool_config_path", "tools.yaml"),
    "agent-loop config": (f"{ROLLOUT}.agent.agent_loop_config_path", "loops.yaml"),
    "function tool file": (f"{ROLLOUT}.multi_turn.function_tool_path", "tools.py"),
    "adapter config": ("actor_rollout_ref.model.lora_adapter_path", "adapter"),
    "model config": ("actor_rollout_ref.model.path", "model"),  # read for LoRA's target modules
}
KINDS = {
    "FIFO": ("a FIFO, not a regular file", lambda path: os.mkfifo(path)),
    "link to /dev/zero": ("a character device, not a regular file", lambda path: os.symlink("/dev/zero", path)),
    "sparse 64 MiB file": ("more than the", lambda path: open(path, "wb").truncate(64 * 1024 * 1024)),
}

# the child checks every case in turn (one verl import for all), printing one JSON line per case
CHECK = textwrap.dedent("""
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))
    from tests.recipe_config import compose_recipe
    from verl_ext.driver_checks import check_run_config
    from verl_ext.config_values import ConfigError
    from verl_ext.runs.compose import memoised_config_files
    with memoised_config_files():  # verl's config files parsed once for all the cases
        for case, overrides in json.loads(sys.argv[1]).items():
            try:
                check_run_config(compose_recipe(*overrides))
                outcome = "PASSED"
            except ConfigError as error:
                outcome = "REFUSED " + str(error)
            print(json.dumps({"case": case, "outcome": outcome}), flush=True)
""")


def case_name(what, kind):
    return f"{what}, {kind}"


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """{case: (the file named, the child's outcome)} for every (what, kind), from one child process."""
    import json

    root = tmp_path_factory.mktemp("config_kinds")
    cases, named = {}, {}
    for what, (key, name) in KEYS.items():
        for kind, (_, make) in KINDS.items():
            folder = root / f"{len(cases)}"
            folder.mkdir()
            target = folder / name
            overrides = ["actor_rollout_ref.rollout.name=cpu", "actor_rollout_ref.rollout.tensor_model_parallel_size=1"]
            if what in ("adapter config", "model config"):
                target.mkdir()
                inner = target / ("adapter_config.json" if what == "adapter config" else "config.json")
                make(inner)
                overrides += ["actor_rollout_ref.model.lora_rank=4", f"{key}={target}"]
                named[case_name(what, kind)] = inner
            else:
                make(target)
                overrides += [f"{key}={target}"]
                named[case_name(what, kind)] = target
            cases[case_name(what, kind)] = overrides
    child = subprocess.run([sys.executable, "-c", CHECK, json.dumps(cases)], cwd=REPO, capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    assert child.returncode == 0 and len(lines) == len(cases), child.stdout[-2000:] + child.stderr[-3000:]
    return {line["case"]: (named[line["case"]], line["outcome"]) for line in lines}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("what", sorted(KEYS))
def test_a_config_file_that_is_no_regular_file_is_refused_before_reading(outcomes, what, kind):
    named, outcome = outcomes[case_name(what, kind)]
    key = KEYS[what][0]
    assert outcome.startswith("REFUSED"), outcome
    assert f"{key}=" in outcome and str(named) in outcome and KINDS[kind][0] in outcome, outcome


def test_the_one_reader_refuses_by_kind_and_size(tmp_path):
    """files.read_json_file / read_yaml_file: the reader every config, adapter and summary goes through."""
    from verl_ext.files import read_json_file, read_yaml_file

    class Refused(Exception):
        pass

    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(Refused, match="a FIFO, not a regular file: not the summary"):
        read_json_file(tmp_path / "fifo.json", 1024, "summary", Refused)
    (tmp_path / "big.yaml").write_text("a: " + "x" * 2000)
    with pytest.raises(Refused, match="2003 bytes, more than the 1024 a tool config may have"):
        read_yaml_file(tmp_path / "big.yaml", 1024, "tool config", Refused)
    (tmp_path / "bad.yaml").write_text("a: [1,\n")
    with pytest.raises(Refused, match="bad.yaml: not readable YAML"):
        read_yaml_file(tmp_path / "bad.yaml", 1024, "tool config", Refused)
    (tmp_path / "good.yaml").write_text("tools:\n  - name: x\n")
    assert read_yaml_file(tmp_path / "good.yaml", 1024, "tool config", Refused) == {"tools": [{"name": "x"}]}
    (tmp_path / "good.json").write_text('{"r": 8}')
    assert read_json_file(tmp_path / "good.json", 1024, "adapter config", Refused) == {"r": 8}
