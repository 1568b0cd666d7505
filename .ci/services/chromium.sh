#!/usr/bin/env bash
# Headless Chromium and its WebDriver, for the trace viewer's browser test
# (tests/trace_viewer/test_browser.py). Debian's packages, installed only when missing.
#   chromium.sh start DIR   install if missing (nothing to start: the tests launch it)
#   chromium.sh stop DIR    nothing to stop
set -euo pipefail

if [ "${1:-start}" = "stop" ]; then
    exit 0
fi
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
    exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "chromium: missing, and apt-get as root is not available to install it" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
echo "chromium: installed $(/usr/bin/chromium --version 2>/dev/null)"
