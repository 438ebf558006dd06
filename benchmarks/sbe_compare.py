#!/usr/bin/env python3
"""Throughput of the same writes over goblin-core's SBE listener and over RESP.

One goblin-core serves both (--port and --sbe-port); benchmarks/sbe-load sends the same
pipelined commands (SET, HSET, ZADD, SADD; keys cycling through --keys) with the same number of
connections and pipeline depth over each protocol, reading and counting every reply. Each
command runs --rounds times per protocol, alternating which goes first; the table reports the
median ops/s and the SBE/RESP ratio. Writes benchmarks/out/sbe_compare.md.

    cargo build --release -p goblin-core -p sbe-load
    python3 benchmarks/sbe_compare.py [--conns 4] [--pipeline 64] [--seconds 5] [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess

from netutil import ROOT, find_binary, free_port, wait_port

COMMANDS = ["set", "hset", "zadd", "sadd"]


def run(load, port, proto, command, a):
    out = subprocess.run([load, "--port", str(port), "--proto", proto, "--command", command,
                          "--conns", str(a.conns), "--pipeline", str(a.pipeline),
                          "--seconds", str(a.seconds), "--value-size", str(a.value_size),
                          "--keys", str(a.keys)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["ops_per_sec"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conns", type=int, default=4)
    p.add_argument("--pipeline", type=int, default=64)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--value-size", type=int, default=16)
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--commands", default=",".join(COMMANDS))
    a = p.parse_args()
    goblin, load = find_binary("goblin-core"), find_binary("sbe-load")
    port, sport = free_port(), free_port()
    server = subprocess.Popen([goblin, "--port", str(port), "--sbe-port", str(sport), "--save", "",
                               "--loglevel", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = []
    try:
        wait_port(port)
        wait_port(sport)
        for command in a.commands.split(","):
            res = {"resp": [], "sbe": []}
            for r in range(a.rounds):
                order = ["resp", "sbe"] if r % 2 == 0 else ["sbe", "resp"]
                for proto in order:
                    res[proto].append(run(load, sport if proto == "sbe" else port, proto, command, a))
            resp, sbe = statistics.median(res["resp"]), statistics.median(res["sbe"])
            rows.append((command.upper(), resp, sbe, sbe / resp))
            print(f"{command.upper():5} resp {resp:12,.0f} ops/s   sbe {sbe:12,.0f} ops/s   "
                  f"ratio {sbe / resp:.2f}  (rounds: resp {res['resp']}, sbe {res['sbe']})", flush=True)
    finally:
        server.terminate()
        server.wait()
    lines = [f"{a.conns} connections, pipeline {a.pipeline}, {a.seconds:g} s per run, median of "
             f"{a.rounds} rounds, {a.value_size}-byte values, {a.keys} keys", "",
             "| command | RESP ops/s | SBE ops/s | SBE / RESP |", "|---|---:|---:|---:|"]
    lines += [f"| {c} | {r:,.0f} | {s:,.0f} | {x:.2f} |" for c, r, s, x in rows]
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    path = os.path.join(ROOT, "benchmarks", "out", "sbe_compare.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
