#!/usr/bin/env bash
# Create the virtual environment (.venv) and install rosetta into it, once.
#
#   scripts/bootstrap.sh [EXTRAS]      default EXTRAS: all,dev
#
# Pins come from constraints/cpu.txt (the CPU reference machine). On a GPU machine set
# ROSETTA_CONSTRAINTS=none (or a constraints file of your own) and let pip resolve the ranges
# of pyproject.toml. Chainer builds from source and imports pkg_resources, so setuptools<81 and
# wheel go in first and the rest is installed with --no-build-isolation.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-all,dev}"
venv="${ROSETTA_VENV:-.venv}"
python="${PYTHON:-python3}"
constraints="${ROSETTA_CONSTRAINTS:-constraints/cpu.txt}"
cflag=()
[ "$constraints" != "none" ] && cflag=(-c "$constraints")

key=$(cat pyproject.toml "${cflag[@]:1}" 2>/dev/null | sha256sum | cut -c1-16)
stamp="$venv/.rosetta-$extras-$key"
if [ -f "$stamp" ] && [ -x "$venv/bin/rosetta" ]; then
    exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
    echo "bootstrap: creating $venv with $($python --version 2>&1)" >&2
    "$python" -m venv "$venv"
fi
log=$(mktemp)
pip_install() {
    # this machine's pip config names local index folders that may not exist: drop that noise
    if ! "$venv/bin/python" -m pip --disable-pip-version-check install -q "${cflag[@]}" "$@" >"$log" 2>&1; then
        grep -v "is ignored: it is neither a file nor a directory" "$log" >&2 || true
        echo "bootstrap: pip install failed (see above)" >&2
        exit 1
    fi
    grep -v "is ignored: it is neither a file nor a directory" "$log" >&2 || true
}
echo "bootstrap: installing rosetta[$extras] into $venv (first time: a few minutes)" >&2
pip_install "setuptools<81" wheel
pip_install --no-build-isolation -e ".[$extras]"
rm -f "$log"
rm -f "$venv"/.rosetta-*
touch "$stamp"
