"""Peak RSS of `keel exec` with a small and with a large bash output (see run.sh)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def script(command):
    return json.dumps([
        {"tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": command}}]},
        {"text": "done"},
    ])


def peak_rss_kib(keel, command):
    """Runs one exec in a fresh home; samples VmRSS of keel's own process every 2 ms."""
    home = tempfile.mkdtemp(prefix="keel-budget-home-")
    work = tempfile.mkdtemp(prefix="keel-budget-work-")
    try:
        path = os.path.join(home, "script.json")
        with open(path, "w") as f:
            f.write(script(command))
        env = dict(os.environ, KEEL_HOME=home)
        env.pop("KEEL_SESSIONS_DB", None)
        started = time.monotonic()
        proc = subprocess.Popen(
            [keel, "exec", "--cwd", work, "--mock-script", path, "run it"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        peak = 0
        status = f"/proc/{proc.pid}/status"
        while proc.poll() is None:
            try:
                with open(status) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            peak = max(peak, int(line.split()[1]))
                            break
            except OSError:
                pass
            time.sleep(0.002)
        wall = time.monotonic() - started
        err = proc.stderr.read().decode(errors="replace")
        if proc.returncode != 0:
            sys.exit(f"keel exited {proc.returncode}: {err}")
        artifacts = os.path.join(home, "sessions")
        saved = 0
        for dirpath, _, files in os.walk(artifacts):
            if dirpath.endswith("artifacts"):
                saved += sum(os.path.getsize(os.path.join(dirpath, n)) for n in files)
        return peak, wall, saved
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def main():
    keel, runs, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    small = "head -c 1024 /dev/zero | tr '\\0' x"
    large = f"head -c {mib * 1024 * 1024} /dev/zero | tr '\\0' x"
    rows = {"small": [], "large": []}
    for _ in range(runs):
        for name, command in (("small", small), ("large", large)):
            rows[name].append(peak_rss_kib(keel, command))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f"keel: {keel}; {runs} runs each, interleaved; peak RSS of keel's own process")
    print("| output | peak RSS MiB (median) | min | max | wall s (median) | artifact bytes |")
    print("|---|---|---|---|---|---|")
    for name, label in (("small", "1 KiB"), ("large", f"{mib} MiB")):
        peaks = [p for p, _, _ in rows[name]]
        walls = [w for _, w, _ in rows[name]]
        saved = rows[name][0][2]
        print(f"| {label} | {med(peaks) / 1024:.1f} | {min(peaks) / 1024:.1f} | "
              f"{max(peaks) / 1024:.1f} | {med(walls):.2f} | {saved} |")
    delta = (med([p for p, _, _ in rows["large"]]) - med([p for p, _, _ in rows["small"]])) / 1024
    print(f"\n{mib} MiB of output adds {delta:.1f} MiB to keel's peak RSS (budget: 16 MiB)")


main()
