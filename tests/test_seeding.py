"""Per-request sampling seeds: a function of what identifies the response, the same in every process."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from verl_ext.seeding import SEED_BITS, derive_seed, request_seed

REPO = Path(__file__).resolve().parents[1]
BASE = dict(run_seed=42, global_step=3, prompt_index=17, prompt_ids=[1, 2, 3], session=1, turn=0)


def test_every_field_of_the_response_changes_the_seed():
    seed = request_seed(**BASE)
    assert 0 <= seed < 2**SEED_BITS
    variants = [
        dict(BASE, run_seed=43),
        dict(BASE, global_step=4),
        dict(BASE, prompt_index=18),
        dict(BASE, prompt_ids=[1, 2, 4]),
        dict(BASE, session=2),
        dict(BASE, turn=1),
    ]
    seeds = {request_seed(**variant) for variant in variants}
    assert seed not in seeds and len(seeds) == len(variants)


def test_numpy_scalars_give_the_seed_of_the_plain_values():
    # verl's batch columns arrive as numpy scalars
    numpy_base = dict(BASE, global_step=np.int64(3), prompt_index=np.int64(17), prompt_ids=np.array([1, 2, 3]).tolist())
    assert request_seed(**numpy_base) == request_seed(**BASE)
    assert derive_seed("x", np.int32(5)) == derive_seed("x", 5)


def test_an_unencodable_part_is_an_error():
    with pytest.raises(TypeError, match="cannot derive a seed from a dict"):
        derive_seed({"a": 1})


def test_the_seed_is_the_same_in_another_process_with_another_hash_seed():
    """Not Python's hash() (salted per process): a Ray worker derives the seed the driver would."""
    code = "from verl_ext.seeding import request_seed; print(request_seed(42, 3, 17, [1, 2, 3], 1, 0))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True, text=True, check=True, cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO)},
        ).stdout.strip()
        for hash_seed in ("1", "2")
    }
    assert outputs == {str(request_seed(**BASE))}
