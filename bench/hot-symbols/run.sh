#!/usr/bin/env bash
# Regenerates crates/keel-cli/link/hot-symbols.txt, the order in which the linker places the
# functions a headless run executes (see README.md beside this script).
# Env: STEPS (150, perf runs) VG_STEPS (15, valgrind runs) RUNS (3 perf runs per sandbox mode)
#      OUT (crates/keel-cli/link/hot-symbols.txt)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
STEPS=${STEPS:-150}; VG_STEPS=${VG_STEPS:-15}; RUNS=${RUNS:-3}
OUT=${OUT:-$ROOT/crates/keel-cli/link/hot-symbols.txt}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/keel-hot.XXXXXX")
log() { echo "[hot-symbols] $*" >&2; }

log "building keel (release) in $CARGO_TARGET_DIR"
(cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release --locked -q -p keel-cli -p keel-mockllm)
# A copy, so the profiles name one file that no later build replaces.
KEEL=$WORK/keel
cp "$CARGO_TARGET_DIR/release/keel" "$KEEL"
MOCK=$CARGO_TARGET_DIR/release/keel-mockllm
# shellcheck source=../long-run/mock.sh
. "$HERE/../long-run/mock.sh"

have_perf=0; have_valgrind=0
if command -v perf >/dev/null && perf record -q -e cycles:u -o "$WORK/probe.data" -- true >/dev/null 2>&1; then have_perf=1; fi
command -v valgrind >/dev/null && have_valgrind=1
if [[ $have_perf == 0 && $have_valgrind == 0 ]]; then
  log "needs perf (allowed to sample user space) or valgrind; neither works here"; exit 1
fi

# run NAME SANDBOX FORMAT STEPS PREFIX... : one `keel exec` of the long-run workload
run() {
  local name=$1 sandbox=$2 format=$3 steps=$4; shift 4
  local d=$WORK/$name; mkdir -p "$d/work" "$d/home"
  start_mock "$d" "steps=$steps,kib=4,chunk=64" || { log "the mock did not start"; exit 1; }
  local mpid=$MOCK_PID
  keel_config "$d/home" "$MOCK_PORT"
  (cd "$d/work" && KEEL_HOME="$d/home" "$@" "$KEEL" exec --permission full --sandbox "$sandbox" \
     --output-format "$format" "Run the long workload." >"$d/stdout" 2>"$d/stderr") || true
  kill "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null || true
  grep -qF "All $steps steps are done." "$d/stdout" || { log "$name did not finish (see $d)"; exit 1; }
}

if [[ $have_valgrind == 1 ]]; then
  # Exact: every function that ran. The profile is cut where the first turn gives start-up's
  # pages back, so start-up and turn come apart. The sandbox cannot start under valgrind
  # (it does not know Landlock's calls), so its path comes from perf below.
  for sandbox in workspace-write danger-full-access; do
    for format in stream-json text; do
      log "valgrind: $sandbox, $format"
      run "vg-$sandbox-$format" "$sandbox" "$format" "$VG_STEPS" valgrind -q --tool=callgrind --demangle=no --compress-strings=no --compress-pos=no \
        --callgrind-out-file="$WORK/vg.$sandbox.$format.%p" \
        --dump-before='_ZN12keel_sandbox5pages19release_clean_pages*'
      # keel's own profile is the one cut in two; the others are its forks before an exec.
      part=$(ls "$WORK"/vg."$sandbox.$format".*.1 2>/dev/null | head -n1)
      [[ -n $part ]] || { log "no start-up part: is keel_sandbox::pages::release_clean_pages still called at the first turn?"; exit 1; }
      mv "$part" "$WORK/cg.$sandbox.$format.1"; mv "${part%.1}" "$WORK/cg.$sandbox.$format"
    done
  done
fi
if [[ $have_perf == 1 ]]; then
  # Sampled: the sandboxed path (keel's side and the spawner), and what valgrind cannot run.
  for i in $(seq "$RUNS"); do
    for sandbox in workspace-write danger-full-access; do
      log "perf: $sandbox, run $i"
      run "perf-$sandbox-$i" "$sandbox" stream-json "$STEPS" perf record -q -F 20000 -e cycles:u -o "$WORK/perf.$sandbox.$i.data" --
      perf script -i "$WORK/perf.$sandbox.$i.data" --no-demangle -F comm,pid,time,ip,sym,dso 2>/dev/null >"$WORK/perf.$sandbox.$i.txt"
    done
  done
fi

nm --defined-only "$KEEL" >"$WORK/nm.txt"
python3 "$HERE/order.py" "$KEEL" "$WORK" >"$OUT"
log "$(wc -l <"$OUT") functions written to $OUT (profiles in $WORK)"
