#!/usr/bin/env python3
"""Redis's own answer to run.py's primary loss, for docs/BENCHMARKS.md.

redis-server with `appendonly yes`, `appendfsync everysec` and a replica; the five Redis types of
the six-type dataset (Redis has no sparse arrays) written through the primary; the replica
waited for; the primary SIGKILLed, every value read back from the replica, the primary
restarted from its unchanged argument vector on the same data folder; the time until it
answers with `loading:0`, the AOF load time from its log, and every acknowledged value read
back from it.

    python3 benchmarks/e2e/redis_aof.py --count 1000000
"""

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
from netutil import find_binary, free_port  # noqa: E402
from run import ROOT, Dataset, Failure, Unit, info, listening, now, rss_bytes, wait_until  # noqa: E402

FIVE = ["strings", "hashes", "sets", "zsets", "lists"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1_000_000, help="values per type")
    ap.add_argument("--elements", type=int, default=1000)
    ap.add_argument("--pipeline", type=int, default=512)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--six-types", default=None, help="six-types binary (default: the release build)")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out", "e2e"))
    args = ap.parse_args()
    six = args.six_types or find_binary("six-types")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.abspath(os.path.join(args.out, f"{stamp}-redis-aof"))
    os.makedirs(out)
    work = tempfile.mkdtemp(prefix="redis-aof-")
    el = min(args.elements, args.count)
    shape = [{"strings": args.count, "string_start": 0, "collections": args.count // el, "collection_start": 0,
              "elements": el}]
    pport, rport = free_port(), free_port()
    for d in ("primary", "replica"):
        os.makedirs(os.path.join(work, d))
    common = ["--bind", "127.0.0.1", "--save", "", "--daemonize", "no", "--logfile", ""]
    primary = Unit("redis-primary", [args.redis_server, "--port", str(pport), "--dir", os.path.join(work, "primary"),
                                     "--appendonly", "yes", "--appendfsync", "everysec", *common], pport, out,
                   strict=False)
    replica = Unit("redis-replica", [args.redis_server, "--port", str(rport), "--dir", os.path.join(work, "replica"),
                                     "--replicaof", "127.0.0.1", str(pport), *common], rport, out,
                   strict=False)
    ds = Dataset(six, out, args.pipeline, FIVE)
    res = {"count": args.count, "types": FIVE, "redis": os.popen(f"{args.redis_server} --version").read().strip()}
    ok = False
    try:
        def up(u):
            def probe():
                u.check_alive()
                return listening(u.port) and info(u.port).get("loading") == "0"
            return wait_until(f"{u.name} loaded", probe, 1200)[1]

        primary.start()
        up(primary)
        replica.start()
        up(replica)
        res["load"] = ds.run(pport, "load", shape, "load")
        target = info(pport)["master_repl_offset"]
        wait_until("replica at the primary's offset", lambda: info(rport).get("slave_repl_offset") == target, 600)
        ip = info(pport)
        res["before_kill"] = {k: ip.get(k) for k in ("used_memory", "used_memory_rss", "aof_current_size",
                                                     "aof_base_size", "aof_rewrites", "master_repl_offset")}
        res["before_kill"]["rss"] = rss_bytes(primary.proc.pid)
        primary.kill()
        res["verify_replica_primary_down"] = ds.run(rport, "verify", shape, "replica-primary-down")
        primary.start()
        up(primary)
        res["primary_restart_until_ready_s"] = round(now() - primary.spawned_at, 3)
        log = open(primary.logs[-1], errors="replace").read()
        res["aof_load_log"] = re.findall(r"DB loaded from .*?: [\d.]+ seconds", log)
        total = re.findall(r"DB loaded from append only file: ([\d.]+) seconds", log)
        res["aof_load_s"] = float(total[-1]) if total else None
        res["verify_primary_restarted"] = ds.run(pport, "verify", shape, "primary-restarted")
        ip = info(pport)
        res["after_restart"] = {k: ip.get(k) for k in ("used_memory", "used_memory_rss")}
        ok = all(r["ok"] for r in ds.results)
        print(f"redis primary back after {res['primary_restart_until_ready_s']} s (AOF load {res['aof_load_s']} s"
              f", {res['aof_load_log']}); every value there: {ok}", flush=True)
    except Failure as e:
        res["error"] = str(e)
        print(f"FAILED: {e}", flush=True)
    finally:
        for u in (replica, primary):
            u.stop()
        shutil.rmtree(work, ignore_errors=True)
    res["ok"] = ok
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(res, f, indent=2)
    print(f"results in {out}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
