#!/usr/bin/env bash
# The small-window run of issue 34: STEPS (120) steps of KIB (8) KiB of tool output in a
# WINDOW (32768)-token window, keel against KEEL_PREV (a previous build) when given, RUNS (3)
# times each, interleaved. Reports summaries, their tokens, archives, the largest request
# and wall time per run. Env: KEEL_BIN (default: this tree's release build), KEEL_PREV.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${RUNS:-3}; STEPS=${STEPS:-120}; KIB=${KIB:-8}; WINDOW=${WINDOW:-32768}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
if [[ -z ${KEEL_BIN:-} ]]; then
  (cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli -p keel-mockllm)
fi
KEEL=${KEEL_BIN:-$CARGO_TARGET_DIR/release/keel}
# The mock of this tree serves both builds: the script is the mock's, not keel's.
MOCK=$CARGO_TARGET_DIR/release/keel-mockllm
[[ -x $MOCK ]] || (cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-mockllm)
OUT=$(mktemp -d "${TMPDIR:-/tmp}/keel-small-window.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

python3 "$HERE/script.py" "$STEPS" "$WINDOW" > "$OUT/script.json"

run_one() { # NAME BINARY
  local name=$1 bin=$2 dir
  dir=$(mktemp -d "$OUT/run.XXXXXX")
  mkdir -p "$dir/home" "$dir/work"
  head -c $((KIB * 1024)) < <(for i in $(seq 0 2000); do echo "line $i of the part: fn item_$i() -> u32 { $i }"; done) > "$dir/work/part.txt"
  "$MOCK" --script "$OUT/script.json" --record "$dir/requests.jsonl" > "$dir/mock.out" 2>&1 &
  local mock=$! port=""
  for _ in $(seq 200); do
    port=$(grep -o '127\.0\.0\.1:[0-9]*' "$dir/mock.out" 2>/dev/null | cut -d: -f2 || true)
    [[ -n $port ]] && break
    sleep 0.01
  done
  cat > "$dir/home/config.yaml" <<YAML
model: small/m
providers:
  small:
    api: openai-completions
    base_url: http://127.0.0.1:$port/v1
    models:
      m: {context_window: $WINDOW, max_output: 8192}
YAML
  local start end code=0
  start=$(date +%s.%N)
  KEEL_HOME=$dir/home "$bin" exec --json --permission auto --max-steps $((STEPS + 50)) --cwd "$dir/work" \
    "Run the steps; never edit files under vendor/ and keep the flag ZETA-42." > "$dir/events.jsonl" 2> "$dir/stderr" || code=$?
  end=$(date +%s.%N)
  kill "$mock" 2>/dev/null || true
  python3 "$HERE/report.py" "$name" "$code" "$start" "$end" "$dir/events.jsonl" "$dir/requests.jsonl" "$WINDOW"
}

printf '%-10s %5s %9s %14s %8s %14s %9s\n' build exit summaries summary-tokens archives largest-request wall-s
for _ in $(seq "$RUNS"); do
  run_one keel "$KEEL"
  [[ -n ${KEEL_PREV:-} ]] && run_one prev "$KEEL_PREV"
done
