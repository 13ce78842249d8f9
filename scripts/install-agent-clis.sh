#!/usr/bin/env bash
# Install the pinned agent CLIs the tests drive (tests/agents/): node and npm when missing, then
# GitHub Copilot CLI into .cache/agent-clis/copilot (git-ignored). Prints the `copilot` binary's
# path on stdout (for OMP_TEST_COPILOT), everything else on stderr. Exits non-zero when it cannot
# install; the tests then skip and say "Copilot CLI could not be installed".
set -uo pipefail
cd "$(dirname "$0")/.."
COPILOT_VERSION=1.0.102  # keep in step with tests/agents/copilot.py
dir=.cache/agent-clis/copilot
bin="$PWD/$dir/node_modules/.bin/copilot"

if ! command -v npm >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  { $sudo apt-get update && $sudo apt-get install -y nodejs npm; } >&2 || {
    echo "install-agent-clis: could not install node and npm" >&2; exit 1; }
fi
if ! "$bin" --version 2>/dev/null | grep -qF "$COPILOT_VERSION"; then
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund "@github/copilot@$COPILOT_VERSION" >&2 || {
    echo "install-agent-clis: npm could not install @github/copilot@$COPILOT_VERSION" >&2; exit 1; }
fi
"$bin" --version >&2 || { echo "install-agent-clis: $bin does not run" >&2; exit 1; }
echo "$bin"
