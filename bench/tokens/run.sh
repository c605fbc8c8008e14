#!/usr/bin/env bash
# Calibrates keel's token estimate against o200k: bench/tokens/run.sh [FILE…]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target-tokens}
cd "$HERE" && flock /tmp/keel-cargo.lock cargo run --release -q -- "$@"
