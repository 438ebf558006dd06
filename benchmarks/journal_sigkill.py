#!/usr/bin/env python3
"""What a SIGKILL of a journaling primary costs, per --kafka-ack-mode.

For each mode (broker, queued, then queued with a WAITAOF fence), --rounds times: --clients threads each INCR their own
counter in pipelines of --pipeline while goblin-core journals to kaka; after --flood seconds the
primary is SIGKILLed and restarted from the same command line (snapshot + Kafka). Each client
knows the last value INCR answered it (acknowledged) and how many INCRs it sent; after the
restart its counter must be:

  broker: acknowledged <= counter <= sent       (nothing acknowledged lost, nothing doubled)
  queued: counter <= sent; acknowledged - counter (if positive) is what the crash lost.
  queued+waitaof: each pipeline is followed by WAITAOF 1 0 0, and an INCR counts as
          acknowledged only once that fence answered [1, 0]: as broker, nothing lost.

Counters continue across rounds, so a record applied twice in any round shows as counter >
sent. Writes the table to benchmarks/out/journal_sigkill.md.

Usage:
  cargo build --release --bin goblin-core --bin kaka
  python3 benchmarks/journal_sigkill.py [--rounds 20] [--clients 8] [--flood 1.0]
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netutil import command, find_binary, free_port, wait_port  # noqa: E402


def target(name):
    return find_binary(name)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb")


class Client(threading.Thread):
    """INCRs its counter in pipelines until the server dies; remembers sent and acknowledged."""

    def __init__(self, port, key, pipeline, sent, acked, fence=False):
        super().__init__(daemon=True)
        self.port, self.key, self.pipeline = port, key, pipeline
        self.sent, self.acked, self.fence = sent, acked, fence

    def run(self):
        try:
            s, f = connect(self.port)
            batch = command("INCR", self.key) * self.pipeline
            if self.fence:
                batch += command("WAITAOF", 1, 0, 0)
            while True:
                s.sendall(batch)
                self.sent += self.pipeline
                answered = self.acked
                for _ in range(self.pipeline):
                    line = f.readline()
                    if not line.startswith(b":"):
                        return
                    answered = max(answered, int(line[1:-2]))
                if self.fence and [f.readline() for _ in range(3)] != [b"*2\r\n", b":1\r\n", b":0\r\n"]:
                    return
                self.acked = answered
        except (OSError, ValueError):
            return


def get(port, key):
    s, f = connect(port)
    s.sendall(command("GET", key))
    line = f.readline()
    if line.startswith(b"$-1"):
        return 0
    return int(f.readline()[:-2])


MODES = ("broker", "queued", "queued+waitaof")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--pipeline", type=int, default=32)
    ap.add_argument("--flood", type=float, default=1.0)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="sigkill-")
    kport = free_port()
    kaka = subprocess.Popen([target("kaka"), "--dir", os.path.join(work, "kaka"), "--listen", f"127.0.0.1:{kport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(kport)
    rows = []
    failed = False
    try:
        for mode in MODES:
            port = free_port()
            fence = mode == "queued+waitaof"
            name = mode.replace("+", "-")
            argv = [target("goblin-core"), "--port", str(port), "--load", os.path.join(work, f"{name}.gcsn"),
                    "--kafka", f"kafka://127.0.0.1:{kport}/sigkill-{name}",
                    "--kafka-ack-mode", mode.split("+")[0]]
            state = {f"c{i}": (0, 0) for i in range(args.clients)}  # key -> (sent, acked)
            for rnd in range(args.rounds):
                server = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(work, f"{name}-{rnd}.log"), "w"))
                wait_port(port, timeout=120)
                # Recovery check for the previous round's crash.
                clients = [Client(port, k, args.pipeline, *state[k], fence=fence) for k in state]
                acked_before = sum(a for _, a in state.values())
                for c in clients:
                    c.start()
                time.sleep(args.flood)
                server.send_signal(signal.SIGKILL)
                server.wait()
                for c in clients:
                    c.join(timeout=10)
                state = {c.key: (c.sent, c.acked) for c in clients}
                acked_round = sum(c.acked for c in clients) - acked_before
                server = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(work, f"{name}-{rnd}-restart.log"), "w"))
                wait_port(port, timeout=120)
                lost = doubled = 0
                for k, (sent, acked) in state.items():
                    v = get(port, k)
                    lost += max(0, acked - v)
                    doubled += max(0, v - sent)
                    # The next round continues from what the server holds.
                    state[k] = (v if v < sent else sent, min(acked, v))
                server.send_signal(signal.SIGKILL)
                server.wait()
                ok = doubled == 0 and (mode == "queued" or lost == 0)
                failed |= not ok
                rows.append((mode, rnd + 1, acked_round, lost, doubled, ok))
                print(f"{mode} round {rnd + 1}: acknowledged {acked_round}, lost {lost}, doubled {doubled}"
                      + ("" if ok else "  <-- FAIL"), flush=True)
    finally:
        kaka.kill()
        kaka.wait()
    lines = [f"## SIGKILL of a journaling primary: {args.rounds} rounds per ack mode", "",
             f"{args.clients} clients, INCR pipelines of {args.pipeline}, SIGKILL after {args.flood} s of flood, "
             "restart from the same command line (snapshot + kaka).", "",
             "| mode | rounds | acknowledged INCRs (total) | lost | applied twice | every round as promised |",
             "|---|---|---|---|---|---|"]
    for mode in MODES:
        r = [x for x in rows if x[0] == mode]
        lines.append(f"| {mode} | {len(r)} | {sum(x[2] for x in r):,} | {sum(x[3] for x in r):,} | "
                     f"{sum(x[4] for x in r)} | {'yes' if all(x[5] for x in r) else 'NO'} |")
    lost_rounds = [x[3] for x in rows if x[0] == "queued"]
    lines += ["", f"queued: lost per round min {min(lost_rounds)}, max {max(lost_rounds)}, "
                  f"mean {sum(lost_rounds) / len(lost_rounds):.0f} acknowledged INCRs."]
    os.makedirs(os.path.join(ROOT, "benchmarks", "out"), exist_ok=True)
    with open(os.path.join(ROOT, "benchmarks", "out", "journal_sigkill.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
