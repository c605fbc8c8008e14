#!/usr/bin/env bash
# MCP start-up benchmark (issue 15): `keel exec` for a one-answer turn with 0, 1 and 10
# configured stdio servers (the in-repo test server `keel-mcptest`), and with 10 servers of
# which one starts slowly. Reports the median wall time of RUNS runs per case.
# Env: RUNS (15) SLOW_MS (2000) KEEL (a keel binary; default: build release)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${RUNS:-15}
SLOW_MS=${SLOW_MS:-2000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
if [[ -z ${KEEL:-} ]]; then
  (cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli -p keel-mcptest)
  KEEL=$CARGO_TARGET_DIR/release/keel
fi
SERVER=$(dirname "$KEEL")/keel-mcptest
[[ -x $SERVER ]] || { echo "no keel-mcptest beside $KEEL" >&2; exit 1; }
OUT=$(mktemp -d "${TMPDIR:-/tmp}/keel-mcp-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/work/.git"
echo '[{"text": "ok"}]' > "$OUT/script.json"

median_ms() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

run_case() { # name, count, slow
  local name=$1 count=$2 slow=$3 home="$OUT/home-$1" i t0 t1
  mkdir -p "$home"
  if ((count == 0)); then : > "$home/config.yaml"; else
    {
      echo "mcp_servers:"
      for ((i = 0; i < count; i++)); do
        echo "  s$i:"
        echo "    command: $SERVER"
        if ((i < slow)); then echo "    args: ['--slow-start', '$SLOW_MS']"; fi
      done
    } > "$home/config.yaml"
  fi
  local times=()
  for ((i = 0; i < RUNS; i++)); do
    t0=$(date +%s%N)
    KEEL_HOME=$home KEEL_SESSIONS_DB=$home/sessions.db "$KEEL" exec --cwd "$OUT/work" \
      --mock-script "$OUT/script.json" "hi" > /dev/null 2> "$home/stderr"
    t1=$(date +%s%N)
    times+=($(((t1 - t0) / 1000000)))
  done
  printf '%-28s %6s ms (median of %d)\n' "$name" "$(printf '%s\n' "${times[@]}" | median_ms)" "$RUNS"
}

echo "keel: $KEEL"
run_case "0 servers" 0 0
run_case "1 server" 1 0
run_case "10 servers" 10 0
run_case "10 servers, 1 slow (${SLOW_MS} ms)" 10 1
