#!/usr/bin/env python3
"""Peak memory of `keel acp` while an editor sends one over-long line.

usage: line.py MIB -- <keel> acp [args...]

Sends `initialize`, then one JSON-RPC request MIB MiB long on a single line, then
`session/list`; waits for both answers and prints one JSON line:
  rss_peak_mib   keel's VmHWM (peak resident set) after the answers
  error_bytes    size of the answer to the long line (a parse error, quoting its start)
  served         whether the `session/list` after it was answered
"""
import json, os, subprocess, sys, threading

mib = int(sys.argv[1])
cmd = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
answers = []
done = threading.Event()


def read():
    for line in proc.stdout:
        answers.append(line)
        if b'"id":3' in line:
            done.set()
            return


threading.Thread(target=read, daemon=True).start()
send = proc.stdin.write
send(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n')
head = b'{"jsonrpc":"2.0","id":2,"method":"session/list","params":{"cursor":"'
send(head)
chunk = b"A" * (1024 * 1024)
for _ in range(mib):
    send(chunk)
send(b'"}}\n')
send(b'{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}\n')
proc.stdin.flush()
served = done.wait(120)
peak = 0
with open(f"/proc/{proc.pid}/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) // 1024
error = next((a for a in answers if b'"id":null' in a or b"-32700" in a), b"")
proc.stdin.close()
proc.wait(10)
print(json.dumps({"mib": mib, "rss_peak_mib": peak, "error_bytes": len(error), "served": served}))
