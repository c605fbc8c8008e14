#!/usr/bin/env python3
"""Time the workload's shell children alone: spawn `bash -c CMD` the way a harness does
(own process group, stdin closed, stdout+stderr on one pipe), read to end of output, reap.

usage: shell_child.py DIR [N]   -> prints {"median_s": ..., "mean_s": ..., "n": N} as JSON

The long-run benchmark subtracts the median from each harness's per-step client time to get
the harness's own time per step beyond the shell child.
"""
import json, os, statistics, subprocess, sys, time

COMMANDS = ["ls", "echo step {i}", "pwd", "ls -la"]  # the mock's workload rotation


def main():
    cwd = sys.argv[1]; n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    times = []
    for i in range(n):
        cmd = COMMANDS[i % len(COMMANDS)].format(i=i)
        start = time.perf_counter()
        p = subprocess.Popen(["bash", "-c", cmd], cwd=cwd, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, process_group=0)
        p.stdout.read(); p.wait()
        times.append(time.perf_counter() - start)
    print(json.dumps({"median_s": statistics.median(times), "mean_s": statistics.mean(times), "n": n}))


main()
