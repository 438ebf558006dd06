#!/usr/bin/env python3
"""Memory of a goblin-core replica during a full synchronization from a redis-server primary:
the RDB file spooled to disk and mapped (`repl-diskless-load disabled`, the default) against
read into memory (`swapdb`), with a redis-server replica (its default, `disabled`: the file
on disk, then loaded) beside them, in one run.

The primary is Debian's redis-server, loaded with `DEBUG POPULATE` (--keys string keys of
--value bytes), diskless (its file comes as an EOF-marked stream, without the 5 s wait). Each
replica starts empty, is given its `repl-diskless-load`, then `REPLICAOF`; until its link is up
with the primary's key count, every 20 ms the script reads the replica process's anonymous
and file-backed resident memory (/proc/PID/status `RssAnon`, `RssFile`) and its allocator's
figure (INFO `used_memory`). Reported per configuration, medians over --rounds alternating
rounds: the peaks, the figures once synchronized, and the sync time; plus a plot of the
anonymous memory over the sync of the last round.

Usage:
  cargo build --release --bin goblin-core
  python3 benchmarks/replica_sync_memory.py [--keys 2000000] [--value 100] [--rounds 3]
Writes benchmarks/out/replica-sync-memory.md and docs/img/replica-sync-memory.png.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replication_compare import Proc, ROOT, Resp, target  # noqa: E402
from netutil import free_port  # noqa: E402

CONFIGS = [("goblin", "disabled"), ("goblin", "swapdb"), ("redis", "disabled")]


def name(kind, mode):
    return f"{'goblin-core' if kind == 'goblin' else 'redis-server'}, repl-diskless-load {mode}"


def status(pid):
    """(RssAnon, RssFile) of `pid`, in bytes."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon:", "RssFile:")):
                k, v = line.split(":")
                got[k] = int(v.split()[0]) * 1024
    return got.get("RssAnon", 0), got.get("RssFile", 0)


def start(argv, work, tag):
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in argv]
    return Proc(argv, port, os.path.join(work, f"{tag}.stderr")), port


def run(work, kind, mode, rnd, keys, value):
    tag = f"{kind}-{mode}-{rnd}"
    pdir = os.path.join(work, f"primary-{tag}")
    rdir = os.path.join(work, f"replica-{tag}")
    os.makedirs(pdir)
    os.makedirs(rdir)
    p, pport = start(["redis-server", "--port", "{port}", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
                      "--dir", pdir, "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
                      "--enable-debug-command", "local"], work, f"primary-{tag}")
    r = None
    try:
        pc = Resp(pport)
        pc.cmd("DEBUG", "POPULATE", keys, "key", value)
        want = int(pc.cmd("DBSIZE"))
        if kind == "goblin":
            argv = [target("goblin-core"), "--port", "{port}", "--save", "", "--dir", rdir]
        else:
            argv = ["redis-server", "--port", "{port}", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1",
                    "--dir", rdir]
        r, rport = start(argv, work, f"replica-{tag}")
        rc = Resp(rport)
        rc.cmd("CONFIG", "SET", "repl-diskless-load", mode)
        base_anon, base_file = status(r.proc.pid)
        samples = []
        started = time.time()
        rc.cmd("REPLICAOF", "127.0.0.1", pport)
        while True:
            anon, file_ = status(r.proc.pid)
            used = int(rc.info("memory")["used_memory"])
            samples.append((time.time() - started, anon, file_, used))
            m = rc.info("replication")
            if m.get("master_link_status") == "up" and int(rc.cmd("DBSIZE")) == want:
                break
            if time.time() > started + 600:
                raise RuntimeError(f"{name(kind, mode)} never synchronized: {m}")
            time.sleep(0.02)
        sync_s = time.time() - started
        anon, file_ = status(r.proc.pid)
        used = int(rc.info("memory")["used_memory"])
        return {
            "sync_s": sync_s,
            "peak_anon": max(s[1] for s in samples) - base_anon,
            "peak_file": max(s[2] for s in samples) - base_file,
            "peak_used": max(s[3] for s in samples),
            "anon": anon - base_anon,
            "used": used,
            "samples": samples,
            "base_anon": base_anon,
        }
    finally:
        if r:
            r.stop()
        p.stop()


def plot(last, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for (kind, mode), x in last.items():
        ts = [s[0] for s in x["samples"]]
        ax.plot(ts, [(s[1] - x["base_anon"]) / 2**20 for s in x["samples"]], label=name(kind, mode))
    ax.set_xlabel("seconds since REPLICAOF")
    ax.set_ylabel("anonymous resident memory added, MiB")
    ax.set_title("A replica's memory during a full synchronization")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=2000000)
    ap.add_argument("--value", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not shutil.which("redis-server"):
        raise SystemExit("redis-server is not installed (apt-get install redis-server)")
    target("goblin-core")
    work = tempfile.mkdtemp(prefix="replica-sync-memory-")
    res = {c: [] for c in CONFIGS}
    last = {}
    for rnd in range(args.rounds):
        for kind, mode in CONFIGS:
            x = run(work, kind, mode, rnd, args.keys, args.value)
            res[(kind, mode)].append(x)
            last[(kind, mode)] = x
            print(f"round {rnd + 1}: {name(kind, mode)}: synchronized in {x['sync_s']:.2f} s; peaks RssAnon "
                  f"+{x['peak_anon'] / 2**20:.0f} MiB, RssFile +{x['peak_file'] / 2**20:.0f} MiB, used_memory "
                  f"{x['peak_used'] / 2**20:.0f} MiB; after: RssAnon +{x['anon'] / 2**20:.0f} MiB, used_memory "
                  f"{x['used'] / 2**20:.0f} MiB", flush=True)
    med = lambda c, k: statistics.median(x[k] for x in res[c])  # noqa: E731
    mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    lines = [f"## A replica's memory during a full synchronization ({args.keys:,} keys of {args.value} bytes)", "",
             f"Median of {args.rounds} alternating rounds; MiB added to the replica process from before REPLICAOF "
             "(used_memory: the allocator's figure as INFO reports it). The primary is redis-server, diskless.", "",
             "| replica | sync, s | peak RssAnon | peak RssFile | peak used_memory | RssAnon after | used_memory after |",
             "|---|---|---|---|---|---|---|"]
    for c in CONFIGS:
        lines.append(f"| {name(*c)} | {med(c, 'sync_s'):.2f} | {mib(med(c, 'peak_anon'))} | {mib(med(c, 'peak_file'))} | "
                     f"{mib(med(c, 'peak_used'))} | {mib(med(c, 'anon'))} | {mib(med(c, 'used'))} |")
    spool, memory = ("goblin", "disabled"), ("goblin", "swapdb")
    lines += ["", f"goblin-core, spooled against read into memory: peak RssAnon "
              f"{med(spool, 'peak_anon') / med(memory, 'peak_anon'):.2f}, peak used_memory "
              f"{med(spool, 'peak_used') / med(memory, 'peak_used'):.2f}, sync time "
              f"{med(spool, 'sync_s') / med(memory, 'sync_s'):.2f}; against redis-server's replica: peak RssAnon "
              f"{med(spool, 'peak_anon') / med(('redis', 'disabled'), 'peak_anon'):.2f}."]
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "replica-sync-memory.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    if plot(last, os.path.join(ROOT, "docs", "img", "replica-sync-memory.png")):
        print("plot: docs/img/replica-sync-memory.png")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
