#!/usr/bin/env python3
"""order.py KEEL WORK: the hot-symbols order from the profiles run.sh left in WORK.

Three groups, each one block of code once linked:
1. the spawner's loop and the code each command runs before exec (the spawner's whole life
   after start-up is a few pages);
2. what keel runs during turns;
3. what only start-up runs (keel gives those pages back at its first turn).
Within a group the order is by name: which functions are in it is what saves memory, and a
stable order keeps a regenerated list's diff to the functions that came or went.
"""
import collections
import glob
import os
import re
import sys

keel, work = sys.argv[1], sys.argv[2]
# Functions the binary defines; a profile's other names (C library, inlined copies) drop out.
defined = set()
for line in open(os.path.join(work, "nm.txt")):
    parts = line.split()
    if len(parts) == 3 and parts[1] in "tTwW":
        defined.add(parts[2])


def callgrind(path):
    """Self cost per function of the binary in one callgrind output (uncompressed names)."""
    cost = collections.Counter()
    obj, mine, fn = None, False, None
    for line in open(path, errors="replace"):
        if line.startswith("ob="):
            obj = line[3:].strip()
        elif line.startswith("fn="):
            fn = re.sub(r"'\d+$", "", line[3:].strip())
            mine = obj == keel
            if mine:
                cost[fn] += 0
        elif line[:1].isdigit() and mine:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                cost[fn] += int(parts[1])
    return cost


def perf(path, start_window=0.030):
    """(turn, start-up, spawner) sample counts per function in one `perf script` output."""
    turn, start, spawner = collections.Counter(), collections.Counter(), collections.Counter()
    first = {}
    pattern = re.compile(r"\s*(.+?)\s+(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(\S+)\s+\((.*)\)$")
    for line in open(path, errors="replace"):
        m = pattern.match(line.rstrip("\n"))
        if not m:
            continue
        comm, pid, time, sym, dso = m.groups()
        time = float(time)
        first.setdefault(pid, time)
        if dso != keel:
            continue
        if comm == "keel-spawner":
            spawner[sym] += 1
        elif time - first[pid] < start_window:
            start[sym] += 1
        else:
            turn[sym] += 1
    return turn, start, spawner


turn, start, spawner = collections.Counter(), collections.Counter(), collections.Counter()
for path in glob.glob(os.path.join(work, "cg.*")):
    (start if path.endswith(".1") else turn).update(callgrind(path))
for path in glob.glob(os.path.join(work, "perf.*.txt")):
    t, s, sp = perf(path)
    turn.update(t)
    start.update(s)
    spawner.update(sp)

# The spawner's own code is small: all of it goes first.
spawner_code = re.compile(r"keel_sandbox(5child|7spawner|6mounts)")
groups = [
    sorted(set(spawner) | {s for s in defined if spawner_code.search(s)}),
    sorted(turn),
    sorted(start),
]
seen = set()
for group in groups:
    for sym in group:
        if sym in defined and sym not in seen:
            seen.add(sym)
            print(sym)
if not seen:
    sys.exit("no profile named a function of " + keel)
