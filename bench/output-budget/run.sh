#!/usr/bin/env bash
# The tool-output budget's memory cost: peak RSS of `keel exec` (its own process, sampled)
# when one bash call prints 1 KiB, and when it prints 50 MiB, which keel streams to an
# artifact while the model gets head, tail and a receipt. Issue 11 allows 16 MiB more.
#
#   bench/output-budget/run.sh            # RUNS=5, MIB=50 by default
#   KEEL=/path/to/keel bench/output-budget/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keel/target}"
RUNS="${RUNS:-5}"
MIB="${MIB:-50}"
if [[ -z ${KEEL:-} ]]; then
  (cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli)
  KEEL="$CARGO_TARGET_DIR/release/keel"
fi
exec python3 "$ROOT/bench/output-budget/measure.py" "$KEEL" "$RUNS" "$MIB"
