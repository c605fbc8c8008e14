#!/usr/bin/env bash
# exec's tail with a background task (issue 29): the parent starts a background `explore`
# task, answers, the task's end starts the turn that gives the final answer, and the run
# ends. Everything before the last answer is the same scripted work; what differs between
# builds is how fast the run sees the session at rest and exits. Interleaved runs of this
# build and KEEL_PREV (a previous keel binary) report the wall time of the whole run.
# Env: RUNS (20) KEEL_PREV (optional) KEEL_BIN (optional: this build's binary, copied
# beside KEEL_PREV) DELAY_MS (300: the task's answer time)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${RUNS:-20}; DELAY_MS=${DELAY_MS:-300}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
(cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli) || exit 1
# Both binaries should lie on the same file system: one run from the build folder and one
# from /tmp differ by about a millisecond on their own. KEEL_BIN names a copy to use.
KEEL=${KEEL_BIN:-$CARGO_TARGET_DIR/release/keel}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/keel-exec-tail.XXXXXX")
mkdir -p "$OUT/work" "$OUT/home"
cat >"$OUT/script.json" <<JSON
[
  {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"description": "map the parser",
    "prompt": "Find where the parser lives.", "agent": "explore", "background": true}}]},
  {"text": "The parser lives in src/parse.rs.", "first_delay_ms": $DELAY_MS},
  {"text": "The parser lives in src/parse.rs.", "first_delay_ms": $DELAY_MS},
  {"text": "Done: the task found src/parse.rs."}
]
JSON
# Each build must end with the final answer, or the comparison means nothing.
for bin in "$KEEL" ${KEEL_PREV:+"$KEEL_PREV"}; do
  got=$(env HOME="$OUT/home" KEEL_SESSIONS_DB="$OUT/check.db" "$bin" exec --cwd "$OUT/work" \
    --mock-script "$OUT/script.json" --permission auto go 2>/dev/null)
  [[ $got == "Done: the task found src/parse.rs." ]] || { echo "$bin answered: $got" >&2; exit 1; }
  rm -f "$OUT/check.db"*
done
# Interleaved: one run of each build in turn, so load on the machine falls on both alike.
# The order flips every round: the first run of a pair is about 0.5-1 ms slower whichever
# binary it is (an A/A run of one binary in both places showed it).
bins=("$KEEL" ${KEEL_PREV:+"$KEEL_PREV"})
names=(keel ${KEEL_PREV:+keel-prev})
for ((i = 0; i < RUNS; i++)); do
  order=("${!bins[@]}")
  if ((i % 2 == 1)) && ((${#bins[@]} == 2)); then order=(1 0); fi
  for j in "${order[@]}"; do
    start=$(date +%s%N)
    env HOME="$OUT/home" KEEL_SESSIONS_DB="$OUT/${names[$j]}.db" "${bins[$j]}" exec --cwd "$OUT/work" \
      --mock-script "$OUT/script.json" --permission auto go >/dev/null 2>&1
    echo "${names[$j]} $((($(date +%s%N) - start) / 1000))" >>"$OUT/times"
  done
done
python3 - "$OUT/times" "$DELAY_MS" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, us = line.split()
    runs.setdefault(name, []).append(int(us) / 1000)
print(f"| build | runs | median ms | mean ms | min ms | max ms | median past the {sys.argv[2]} ms of scripted delay |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name, ms in runs.items():
    med = statistics.median(ms)
    print(f"| {name} | {len(ms)} | {med:.1f} | {statistics.mean(ms):.1f} | {min(ms):.1f} | {max(ms):.1f} | {med - int(sys.argv[2]):.1f} |")
PY
