#!/usr/bin/env python3
"""Run one command and measure its whole process tree.

usage: measure.py RECORD_FILE EXPECTED_REQUESTS OUT_JSON -- CMD...

Becomes a child subreaper so orphaned grandchildren stay in the tree, samples
/proc every INTERVAL seconds (sum of RSS over all descendants = tree RSS),
polls the mock's --record file to time the first and last request, and takes
CPU time from getrusage(RUSAGE_CHILDREN) after every descendant is reaped.
"""
import ctypes, subprocess, json, os, resource, signal, sys, time

INTERVAL = float(os.environ.get("SAMPLE_INTERVAL", "0.005"))
PAGE = os.sysconf("SC_PAGE_SIZE")

def main():
    rec, expected, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    me = os.getpid()
    t0 = time.monotonic()
    # Popen returns only after exec succeeded, so the pre-exec copy of this
    # Python process is never sampled as part of the tree.
    pid = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True).pid
    peak = 0; seen = set(); comms = {}; first = last = None; nreq = 0; status = None
    def tree_rss():
        parent = {}; rss = {}
        for d in os.listdir("/proc"):
            if not d.isdigit(): continue
            try:
                with open(f"/proc/{d}/stat") as f: s = f.read()
            except OSError: continue
            f2 = s[s.rindex(")") + 2:].split()
            parent[int(d)] = int(f2[1]); rss[int(d)] = int(f2[21]) * PAGE
        total = 0
        for p in rss:
            if p == me: continue
            q = p
            while q in parent and q != me and q > 1: q = parent[q]
            if q == me:
                total += rss[p]
                if p not in seen:
                    seen.add(p)
                    try:
                        with open(f"/proc/{p}/comm") as f: comms[p] = f.read().strip()
                    except OSError: pass
        return total
    def poll_rec(now):
        nonlocal first, last, nreq
        try:
            with open(rec, "rb") as f: n = f.read().count(b"\n")
        except OSError: n = 0
        if n > nreq:
            if first is None: first = now
            last = now; nreq = n
    while True:
        now = time.monotonic()
        peak = max(peak, tree_rss()); poll_rec(now)
        r, st = os.waitpid(pid, os.WNOHANG)
        if r == pid: status = st; break
        time.sleep(INTERVAL)
    t_exit = time.monotonic()
    poll_rec(t_exit)
    # The main process is gone; give leftover descendants (reparented to us) 2 s, then kill.
    deadline = time.monotonic() + 2
    while True:
        try:
            r, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError: break
        if r == 0:
            if time.monotonic() > deadline:
                for p in list(seen):
                    try: os.kill(p, signal.SIGKILL)
                    except OSError: pass
            time.sleep(0.01)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": t_exit - t0,
        "startup_s": (first - t0) if first else None,
        "span_s": (last - first) if first else None,
        "tail_s": (t_exit - last) if last else None,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_rss_mib": peak / 1048576,
        "maxrss_single_mib": ru.ru_maxrss / 1024,
        "processes": len(seen),
        "commands": sorted(set(comms.values())),
        "requests": nreq,
        "expected_requests": expected,
    }
    with open(out, "w") as f: json.dump(res, f)

main()
