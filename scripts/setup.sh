#!/usr/bin/env bash
# Creates the project's virtual environment and installs everything genobird needs.
# Usage: scripts/setup.sh [VENV_DIR] [dev]   (default .venv; `dev` adds the dev extra:
# pytest, ruff, transformers)
#
# torch is installed first and on purpose: a bare "torch" requirement resolves to a
# multi-GB CUDA build on Linux. Without a GPU we ask for the exact CPU build
# (torch==X+cpu), which can only match a CPU wheel: from a local wheel folder when pip
# is configured with one, otherwise from PyTorch's CPU index.
set -euo pipefail

venv="${1:-.venv}"
extras="${2:-}"
torch_version="${GENOBIRD_TORCH_VERSION:-2.13.0}"
cpu_index="${GENOBIRD_TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"

say() { echo "[setup] $*"; }

# pip compiles every installed module to bytecode on one core (17 of torch's 26 s); it is
# done once at the end instead, on every core (compile_installed). Not compiling at all
# would cost each process its imports' compilation again where PYTHONDONTWRITEBYTECODE is
# set, as on CI machines.
pip_install() { "$venv/bin/pip" install -q --no-compile "$@"; }

compile_installed() {
    local site
    site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    # some packages ship files that do not compile (Python 2 test data): they stay source,
    # as pip leaves them, and the rest is compiled
    "$venv/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
}

ensure_bedtools() {
    command -v bedtools >/dev/null 2>&1 && return 0
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        say "installing Debian package bedtools (needed by pybedtools)"
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bedtools >/dev/null
    else
        echo "[setup] error: bedtools is not installed and this script cannot install it." >&2
        echo "[setup] Install it with your package manager (Debian/Ubuntu: sudo apt-get install bedtools;" >&2
        echo "[setup] conda: conda install -c bioconda bedtools), then run this again." >&2
        exit 1
    fi
}

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

ensure_torch() {
    if "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
        say "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') already installed"
        return 0
    fi
    if has_gpu; then
        say "GPU found: installing torch==$torch_version (CUDA build)"
        pip_install "torch==$torch_version"
    elif pip_install "torch==$torch_version+cpu" 2>/dev/null; then
        say "no GPU: installed torch==$torch_version+cpu from the configured package sources"
    else
        say "no GPU: installing torch==$torch_version+cpu from $cpu_index"
        pip_install "torch==$torch_version+cpu" --extra-index-url "$cpu_index"
    fi
}

ensure_bedtools
if [ ! -x "$venv/bin/python" ]; then
    say "creating virtual environment $venv"
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --upgrade pip >/dev/null
ensure_torch
if [ "$extras" = "dev" ]; then
    say "installing genobird (editable) with the dev extra"
    pip_install -e ".[dev]"
    compile_installed
    touch "$venv/.genobird-dev-installed"
else
    say "installing genobird (editable)"
    pip_install -e .
    compile_installed
fi
touch "$venv/.genobird-installed"
say "done: $("$venv/bin/genobird" --version)"
