#!/usr/bin/env bash
# Install Debian's chromium for the browser test of the HTML report, once.
#
# Idempotent: quiet when a chromium binary is already on PATH (or $ROSETTA_CHROMIUM is set).
# Never fails the caller: where it cannot install (not root, no apt-get, no network) it prints one
# line and exits 0, and the browser test skips with its reason.
set -uo pipefail
if [ -n "${ROSETTA_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 \
    || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_chromium: no apt-get here; the browser test of the report will be skipped" >&2
    exit 0
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        sudo=(sudo -n)
    else
        echo "install_chromium: not root; the browser test of the report will be skipped" >&2
        exit 0
    fi
fi
echo "install_chromium: installing Debian's chromium for the report's browser test (once)" >&2
log=$(mktemp)
if ! { "${sudo[@]}" apt-get update -q && \
       DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
           chromium; } >"$log" 2>&1; then
    echo "install_chromium: apt-get could not install chromium ($(tail -n 1 "$log")); the browser test will be skipped" >&2
fi
rm -f "$log"
exit 0
