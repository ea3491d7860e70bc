#!/usr/bin/env bash
# Rebuilds TestToken.json from TestToken.sol with the pinned WebAssembly solc from npm.
# Usage (from anywhere):  tests/chains/contracts/build.sh
set -euo pipefail
SOLC_VERSION=0.8.37
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
tools="$root/.tools"   # git-ignored; shared with the Makefile's anvil install

installed="$(node -p "try { require('$tools/node_modules/solc/package.json').version } catch (e) { '' }")"
if [ "$installed" != "$SOLC_VERSION" ]; then
  echo "Installing solc@$SOLC_VERSION into $tools"
  npm install --prefix "$tools" --save-exact --no-audit --no-fund "solc@$SOLC_VERSION" >/dev/null
fi

NODE_PATH="$tools/node_modules" node "$here/build.cjs" "$here/TestToken.sol" "$here/TestToken.json"
