#!/usr/bin/env bash
# Install headless Chromium (Debian package `chromium`) for the report's browser test
# (tests/test_plot.py::test_report_renders_in_chromium). Idempotent: does nothing when a
# chromium binary is already on PATH. Never fails the build: when apt-get is missing or not
# usable (no root, no network) it says why and exits 0 — the browser test then skips with
# that reason.
set -u

for binary in chromium chromium-browser; do
    if command -v "$binary" >/dev/null 2>&1; then
        echo "install_test_browser: $binary already installed ($(command -v "$binary"))"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_test_browser: apt-get not found; install Chromium yourself to run the browser test"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        echo "install_test_browser: not root and no password-less sudo; skipping the Chromium install"
        exit 0
    fi
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO apt-get update -qq >/dev/null 2>&1 || true
fi
if $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; then
    echo "install_test_browser: installed $(command -v chromium)"
else
    echo "install_test_browser: 'apt-get install chromium' failed; the browser test will be skipped"
fi
exit 0
