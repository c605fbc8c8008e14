#!/usr/bin/env bash
# Peak RSS of `keel acp` given one 256 MiB line (issue 28): the current build, and
# $KEEL_PREV (an older binary) when set, side by side.
# usage: KEEL_PREV=/path/to/old/keel MIB=256 bench/acp-bounds/run.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TGT=${CARGO_TARGET_DIR:-$HOME/.cache/keel/target}
KEEL=${KEEL:-$TGT/release/keel}
MIB=${MIB:-256}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/home" "$WORK/user" "$WORK/work"
run() {
  (cd "$WORK/work" && KEEL_HOME=$WORK/home HOME=$WORK/user ANTHROPIC_API_KEY=x \
    python3 "$HERE/line.py" "$MIB" -- "$1" acp --model anthropic/claude-sonnet-4-5)
}
echo "| build | line MiB | peak RSS MiB | error answer bytes | served after |"
echo "| --- | --- | --- | --- | --- |"
for which in now prev; do
  bin=$KEEL; [[ $which == prev ]] && bin=${KEEL_PREV:-}
  [[ -z $bin ]] && continue
  out=$(run "$bin")
  python3 - "$which" "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[2])
print(f"| {sys.argv[1]} | {r['mib']} | {r['rss_peak_mib']} | {r['error_bytes']} | {r['served']} |")
PY
done
