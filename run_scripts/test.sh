#!/usr/bin/env bash
# The test suite: installs what it needs (run_scripts/lib/ensure_env.sh), then runs pytest.
# Extra arguments go to pytest, e.g. `bash run_scripts/test.sh -m "not e2e"` to skip the slow runs.
# Two test processes (pytest-xdist), a test file each at a time; the e2e runs go on in the background meanwhile
# (tests/conftest.py, docs/testing.md). `-n 0` after the command runs everything in one process.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source run_scripts/lib/ensure_env.sh
export HF_HUB_OFFLINE=1 WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
# one torch thread per process (unless yours says otherwise): the two test processes and the background runs' Ray
# workers (about ten per run) share this machine's cores, where torch's default -- a thread per core in each process,
# Ray's: as many as the worker's CPUs -- only adds contention
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
python -m verl_ext.cli doctor
python -m pytest -n 2 --dist loadfile "$@"
