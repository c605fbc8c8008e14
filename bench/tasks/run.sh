#!/usr/bin/env bash
# Background-task benchmark (issue 16): eight `worker` tasks in one `keel exec` process, each
# running the long-run workload against its own mock model, against eight separate `keel exec`
# processes running the same workload side by side, and one session alone (the RSS baseline).
# Each case reports wall time (start to the last exit), keel's own peak RSS (the largest single
# process, from wait4) and the process tree's peak RSS (keel plus its shell children).
# Env: RUNS (3) STEPS (100) KIB (4) TASKS (8)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${RUNS:-3}; STEPS=${STEPS:-100}; KIB=${KIB:-4}; TASKS=${TASKS:-8}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
(cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli -p keel-mockllm) || exit 1
KEEL=$CARGO_TARGET_DIR/release/keel
MOCK=$CARGO_TARGET_DIR/release/keel-mockllm
MEASURE=$ROOT/bench/long-run/measure.py
OUT=$(mktemp -d "${TMPDIR:-/tmp}/keel-tasks-bench.XXXXXX")
log() { echo "[bench] $*" >&2; }

# start_mock DIR ARGS... : prints the port; the pid goes to DIR/mock.pid
start_mock() {
  local d=$1; shift
  mkdir -p "$d"
  "$MOCK" "$@" --timings "$d/timings.jsonl" >"$d/mock.out" 2>&1 &
  echo $! >"$d/mock.pid"
  local port=""
  for _ in $(seq 300); do port=$(grep -o '127\.0\.0\.1:[0-9]*' "$d/mock.out" 2>/dev/null | cut -d: -f2); [[ -n $port ]] && break; sleep 0.01; done
  [[ -n $port ]] || { log "mock in $d did not start"; return 1; }
  echo "$port"
}
stop_mocks() { for f in "$1"/*/mock.pid; do kill "$(cat "$f")" 2>/dev/null; done; wait 2>/dev/null; }

provider() { # NAME PORT
  printf '  %s:\n    api: openai-completions\n    base_url: http://127.0.0.1:%s/v1\n    models:\n      mock-model: {context_window: 1000000, max_output: 16384}\n' "$1" "$2"
}

# One session alone, or one of the separate processes: KEEL_HOME with one provider.
exec_one() { # DIR PORT  (runs in the background when called with &)
  local d=$1 port=$2
  mkdir -p "$d/home" "$d/work"
  { echo "model: mock/mock-model"; echo "providers:"; provider mock "$port"; } >"$d/home/config.yaml"
  (cd "$d/work" && python3 "$MEASURE" "$d/mock/timings.jsonl" $((STEPS + 1)) "$d/result.json" -- \
     env KEEL_HOME="$d/home" "$KEEL" exec --permission full --sandbox danger-full-access \
     --output-format json "Run the long workload." >"$d/stdout" 2>"$d/stderr")
}

single() { # I
  local d=$OUT/single.$1 port
  port=$(start_mock "$d/mock" --workload "steps=$STEPS,kib=$KIB") || return 1
  exec_one "$d" "$port"
  stop_mocks "$d"
}

separate() { # I
  local d=$OUT/separate.$1 k t0 t1
  local ports=()
  for k in $(seq "$TASKS"); do ports+=("$(start_mock "$d/p$k/mock" --workload "steps=$STEPS,kib=$KIB")") || return 1; done
  t0=$(date +%s%N)
  for k in $(seq "$TASKS"); do exec_one "$d/p$k" "${ports[$((k - 1))]}" & done
  wait
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000)) >"$d/wall_ms"
  for k in $(seq "$TASKS"); do kill "$(cat "$d/p$k/mock/mock.pid")" 2>/dev/null; done
}

tasks() { # I
  local d=$OUT/tasks.$1 k
  mkdir -p "$d/home" "$d/work"
  {
    echo "model: parent/mock-model"
    echo "tasks: {max_concurrent: $TASKS}"
    echo "providers:"
  } >"$d/home/config.yaml"
  local calls=""
  for k in $(seq "$TASKS"); do
    local port
    port=$(start_mock "$d/m$k" --workload "steps=$STEPS,kib=$KIB") || return 1
    provider "m$k" "$port" >>"$d/home/config.yaml"
    calls+="{\"name\": \"task\", \"arguments\": {\"description\": \"workload $k\", \"prompt\": \"Run the long workload.\", \"agent\": \"worker\", \"model\": \"m$k/mock-model\"}},"
  done
  printf '{"responses": [{"tool_calls": [%s]}, {"text": "All %s tasks are done."}]}\n' "${calls%,}" "$TASKS" >"$d/parent.json"
  local pport
  pport=$(start_mock "$d/parent" --script "$d/parent.json") || return 1
  provider parent "$pport" >>"$d/home/config.yaml"
  (cd "$d/work" && python3 "$MEASURE" "$d/parent/timings.jsonl" 2 "$d/result.json" -- \
     env KEEL_HOME="$d/home" "$KEEL" exec --permission full --sandbox danger-full-access \
     --output-format json "Run $TASKS workloads as tasks." >"$d/stdout" 2>"$d/stderr")
  stop_mocks "$d"
  local served=0
  for k in $(seq "$TASKS"); do served=$((served + $(wc -l <"$d/m$k/timings.jsonl"))); done
  echo "$served" >"$d/served"
}

for i in $(seq "$RUNS"); do   # interleaved, so drift hits every case alike
  log "run $i: one session";        single "$i"
  log "run $i: $TASKS processes";   separate "$i"
  log "run $i: $TASKS tasks";       tasks "$i"
done

python3 - "$OUT" "$RUNS" "$TASKS" "$STEPS" <<'PY'
import json, os, statistics, sys
out, runs, n, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
med = statistics.median
def load(p):
    try: return json.load(open(p))
    except OSError: return None
single = [r for r in (load(f"{out}/single.{i}/result.json") for i in range(1, runs + 1)) if r]
sep_wall, sep_rss, sep_tree, sep_ok = [], [], [], 0
for i in range(1, runs + 1):
    rs = [load(f"{out}/separate.{i}/p{k}/result.json") for k in range(1, n + 1)]
    rs = [r for r in rs if r]
    if len(rs) == n:
        sep_wall.append(int(open(f"{out}/separate.{i}/wall_ms").read()) / 1e3)
        sep_rss.append(sum(r["maxrss_single_mib"] for r in rs))
        sep_tree.append(sum(r["peak_rss_mib"] for r in rs))
        sep_ok += all(r["exit"] == 0 and r["requests"] == steps + 1 for r in rs)
tasks = []
for i in range(1, runs + 1):
    r = load(f"{out}/tasks.{i}/result.json")
    if r:
        r["served"] = int(open(f"{out}/tasks.{i}/served").read())
        tasks.append(r)
one_rss = med([r["maxrss_single_mib"] for r in single])
print(f"Workload per session: steps={steps}; {n} sessions; median of {runs} runs; {os.cpu_count()} CPUs")
print("| case | wall s | keel peak RSS MiB | tree peak RSS MiB | completed |")
print("|---|---|---|---|---|")
print(f"| one session | {med([r['wall_s'] for r in single]):.2f} | {one_rss:.1f} | {med([r['peak_rss_mib'] for r in single]):.1f} | "
      f"{sum(r['exit'] == 0 and r['requests'] == steps + 1 for r in single)}/{len(single)} |")
print(f"| {n} separate keel exec | {med(sep_wall):.2f} | {med(sep_rss):.1f} (sum of {n}) | {med(sep_tree):.1f} | {sep_ok}/{len(sep_wall)} |")
t_rss = med([r["maxrss_single_mib"] for r in tasks])
print(f"| {n} tasks in one keel exec | {med([r['wall_s'] for r in tasks]):.2f} | {t_rss:.1f} | {med([r['peak_rss_mib'] for r in tasks]):.1f} | "
      f"{sum(r['exit'] == 0 and r['served'] == n * (steps + 1) for r in tasks)}/{len(tasks)} |")
print(f"\n{n} tasks' keel RSS / one session's: {t_rss / one_rss:.2f}x (target < 2x)")
# No task waits for another: every task's first request comes before any task's last answer.
for i in range(1, runs + 1):
    spans = []
    for k in range(1, n + 1):
        try:
            t = [json.loads(l) for l in open(f"{out}/tasks.{i}/m{k}/timings.jsonl") if l.strip()]
        except OSError:
            continue
        if t:
            spans.append((min(x["received_ms"] for x in t), max(x["done_ms"] for x in t)))
    if spans:
        first_end, last_start = min(e for _, e in spans), max(s for s, _ in spans)
        print(f"run {i}: last task started {(last_start - min(s for s, _ in spans)):.0f} ms after the first; "
              f"first task ended {(first_end - min(s for s, _ in spans)):.0f} ms after the first started "
              f"({'all ran at once' if last_start < first_end else 'some waited'})")
PY
echo "Per-run files: $OUT"
