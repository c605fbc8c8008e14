#!/usr/bin/env bash
# The TUI's performance figures, measured from outside the way a user sees them: keel runs
# in tmux against a scripted model and the screen is polled with capture-pane (so the
# figures include tmux's own latency: they are upper bounds).
#   first frame      exec → the footer on screen
#   keystroke        send-keys → the character on screen (median of 20)
#   idle CPU         CPU seconds used over 10 s with nothing happening
#   streaming CPU    CPU used while an answer streams at about 1,000 tokens/s for 10 s
#   peak RSS         VmHWM after resuming a session of 1,000 messages
#   flood keystroke  send-keys → screen while a command prints 10 MB live
# Usage: bench/tui/run.sh [path/to/keel]   (default: the release build)
#        CODEX=path/to/codex bench/tui/run.sh   also measures Codex's TUI the same way (first
#        frame, idle CPU, RSS at rest), against a provider it never reaches: nothing is sent.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keel/target}"
KEEL="${1:-}"
if [ -z "$KEEL" ]; then
  cargo build --release -p keel-cli >/dev/null
  KEEL="$CARGO_TARGET_DIR/release/keel"
fi
WORK=$(mktemp -d)
trap 'tmux -L keel-bench kill-server 2>/dev/null || true; pkill -f "$WORK/codex-home" 2>/dev/null || true; cat "$WORK/err" 2>/dev/null >&2; rm -rf "$WORK"' EXIT
export KEEL_HOME="$WORK/home"
mkdir -p "$KEEL_HOME"
T="tmux -L keel-bench -f /dev/null"
now_ms() { date +%s%3N; }
# Every pane runs `exec keel`, so the pane's process is keel itself.
pid_of() { $T list-panes -t b -F '#{pane_pid}' | head -1; }
wait_screen() { # needle timeout_ms
  local start; start=$(now_ms)
  while [[ "$($T capture-pane -p -t b 2>/dev/null)" != *"$1"* ]]; do
    if [ $(( $(now_ms) - start )) -gt "$2" ]; then echo "timeout waiting for $1" >&2; return 1; fi
  done
  return 0
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

# 1. First frame (5 runs, best and median).
printf '[{"text":"hi"}]' > "$WORK/one.json"
firsts=()
for i in 1 2 3 4 5; do
  start=$(now_ms)
  $T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json 2>>$WORK/err"
  wait_screen "workspace-write" 5000
  firsts+=($(( $(now_ms) - start )))
  $T kill-server
  sleep 0.2
done
echo "first frame ms: ${firsts[*]}"

# 2. Keystroke to frame and 3. idle CPU.
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json 2>>$WORK/err"
wait_screen "workspace-write" 5000
sleep 0.5
keys=()
for c in a b c d e f g h i j k l m n o p q r s t; do
  start=$(now_ms)
  $T send-keys -t b "$c"
  wait_screen "› $(printf '%s' "${typed:-}")$c" 2000
  keys+=($(( $(now_ms) - start )))
  typed="${typed:-}$c"
done
echo "keystroke ms: $(printf '%s\n' "${keys[@]}" | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "max", a[NR]}')"
PID=$(pid_of)
before=$(cpu_ticks "$PID"); sleep 10; after=$(cpu_ticks "$PID")
echo "idle CPU over 10 s: $(( (after - before) * 10 )) ms"
$T kill-server; sleep 0.2

# 4. Streaming: about 18,000 tokens (72k characters) in chunks of 16 characters every 4 ms,
#    about 1,000 tokens/s; the same stream through `keel exec` gives the cost without drawing.
python3 - "$WORK/stream.json" <<'PY'
import json, sys
text = " ".join(f"word{i}" + ("\n\n" if i % 40 == 39 else "") for i in range(8000))
json.dump([{"text": text, "chunk_size": 16, "delay_ms": 4}], open(sys.argv[1], "w"))
PY
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/stream.json 2>>$WORK/err"
wait_screen "workspace-write" 5000
PID=$(pid_of)
$T send-keys -t b "go" Enter
start=$(now_ms); before=$(cpu_ticks "$PID")
wait_screen "word7999" 120000
after=$(cpu_ticks "$PID"); took=$(( $(now_ms) - start ))
echo "streaming in the TUI: $took ms wall, $(( (after - before) * 10 )) ms CPU (the whole process)"
$T kill-server; sleep 0.2
TIMEFORMAT='%U %S'
exec_cpu=$( { time "$KEEL" exec --cwd "$WORK" --mock-script "$WORK/stream.json" go >/dev/null; } 2>&1 | tail -1 | awk '{printf "%d", ($1 + $2) * 1000}')
echo "the same stream through keel exec: $exec_cpu ms CPU (no drawing)"

# 5. Peak RSS resuming a session of 1,000 messages: one turn of 500 commands (an answer with
#    a call and its result each), made by `keel exec`, then opened in the TUI.
python3 - "$WORK/many.json" <<'PY'
import json, sys
steps = [{"text": f"step {i}: " + "lorem ipsum dolor sit amet " * 8,
          "tool_calls": [{"id": f"c{i}", "name": "bash", "arguments": {"command": f"echo output {i}"}}]}
         for i in range(500)]
json.dump(steps + [{"text": "all done"}], open(sys.argv[1], "w"))
PY
"$KEEL" exec --cwd "$WORK" --permission full --max-steps 600 --mock-script "$WORK/many.json" "run them" >/dev/null 2>&1
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json --continue 2>>$WORK/err"
wait_screen "all done" 20000
sleep 1

echo "keel at rest: $(awk '/VmHWM/ {print $2, $3}' /proc/$(pid_of)/status) peak RSS after resuming"
$T kill-server; sleep 0.2

# 6. Keystroke to frame while a command prints 10 MB (in 100 bursts of 100 KiB lines over
#    about 5 s), drawn live under its call: input must not stall behind the output.
python3 - "$WORK/flood.json" <<'PY'
import json, sys
command = "for i in $(seq 1 100); do head -c 102400 /dev/zero | tr '\\0' x | fold -w 99; sleep 0.05; done; echo flood-done"
json.dump([{"tool_calls": [{"id": "f1", "name": "bash", "arguments": {"command": command}}]},
           {"text": "flooded"}], open(sys.argv[1], "w"))
PY
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --permission full --mock-script $WORK/flood.json 2>>$WORK/err"
wait_screen "workspace-write" 5000
PID=$(pid_of)
$T send-keys -t b "go" Enter
wait_screen "xxxxxxxx" 10000
before=$(cpu_ticks "$PID"); start_all=$(now_ms)
keys=(); typed=""
for c in q w e r t y u i o p; do
  start=$(now_ms)
  $T send-keys -t b "$c"
  wait_screen "› $typed$c" 3000
  keys+=($(( $(now_ms) - start )))
  typed="$typed$c"
done
wait_screen "flooded" 60000
after=$(cpu_ticks "$PID")
echo "keystroke ms while 10 MB prints: $(printf '%s\n' "${keys[@]}" | sort -n | awk '{a[NR]=$1} END {print "median", a[int((NR+1)/2)], "max", a[NR]}'); keel CPU $(( (after - before) * 10 )) ms over $(( $(now_ms) - start_all )) ms"
$T kill-server; sleep 0.2

# 7. Codex's TUI, measured the same way.
if [ -n "${CODEX:-}" ]; then
  mkdir -p "$WORK/codex-home" "$WORK/codex-work"
  cat > "$WORK/codex-home/config.toml" <<TOML
model = "mock-model"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "danger-full-access"
[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"
env_key = "MOCK_API_KEY"
[projects."$WORK/codex-work"]
trust_level = "trusted"
TOML
  firsts=()
  for i in 1 2 3 4 5; do
    start=$(now_ms)
    $T new-session -d -s b -x 120 -y 40 "cd $WORK/codex-work && CODEX_HOME=$WORK/codex-home MOCK_API_KEY=sk-mock exec $CODEX"
    wait_screen "Ask Codex" 10000
    firsts+=($(( $(now_ms) - start )))
    [ "$i" -lt 5 ] && { $T kill-server; sleep 0.2; }
  done
  echo "codex first frame ms: ${firsts[*]}"
  sleep 0.5
  PID=$(pid_of)
  before=$(cpu_ticks "$PID"); sleep 10; after=$(cpu_ticks "$PID")
  echo "codex idle CPU over 10 s: $(( (after - before) * 10 )) ms"
  echo "codex at rest: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status) peak RSS"
  $T kill-server; sleep 1
  # Codex leaves an app-server daemon running after its TUI exits.
  echo "codex processes left after its TUI exited: $(pgrep -fc "$WORK/codex-home" || true)"
fi
