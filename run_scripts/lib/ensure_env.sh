#!/usr/bin/env bash
# Source this file: it makes sure a Python environment with verl-ext and its CPU test extras exists and
# puts its bin/ first on PATH. Used by run_scripts/test.sh (the test suite) and run_scripts/cpu/quickstart.sh.
#
# Which environment: $VERL_EXT_VENV if set, else the active virtualenv ($VIRTUAL_ENV), else <repo>/.venv
# (created with python3, which must be 3.10-3.12). The install (-e ".[test]") is skipped when setup.py has not
# changed since the last one in that environment. It is made by uv (`uv pip install`: parallel downloads and
# unpacking, about a fifth of pip's time for torch's several GB); where uv fails (it reads no pip.conf: a private
# index set only there), by pip, which then says so.

_verl_ext_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_verl_ext_venv="${VERL_EXT_VENV:-${VIRTUAL_ENV:-$_verl_ext_repo/.venv}}"

if [ ! -x "$_verl_ext_venv/bin/python" ]; then
  echo "[verl-ext] creating a virtual environment in $_verl_ext_venv"
  python3 -m venv "$_verl_ext_venv" || { echo "[verl-ext] python3 -m venv failed: install python3-venv (Python 3.10-3.12)" >&2; return 1; }
fi
export PATH="$_verl_ext_venv/bin:$PATH"
export VIRTUAL_ENV="$_verl_ext_venv"

_verl_ext_stamp="$_verl_ext_venv/.verl-ext-install-stamp"
_verl_ext_wanted="$(sha256sum "$_verl_ext_repo/setup.py" | cut -d' ' -f1) $_verl_ext_repo"
if [ "$(cat "$_verl_ext_stamp" 2>/dev/null)" != "$_verl_ext_wanted" ]; then
  echo "[verl-ext] installing verl-ext with its CPU extras (verl[cpu]==0.9.1, torch, ...): about a minute the first time"
  if ! { python -m pip install --quiet "uv>=0.5" && python -m uv pip install --quiet --compile-bytecode --python "$_verl_ext_venv/bin/python" -e "$_verl_ext_repo[test]"; }; then
    echo "[verl-ext] uv could not install it; installing with pip instead" >&2
    python -m pip install --upgrade --quiet pip || return 1
    python -m pip install --progress-bar off -e "$_verl_ext_repo[test]" || { echo "[verl-ext] pip install failed" >&2; return 1; }
  fi
  echo "$_verl_ext_wanted" > "$_verl_ext_stamp"
fi
unset _verl_ext_stamp _verl_ext_wanted
