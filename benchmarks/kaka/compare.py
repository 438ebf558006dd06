#!/usr/bin/env python3
"""kaka beside another Kafka-compatible broker, in one run: tansu 0.6.0 from crates.io.

tansu is the Kafka-compatible broker the registries this project can reach offer (Apache Kafka
and Redpanda are not installable here). It is built once into ~/.cache/tansu-bin with
`cargo install tansu --version 0.6.0 --no-default-features --features dynostore,libsql`
(about 20 minutes on two cores) unless --tansu points at a binary.

Every broker runs the same kaka-bench scenarios (produce flood and paced, consume, synchronous
produce), one after another, fresh for each scenario, for --rounds rounds; the table gives the
median of each figure and the ratio kaka/peer. Brokers:
  kaka                         every ack after fdatasync (the default)
  kaka --fsync-interval-ms 5   ack after write, fdatasync at most every 5 ms
  tansu sqlite                 tansu's SQLite engine (WAL, synchronous=normal: a commit is not
                               fsynced, so an ack survives a process crash, not a power loss)
  tansu memory                 tansu's in-memory engine (nothing on disk)

Usage: python3 benchmarks/kaka/compare.py [--records N] [--rounds R]
Output: Markdown on stdout and in benchmarks/out/kaka_compare.md.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TANSU_VERSION = "0.6.0"

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from netutil import free_port, wait_port  # noqa: E402


def build_tansu(root):
    binary = os.path.join(root, "bin", "tansu")
    if os.path.exists(binary):
        return binary
    print(f"building tansu {TANSU_VERSION} into {root} (once; ~20 minutes on two cores)", flush=True)
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.expanduser("~/.cache/tansu-target"))
    subprocess.run(["cargo", "install", "tansu", "--version", TANSU_VERSION, "--no-default-features",
                    "--features", "dynostore,libsql", "--locked", "--root", root], check=True, env=env)
    return binary


class Tansu:
    """A tansu broker on a free port with a fresh store."""

    def __init__(self, binary, engine):
        self.dir = tempfile.mkdtemp(prefix="tansu-")
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        # tansu resolves sqlite:// paths relative to its working directory.
        storage = "sqlite://tansu.db" if engine == "sqlite" else "memory://tansu/"
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", storage],
            cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_bench(bench, argv):
    out = subprocess.run([bench, *argv], capture_output=True, text=True, timeout=1800)
    rows = [l for l in out.stdout.splitlines()
            if l.startswith("| ") and not l.startswith("| broker") and not l.startswith("| ---")]
    if out.returncode != 0:
        rows.append(f"| ? | driver failed | {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode} |")
    return rows


def figures(rows):
    """(scenario text without the broker's name) -> {metric: value} from kaka-bench rows."""
    result = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) < 3:
            continue
        scenario, text = cells[1], cells[2]
        m = {}
        if (r := re.search(r"([\d.]+) records/s", text)):
            m["records/s"] = float(r.group(1))
        for name in ("p50", "p99"):
            if (r := re.search(rf"{name} ([\d.]+) ms", text)):
                m[f"{name} ms"] = float(r.group(1))
        if text.startswith("failed"):
            m["failed"] = text
        result[scenario] = m
    return result


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/goblin-target"))
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tansu", default=None, help="tansu binary (default: build into ~/.cache/tansu-bin)")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "out"))
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-p", "kaka", "--bins", "--examples"], check=True, cwd=ROOT,
                   env=dict(os.environ, CARGO_TARGET_DIR=target))
    kaka = os.path.join(target, "release", "kaka")
    bench = os.path.join(target, "release", "examples", "kaka-bench")
    tansu = args.tansu or build_tansu(os.path.expanduser("~/.cache/tansu-bin"))

    brokers = ["kaka", "kaka --fsync-interval-ms 5", "tansu sqlite", "tansu memory"]
    scenarios = ["produce,consume", "sync"]
    raw_rows = []
    collected = {b: {} for b in brokers}  # broker -> scenario -> metric -> [values]
    for rnd in range(args.rounds):
        for scenario in scenarios:
            for broker in brokers:
                common = ["--scenario", scenario, "--records", str(args.records), "--name", broker]
                peer = None
                if broker.startswith("kaka"):
                    extra = ["--broker-arg", "--fsync-interval-ms=5"] if "fsync" in broker else []
                    rows = run_bench(bench, ["--kaka", kaka, *extra, *common])
                else:
                    peer = Tansu(tansu, broker.split()[1])
                    try:
                        rows = run_bench(bench, ["--bootstrap", f"127.0.0.1:{peer.port}", *common])
                    finally:
                        peer.stop()
                rows = [r for r in rows if not r.startswith("| (disk)")]
                print("\n".join(rows), flush=True)
                raw_rows += rows
                for sc, m in figures(rows).items():
                    for k, v in m.items():
                        collected[broker].setdefault(sc, {}).setdefault(k, []).append(v)

    lines = [f"kaka-bench, {args.records:,} records, median of {args.rounds} rounds; brokers run one"
             " after another on the same machine, each fresh per scenario.", "",
             "| scenario | metric | " + " | ".join(brokers) + " | kaka / tansu sqlite | kaka / tansu memory |",
             "|---|---|" + "---|" * (len(brokers) + 2)]
    for sc in collected["kaka"]:
        for metric in collected["kaka"][sc]:
            if metric == "failed":
                continue
            vals = []
            for b in brokers:
                m = collected[b].get(sc, {})
                if metric in m:
                    vals.append(median(m[metric]))
                elif "failed" in m:
                    vals.append(m["failed"][0])
                else:
                    vals.append(None)
            fmt = lambda v: "n/a" if v is None else (v if isinstance(v, str) else f"{v:,.0f}" if metric == "records/s" else f"{v:.3f}")
            ratio = lambda a, b: f"{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) and b > 0 else "n/a"
            lines.append(f"| {sc} | {metric} | " + " | ".join(fmt(v) for v in vals) +
                         f" | {ratio(vals[0], vals[2])} | {ratio(vals[0], vals[3])} |")
    text = "\n".join(lines)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "kaka_compare.md"), "w") as f:
        f.write(text + "\n\nRaw rows:\n\n| broker | scenario | result |\n| --- | --- | --- |\n" + "\n".join(raw_rows) + "\n")
    print(text)


if __name__ == "__main__":
    main()
