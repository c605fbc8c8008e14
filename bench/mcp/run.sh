#!/usr/bin/env bash
# MCP start-up benchmark (issues 15 and 35): `keel exec` for a one-answer turn with 0, 1
# and 10 configured stdio servers (the in-repo test server `keel-mcptest`), with 10 servers
# of which one starts slowly, with 1 and 10 streamable HTTP servers, and with 1 HTTP server
# that wants a bearer token keel has from a stored OAuth login (its refresh endpoint is
# unreachable: a start that sent anything there would fail). Reports the median wall time
# of RUNS runs per case. ONLY_STDIO=1 skips the HTTP cases (for builds without OAuth).
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
mkdir -p "$OUT/work/.git"
echo '[{"text": "ok"}]' > "$OUT/script.json"

median_ms() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# The HTTP servers' process ids, in a file: `$(http_server)` runs in a subshell.
cleanup() {
  if [[ -f $OUT/pids ]]; then while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$OUT/pids"; fi
  rm -rf "$OUT"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Starts an HTTP keel-mcptest (extra args after the port) and prints its URL.
http_server() {
  local port
  port=$(free_port)
  "$SERVER" --http "127.0.0.1:$port" "$@" > /dev/null 2>&1 &
  echo $! >> "$OUT/pids"
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  echo "http://127.0.0.1:$port/mcp"
}

run_case() { # name, count, slow [urls...]: with urls, HTTP servers
  local name=$1 count=$2 slow=$3 home="$OUT/home-${1// /-}" i t0 t1
  shift 3
  local urls=("$@")
  mkdir -p "$home"
  if ((${#urls[@]} > 0)); then
    {
      echo "mcp_servers:"
      for ((i = 0; i < ${#urls[@]}; i++)); do
        echo "  h$i:"
        echo "    url: ${urls[$i]}"
      done
    } > "$home/config.yaml"
    if [[ -n ${CREDENTIALS:-} ]]; then
      printf '%s' "$CREDENTIALS" > "$home/credentials.json"
      chmod 600 "$home/credentials.json"
    fi
  elif ((count == 0)); then : > "$home/config.yaml"; else
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
  if grep -q "needs you to log in\|did not start" "$home/stderr"; then
    echo "$name: a server did not start:" >&2
    cat "$home/stderr" >&2
    exit 1
  fi
  printf '%-28s %6s ms (median of %d)\n' "$name" "$(printf '%s\n' "${times[@]}" | median_ms)" "$RUNS"
}

echo "keel: $KEEL"
run_case "0 servers" 0 0
run_case "1 server" 1 0
run_case "10 servers" 10 0
run_case "10 servers, 1 slow (${SLOW_MS} ms)" 10 1
[[ -n ${ONLY_STDIO:-} ]] && exit 0
one=$(http_server)
run_case "1 http server" 0 0 "$one"
ten=()
for _ in $(seq 10); do ten+=("$(http_server)"); done
run_case "10 http servers" 0 0 "${ten[@]}"
guarded=$(http_server --require-bearer bench-token)
expires=$(($(date +%s) + 3600))
CREDENTIALS=$(printf '{"providers": {}, "mcp": {"h0 %s": {"resource": "%s", "issuer": "http://127.0.0.1:1", "token_endpoint": "http://127.0.0.1:1/token", "client_id": "bench", "auth_method": "none", "grant": "authorization_code", "access_token": "bench-token", "refresh_token": "r", "expires_at": %d, "scopes": []}}}' "${guarded%/mcp}" "$guarded" "$expires") \
  run_case "1 http server, stored token" 0 0 "$guarded"
