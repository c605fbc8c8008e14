#!/usr/bin/env bash
# The TUI's performance figures, measured from outside the way a user sees them: keel runs
# in tmux against a scripted model and the screen is polled with capture-pane (so the
# figures include tmux's own latency: they are upper bounds).
#   first frame      exec → the footer on screen
#   keystroke        send-keys → the character on screen (median of 20)
#   idle CPU         CPU seconds used over 10 s with nothing happening
#   streaming CPU    CPU used while an answer streams at about 1,000 tokens/s for 10 s
#   peak RSS         VmHWM after resuming a session of 1,000 messages
# Usage: bench/tui/run.sh [path/to/keel]   (default: the release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keel/target}"
KEEL="${1:-}"
if [ -z "$KEEL" ]; then
  cargo build --release -p keel-cli >/dev/null
  KEEL="$CARGO_TARGET_DIR/release/keel"
fi
WORK=$(mktemp -d)
trap 'tmux -L keel-bench kill-server 2>/dev/null || true; rm -rf "$WORK"' EXIT
export KEEL_HOME="$WORK/home"
mkdir -p "$KEEL_HOME"
T="tmux -L keel-bench -f /dev/null"
now_ms() { date +%s%3N; }
pid_of() { $T list-panes -t b -F '#{pane_pid}' | head -1 | xargs -I{} pgrep -P {} -f keel | head -1; }
wait_screen() { # needle timeout_ms
  local start; start=$(now_ms)
  while ! $T capture-pane -p -t b | grep -qF -- "$1"; do
    [ $(( $(now_ms) - start )) -gt "$2" ] && { echo "timeout waiting for $1" >&2; return 1; }
  done
}
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

# 1. First frame (5 runs, best and median).
printf '[{"text":"hi"}]' > "$WORK/one.json"
firsts=()
for i in 1 2 3 4 5; do
  start=$(now_ms)
  $T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json"
  wait_screen "workspace-write" 5000
  firsts+=($(( $(now_ms) - start )))
  $T kill-server
  sleep 0.2
done
echo "first frame ms: ${firsts[*]}"

# 2. Keystroke to frame and 3. idle CPU.
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json"
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

# 4. Streaming: 10,000 tokens (~4 characters each) in chunks of 8 characters every 4 ms.
python3 - "$WORK/stream.json" <<'PY'
import json, sys
text = " ".join(f"word{i}" + ("\n\n" if i % 40 == 39 else "") for i in range(8000))
json.dump([{"text": text, "chunk_size": 8, "delay_ms": 4}], open(sys.argv[1], "w"))
PY
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/stream.json"
wait_screen "workspace-write" 5000
PID=$(pid_of)
$T send-keys -t b "go" Enter
start=$(now_ms); before=$(cpu_ticks "$PID")
wait_screen "word7999" 120000
after=$(cpu_ticks "$PID"); took=$(( $(now_ms) - start ))
echo "streaming: $took ms wall, $(( (after - before) * 10 )) ms CPU (the whole process: model decoding, history commits and rendering)"
$T kill-server; sleep 0.2

# 5. Peak RSS resuming a 1,000-message session (500 turns of user + answer).
python3 - "$WORK/many.json" <<'PY'
import json, sys
json.dump([{"text": f"answer {i}: " + "lorem ipsum dolor sit amet " * 20} for i in range(500)], open(sys.argv[1], "w"))
PY
for i in $(seq 1 500); do
  "$KEEL" exec --cwd "$WORK" --mock-script <(python3 -c "import json;print(json.dumps([{'text':'answer $i: ' + 'lorem ipsum dolor sit amet '*20}]))") $([ "$i" -gt 1 ] && echo --continue) "question $i" >/dev/null
done
$T new-session -d -s b -x 120 -y 40 "cd $WORK && exec $KEEL --mock-script $WORK/one.json --continue"
wait_screen "resumed session" 20000
sleep 1
PID=$(pid_of)
echo "peak RSS with 1,000 messages: $(awk '/VmHWM/ {print $2, $3}' /proc/$PID/status)"
