#!/usr/bin/env bash
# Install the pinned agent CLIs the tests drive (tests/agents/): node and npm when missing, then
# GitHub Copilot CLI, OpenAI Codex CLI, Google Gemini CLI, Claude Code and pi into
# .cache/agent-clis/<program> (git-ignored).
# Prints `export OMP_TEST_<PROGRAM>=<binary>` for each CLI that runs (for eval), everything else
# on stderr. A CLI that cannot be installed is left out; its tests then skip and say why.
set -uo pipefail
cd "$(dirname "$0")/.."
# Keep in step with tests/agents/clis.py (CLIS). pi prints its version on stderr.
CLIS="copilot:@github/copilot:1.0.102 codex:@openai/codex:0.171.0 gemini:@google/gemini-cli:0.61.0
claude:@anthropic-ai/claude-code:2.1.328 pi:@mariozechner/pi-coding-agent:0.73.1"
# Claude Code must never update itself into the system's global npm prefix (it did, in a test).
export DISABLE_AUTOUPDATER=1

if ! command -v npm >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  { $sudo apt-get update && $sudo apt-get install -y nodejs npm; } >&2 || {
    echo "install-agent-clis: could not install node and npm" >&2; exit 1; }
fi
for spec in $CLIS; do
  IFS=: read -r prog pkg version <<<"$spec"
  dir=".cache/agent-clis/$prog"
  bin="$PWD/$dir/node_modules/.bin/$prog"
  if ! "$bin" --version 2>&1 | grep -qF "$version"; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund "$pkg@$version" >&2 ||
      echo "install-agent-clis: npm could not install $pkg@$version" >&2
  fi
  if "$bin" --version 2>&1 | grep -qF "$version"; then
    echo "install-agent-clis: $prog $version at $bin" >&2
    echo "export OMP_TEST_${prog^^}=$bin"
  fi
done
