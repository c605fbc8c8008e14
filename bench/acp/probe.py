#!/usr/bin/env python3
"""Raw ACP probe without any SDK, so the numbers are the agent's and not a client library's.

usage: probe.py CWD -- <agent-cmd> [args...]

Measures (printed as one JSON line):
  init_ms         spawn -> `initialize` response
  session_new_ms  `session/new` request -> response
  rss_idle_mib    sum of VmRSS over the agent's process tree, 1 s after session/new
  rss_peak_mib    sum of VmHWM (per-process peak RSS) over the same tree
  procs           number of processes in that tree
  exit_ms         stdin EOF -> process exit, or null if still alive after 3 s (then killed)
"""
import json, os, queue, signal, subprocess, sys, threading, time

cwd = os.path.abspath(sys.argv[1])
cmd = sys.argv[sys.argv.index("--") + 1:]


def tree(root):
    """The root pid and all its descendants, from /proc/*/stat parent links."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            # The command name may contain spaces; the ppid is the 2nd field after ")".
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def status_kib(pid, field):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


t0 = time.perf_counter()
# Own session: killing the group also removes helpers (pi-acp runs `pi` as a child).
p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, start_new_session=True)
lines = queue.Queue()
threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()


def send(msg):
    p.stdin.write((json.dumps(msg) + "\n").encode())
    p.stdin.flush()


def wait_for(id_, limit=30):
    """Read messages until the response with this id; notifications are skipped."""
    end = time.perf_counter() + limit
    while True:
        msg = json.loads(lines.get(timeout=max(0.01, end - time.perf_counter())))
        if msg.get("id") == id_ and "method" not in msg:
            if "error" in msg:
                raise SystemExit(f"{cmd[0]}: request {id_} failed: {msg['error']}")
            return msg
        if "method" in msg and "id" in msg:  # an agent->client request: we support none
            send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "not supported"}})


res = {}
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
    "clientInfo": {"name": "keel-acp-probe", "version": "0.1.0"}}})
wait_for(1)
res["init_ms"] = (time.perf_counter() - t0) * 1000
t1 = time.perf_counter()
send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}})
wait_for(2)
res["session_new_ms"] = (time.perf_counter() - t1) * 1000
time.sleep(1.0)  # let start-up work (threads, helper processes) settle before calling it idle
pids = tree(p.pid)
res["procs"] = len(pids)
res["rss_idle_mib"] = sum(status_kib(x, "VmRSS") for x in pids) / 1024
res["rss_peak_mib"] = sum(status_kib(x, "VmHWM") for x in pids) / 1024
t2 = time.perf_counter()
p.stdin.close()
try:
    p.wait(timeout=3)
    res["exit_ms"] = (time.perf_counter() - t2) * 1000
except subprocess.TimeoutExpired:
    res["exit_ms"] = None
try:
    os.killpg(p.pid, signal.SIGKILL)  # agent gone or not, leave no helpers behind
except ProcessLookupError:
    pass
p.wait()
print(json.dumps(res))
