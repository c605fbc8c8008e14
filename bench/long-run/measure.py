#!/usr/bin/env python3
"""Run one command and measure its whole process tree.

usage: measure.py TIMINGS_FILE EXPECTED_REQUESTS OUT_JSON -- CMD...

Becomes a child subreaper so orphaned grandchildren stay in the tree. A thread blocks in
wait4() on the main process, so its exit is timed exactly and its own rusage (itself plus the
children it reaped) is known. The sampler reads /proc every INTERVAL seconds for the tree's
RSS (sum over all descendants) and the main process's children-CPU counters. Request times
come from the mock's --timings file (written by the mock as each request arrives and as its
response ends), read once after the run, so nothing polls it while the client works.
"""
import ctypes, json, os, resource, signal, subprocess, statistics, sys, threading, time

INTERVAL = float(os.environ.get("SAMPLE_INTERVAL", "0.005"))
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2:].split()


def main():
    timings, expected, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    cmd = sys.argv[sys.argv.index("--") + 1:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    me = os.getpid()
    t0 = time.time()
    # Popen returns only after exec succeeded, so the pre-exec copy of this
    # Python process is never sampled as part of the tree.
    pid = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True).pid
    ended = {}

    def reap():
        _, status, ru = os.wait4(pid, 0)
        ended.update(t=time.time(), status=status, ru=ru)

    waiter = threading.Thread(target=reap, daemon=True)
    waiter.start()
    peak = 0; seen = set(); comms = {}; child_ticks = 0

    def exe(pid):
        try: return os.readlink(f"/proc/{pid}/exe")
        except OSError: return None

    def comm(pid):
        try:
            with open(f"/proc/{pid}/comm") as f: return f.read().strip()
        except OSError: return None

    def tree_rss():
        parent = {}; rss = {}
        for d in os.listdir("/proc"):
            if not d.isdigit(): continue
            try: f2 = stat_fields(d)
            except OSError: continue
            parent[int(d)] = int(f2[1]); rss[int(d)] = int(f2[21]) * PAGE
        total = 0
        for p in rss:
            if p == me: continue
            q = p
            while q in parent and q != me and q > 1: q = parent[q]
            if q == me:
                # A child caught between spawn and exec still runs its parent's program under
                # its parent's name and shows the parent's pages (all of them after a vfork,
                # the shared copy-on-write ones after a fork). Counting it would add the
                # parent twice, so such a child is left out, for every harness alike. A
                # helper that runs its parent's program under a name of its own (keel's
                # sandbox spawner) is a process of the tree and counts.
                up = parent.get(p)
                if up in rss and exe(up) is not None and exe(up) == exe(p) \
                        and comm(up) == comm(p):
                    continue
                total += rss[p]
                if p not in seen:
                    seen.add(p)
                    try:
                        with open(f"/proc/{p}/comm") as f: comms[p] = f.read().strip()
                    except OSError: pass
        return total

    while waiter.is_alive():
        peak = max(peak, tree_rss())
        try:
            f2 = stat_fields(pid)  # cutime+cstime: CPU of the children the main process reaped
            child_ticks = int(f2[13]) + int(f2[14])
        except OSError:
            pass
        waiter.join(INTERVAL)
    t_exit, status, ru_main = ended["t"], ended["status"], ended["ru"]
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
    reqs = []
    try:
        with open(timings) as f:
            reqs = sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["index"])
    except OSError:
        pass
    recv = [r["received_ms"] / 1e3 for r in reqs]
    done = [r["done_ms"] / 1e3 for r in reqs]
    # Client time per step: from the end of one response to the arrival of the next request
    # (stream end handling, the tool call with its shell child, persistence, the next request).
    gaps = [recv[i + 1] - done[i] for i in range(len(reqs) - 1)]
    main_cpu = ru_main.ru_utime + ru_main.ru_stime
    res = {
        "exit": os.waitstatus_to_exitcode(status),
        "wall_s": t_exit - t0,
        "startup_s": (recv[0] - t0) if recv else None,
        "span_s": (recv[-1] - recv[0]) if recv else None,
        "tail_s": (t_exit - recv[-1]) if recv else None,
        "after_last_response_s": (t_exit - done[-1]) if done else None,
        "gap_median_s": statistics.median(gaps) if gaps else None,
        "gap_mean_s": statistics.mean(gaps) if gaps else None,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        # The main process alone: its rusage at exit minus what its reaped children used.
        "main_cpu_s": max(0.0, main_cpu - child_ticks / TICK),
        "peak_rss_mib": peak / 1048576,
        "maxrss_single_mib": ru.ru_maxrss / 1024,
        "processes": len(seen),
        "commands": sorted(set(comms.values())),
        "requests": len(reqs),
        "expected_requests": expected,
    }
    with open(out, "w") as f: json.dump(res, f)


main()
