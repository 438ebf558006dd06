#!/usr/bin/env python3
"""Runs Redis's own Tcl test suite (7.0.15), as an external server with --singledb, against
goblin-core and against redis-server with the same runner options, one fresh server per unit, and
writes per-unit pass/fail counts side by side.

    python3 benchmarks/redis-tcl/run.py [--goblin-bin PATH] [--suite DIR] [--units a,b] [--jobs 1]

Evidence goes to benchmarks/out/redis-tcl/<timestamp>/: summary.md (the table, totals, failing
test names), results.json, and per unit and server the runner's output (<server>/<unit>.log) and
the server's own output (<server>/<unit>.server.log). The suite tree is not shipped: see README.md
or the message printed when it is missing. Stdlib only.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import netutil  # noqa: E402  (benchmarks/netutil.py)

DEFAULT_SUITE = os.path.expanduser("~/.cache/redis-tests-7.0.15")
REDIS_TAG = "7.0.15"

DEFAULT_UNITS = [
    "type/list", "type/list-2", "type/list-3", "type/hash", "type/set", "type/zset",
    "type/string", "type/incr", "type/stream", "type/stream-cgroups",
    "keyspace", "expire", "protocol", "multi", "scripting", "functions", "pubsub",
    "pubsubshard", "introspection", "introspection-2", "sort", "dump", "bitops", "other", "scan",
    "info", "latency-monitor", "slowlog", "tracking", "pause",
]

# Tests an external server cannot take part in (replication spawns servers of its own) and the
# long randomized ones (as Redis's own external-server CI job does: --tags -slow).
DEFAULT_TAGS = "-needs:repl -slow"

LENIENT_PATCHES_NEWER = [
    ("\n    r function flush\n", "\n    catch {r function flush}\n"),
    ("    foreach {param val} $overrides {\n        r config set $param $val\n",
     "    foreach {param val} $overrides {\n        catch {r config set $param $val}\n"),
]

# --lenient-setup: the setup that run_external_server_test (support/server.tcl) does before and
# after each start_server block, outside any test; each call wrapped in catch.
LENIENT_PATCHES = [
    ("\n    r function flush\n", "\n    catch {r function flush}\n"),
    ("        dict set saved_config $param [lindex [r config get $param] 1]\n"
     "        r config set $param $val\n",
     "        catch {dict set saved_config $param [lindex [r config get $param] 1]}\n"
     "        catch {r config set $param $val}\n"),
    ("    dict for {param val} $saved_config {\n        r config set $param $val\n    }\n",
     "    dict for {param val} $saved_config {\n        catch {r config set $param $val}\n    }\n"),
]

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATUS = re.compile(r"^\[(ok|err|exception|skip|ignore)\]: ?(.*)$")
DONE = re.compile(r"^\[\d+/\d+ done\]: ")
IN_PROGRESS = re.compile(r"=> \(IN PROGRESS\) (.*)$")
OK_NAME = re.compile(r"^(.*) \(\d+ ms\)$")


def suite_missing_message(suite):
    return (
        f"The Redis {REDIS_TAG} Tcl suite tree is not at {suite} (no tests/test_helper.tcl there).\n"
        f"It is not part of this repository and is not downloaded by this script. Get it from a\n"
        f"clone of the Redis repository (any clone that has the tag {REDIS_TAG}):\n"
        f"    mkdir -p {suite}\n"
        f"    git --git-dir=/path/to/redis/.git archive {REDIS_TAG} tests | tar -x -C {suite}\n"
        f"or unpack the redis-{REDIS_TAG} source release and pass its root with --suite\n"
        f"(the folder that holds tests/test_helper.tcl)."
    )


def default_goblin_bin():
    for profile in ("release", "debug"):
        for d in netutil.target_dirs():
            p = os.path.join(d, profile, "goblin-core")
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


def server_cmd(kind, binary, port, workdir):
    if kind == "goblin-core":
        return [binary, "--port", str(port), "--bind", "127.0.0.1", "--enable-debug-command", "yes",
                "--enable-protected-configs", "yes"]
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", workdir, "--enable-debug-command", "yes", "--daemonize", "no",
            "--logfile", ""]


def parse_log(text):
    """Counts and names from the runner's output. An [err] entry carries the lines after it (the
    failure message, the Tcl stack under --durable) up to the next status line."""
    res = {"ok": [], "err": [], "exception": [], "skip": [], "ignore": [], "done": False}
    cur = None
    for raw in text.splitlines():
        line = ANSI.sub("", raw)
        m = STATUS.match(line)
        if m:
            status, data = m.groups()
            if status == "ok":
                mm = OK_NAME.match(data)
                res["ok"].append(mm.group(1) if mm else data)
                cur = None
            elif status in ("err", "exception"):
                cur = {"name": data, "detail": []}
                res[status].append(cur)
            else:
                res[status].append(data)
                cur = None
            continue
        if line.startswith("[TIMEOUT]"):
            res["runner_timeout"] = True
            cur = None
            continue
        m = IN_PROGRESS.search(line)
        if m and res.get("runner_timeout"):
            res["in_progress"] = m.group(1)
            continue
        if DONE.match(line):
            res["done"] = True
            cur = None
            continue
        if line.startswith("[") or line.startswith("Killing still running") or \
                line.startswith("Cleanup:") or line.startswith("All tests passed") or \
                line.startswith("!!! WARNING") or line.startswith("Testing "):
            cur = None
            continue
        if cur is not None and len(cur["detail"]) < 40:
            cur["detail"].append(line)
    return res


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def spawn_root(kind, binary, suite_run, without_aof=False):
    """A folder laid out as a Redis source tree for the runner's own servers (--spawned):
    tests/ (a copy of the suite's) and src/redis-server, which for goblin-core is a shim that
    runs it with its log (standard error) in the runner's stdout file, where the runner looks
    for the PID, "Server initialized" and "Ready to accept" lines; src/ also holds Debian's
    redis-cli and redis-benchmark, which some tests run. `without_aof`: see --without-aof."""
    root = tempfile.mkdtemp(prefix=f"redis-tcl-root-{kind}-")
    shutil.copytree(os.path.join(suite_run, "tests"), os.path.join(root, "tests"),
                    ignore=shutil.ignore_patterns("tmp"))
    os.makedirs(os.path.join(root, "tests", "tmp"))
    src = os.path.join(root, "src")
    os.makedirs(src)
    server = os.path.join(src, "redis-server")
    if kind == "goblin-core":
        with open(server, "w") as f:
            f.write("#!/bin/sh\n")
            if without_aof:
                # goblin-core refuses `appendonly yes` (its write history is the Kafka journal),
                # and the runner then waits two minutes per block for a server that never
                # comes: the block runs on a server without the line instead, and the tests
                # that look at an append-only file fail on their own.
                f.write('[ -f "$1" ] && sed -i "/^appendonly yes$/d" "$1"\n')
            f.write(f"exec {binary} \"$@\" 2>&1\n")
        os.chmod(server, 0o755)
    else:
        os.symlink(binary, server)
    for tool in ("redis-cli", "redis-benchmark", "redis-check-aof", "redis-check-rdb"):
        path = shutil.which(tool)
        if path:
            os.symlink(path, os.path.join(src, tool))
    return root


def unit_path(unit):
    """A unit's path under tests/: `integration/...` as given (replication, failover: they
    start their own servers, so only with --spawned), anything else under unit/."""
    return unit if unit.startswith("integration/") else f"unit/{unit}"


def run_runner(unit, args, cwd, log_path, first):
    """test_helper.tcl on one unit (`first`: the runner's arguments before its common ones),
    its output into log_path, bounded by --unit-timeout. Returns (state, note)."""
    cmd = first + ["--durable", "--clients", "1", "--timeout", str(args.test_timeout),
                   "--single", unit_path(unit)]
    if args.tags:
        cmd += ["--tags", args.tags]
    cmd += args.runner_arg or []
    with open(log_path, "wb") as logf:
        logf.write(("$ " + " ".join(cmd) + "\n").encode())
        logf.flush()
        runner = subprocess.Popen(cmd, cwd=cwd, stdout=logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            return "completed", f"runner exit {runner.wait(timeout=args.unit_timeout)}"
        except subprocess.TimeoutExpired:
            kill_group(runner)
            runner.wait()
            return "timed out", f"killed after {args.unit_timeout} s"


def run_spawned(kind, binary, unit, args, outdir):
    """One unit with the runner starting its own servers from their configuration files (the
    tests an external server cannot take part in run too)."""
    sdir = os.path.join(outdir, kind)
    os.makedirs(sdir, exist_ok=True)
    log_path = os.path.join(sdir, unit.replace("/", "_") + ".log")
    t0 = time.time()
    state, note = run_runner(unit, args, args.roots[kind], log_path, ["tclsh", "tests/test_helper.tcl"])
    with open(log_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return finish(kind, unit, state, note, text, t0, None, log_path)


def run_unit(kind, binary, unit, args, outdir):
    """One unit against one fresh server. Returns a dict of counts and state."""
    if args.spawned:
        return run_spawned(kind, binary, unit, args, outdir)
    sdir = os.path.join(outdir, kind)
    os.makedirs(sdir, exist_ok=True)
    stem = unit.replace("/", "_")
    log_path = os.path.join(sdir, stem + ".log")
    srv_log_path = os.path.join(sdir, stem + ".server.log")
    workdir = tempfile.mkdtemp(prefix=f"redis-tcl-{kind}-")
    port = netutil.free_port()
    state = "completed"
    note = ""
    t0 = time.time()
    with open(srv_log_path, "wb") as srv_log:
        srv = subprocess.Popen(server_cmd(kind, binary, port, workdir), cwd=workdir,
                               stdout=srv_log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            try:
                netutil.wait_port(port, timeout=30)
            except RuntimeError as e:
                state = "server did not start"
                note = str(e)
                with open(log_path, "w") as f:
                    f.write(note + "\n")
                return finish(kind, unit, state, note, "", t0, srv, log_path)
            first = ["tclsh", "tests/test_helper.tcl", "--host", "127.0.0.1", "--port", str(port)]
            if not args.multidb:
                first += ["--singledb"]
            state, note = run_runner(unit, args, args.suite_run, log_path, first)
            if srv.poll() is not None:
                state = "server crashed" if state == "completed" else state + ", server crashed"
                note += f"; server exit status {srv.returncode}"
        finally:
            if srv.poll() is None:
                kill_group(srv)
                srv.wait()
            shutil.rmtree(workdir, ignore_errors=True)
    with open(log_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return finish(kind, unit, state, note, text, t0, srv, log_path)


def finish(kind, unit, state, note, text, t0, srv, log_path):
    p = parse_log(text)
    if state == "completed" and p["exception"]:
        state = "aborted (exception)"
    elif state == "completed" and p.get("runner_timeout"):
        state = "hung (runner timeout)"
        note += f"; no progress for --test-timeout s in: {p.get('in_progress', '?')}"
    elif state == "completed" and not p["done"]:
        state = "incomplete"
    return {
        "server": kind, "unit": unit, "state": state, "note": note,
        "seconds": round(time.time() - t0, 1),
        "passed": len(p["ok"]), "failed": len(p["err"]), "errors": len(p["exception"]),
        "skipped": len(p["skip"]) + len(p["ignore"]),
        "ok_names": p["ok"], "err": p["err"], "exception": p["exception"],
        "log": os.path.relpath(log_path, ROOT),
    }


def first_line(entry):
    """The failure in one line: the test name and the first message line."""
    name = entry["name"]
    name = re.sub(r" in tests/unit/\S+\.tcl$", "", name)
    lines = [l.strip() for l in entry["detail"] if l.strip()]
    msg = lines[0] if lines else ""
    # Under --durable the runner cuts the first 10 characters of a non-assertion error (it
    # expects an "assertion:" prefix); the Tcl stack's first line has the whole message.
    if len(lines) > 1 and lines[1].endswith(msg) and len(lines[1]) > len(msg):
        msg = lines[1]
    return name, msg


def ratio(g, r):
    if r == 0:
        return "n/a" if g == 0 else "inf"
    return f"{100.0 * g / r:.0f}%"


def write_summary(outdir, results, servers, meta):
    by = {(r["server"], r["unit"]): r for r in results}
    units = meta["units"]
    lines = [f"# Redis {REDIS_TAG} Tcl suite, external server", ""]
    for k, v in meta.items():
        if k != "units":
            lines.append(f"- {k}: `{v}`")
    lines.append("")
    hdr = ["unit"]
    for s in servers:
        hdr += [f"{s} pass", "fail", "exc", "state"]
    if len(servers) == 2:
        hdr.append("pass ratio")
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "---|" * len(hdr))
    tot = {s: [0, 0, 0] for s in servers}
    table_txt = []
    for u in units:
        row = [u]
        for s in servers:
            r = by.get((s, u))
            if r is None:
                row += ["-", "-", "-", "not run"]
                continue
            row += [str(r["passed"]), str(r["failed"]), str(r["errors"]), r["state"]]
            tot[s][0] += r["passed"]
            tot[s][1] += r["failed"]
            tot[s][2] += r["errors"]
        if len(servers) == 2:
            g, rr = by.get((servers[0], u)), by.get((servers[1], u))
            row.append(ratio(g["passed"], rr["passed"]) if g and rr else "-")
        lines.append("| " + " | ".join(row) + " |")
        table_txt.append(row)
    row = ["**total**"]
    for s in servers:
        row += [f"**{tot[s][0]}**", str(tot[s][1]), str(tot[s][2]), ""]
    if len(servers) == 2:
        row.append(f"**{ratio(tot[servers[0]][0], tot[servers[1]][0])}**")
    lines.append("| " + " | ".join(row) + " |")
    table_txt.append([c.strip("*") for c in row])
    lines.append("")
    lines.append("pass/fail/exc: the runner's [ok], [err] and [exception] lines (an [exception] ends "
                 "the unit); skipped tests (tags, --singledb, external:skip) are not counted. "
                 "pass ratio: goblin-core passes / redis-server passes.")
    if len(servers) == 2:
        lines += ["", f"## Tests that pass on {servers[1]} but not on {servers[0]}", ""]
        for u in units:
            g, rr = by.get((servers[0], u)), by.get((servers[1], u))
            if not g or not rr:
                continue
            missing = [n for n in rr["ok_names"] if n not in set(g["ok_names"])]
            if not missing:
                continue
            errs = {}
            for e in g["err"] + g["exception"]:
                n, m = first_line(e)
                errs.setdefault(n, m)
            lines.append(f"### {u} ({len(missing)})")
            for n in missing:
                m = errs.get(n)
                lines.append(f"- {n}: {m}" if m is not None else f"- {n}: (not reached)")
            extra = [n for n in errs if n not in set(rr["ok_names"])]
            for n in extra:
                lines.append(f"- [also failed on redis or block error] {n}: {errs[n]}")
            lines.append("")
    for s in servers:
        lines += ["", f"## All failures on {s}", ""]
        for u in units:
            r = by.get((s, u))
            if not r or not (r["err"] or r["exception"]):
                continue
            lines.append(f"### {u}")
            for e in r["err"] + r["exception"]:
                n, m = first_line(e)
                lines.append(f"- {n}: {m}")
            lines.append("")
    with open(os.path.join(outdir, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    return hdr, table_txt


def print_table(hdr, rows):
    widths = [max(len(str(x[i])) for x in [hdr] + rows) for i in range(len(hdr))]
    for row in [hdr] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--goblin-bin", help="goblin-core binary (default: the release, else debug, "
                    "build under $CARGO_TARGET_DIR, ./target or ~/.cache/goblin-target)")
    ap.add_argument("--redis-bin", default=shutil.which("redis-server") or "redis-server",
                    help="redis-server binary (default: the one on PATH; the suite is 7.0.15's)")
    ap.add_argument("--suite", default=DEFAULT_SUITE,
                    help=f"root of the Redis {REDIS_TAG} suite tree, the folder holding "
                    f"tests/test_helper.tcl (default {DEFAULT_SUITE})")
    ap.add_argument("--units", help="comma-separated units under tests/unit/, or integration/NAME for one under "
                    "tests/integration/ (with --spawned; default: all of "
                    + ", ".join(DEFAULT_UNITS) + ")")
    ap.add_argument("--servers", default="goblin-core,redis-server",
                    help="which servers to run, comma-separated (default both)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="units run at once (default 1; more makes timing-sensitive tests flaky)")
    ap.add_argument("--unit-timeout", type=int, default=600,
                    help="wall-clock bound of one unit in seconds; past it the unit is killed "
                    "and recorded as timed out with its counts so far (default 600)")
    ap.add_argument("--test-timeout", type=int, default=120,
                    help="the runner's own --timeout: seconds without progress before it gives up")
    ap.add_argument("--tags", default=DEFAULT_TAGS,
                    help=f"the runner's --tags (default '{DEFAULT_TAGS}')")
    ap.add_argument("--runner-arg", action="append",
                    help="one more argument for test_helper.tcl, for both servers (repeatable)")
    ap.add_argument("--lenient-setup", action="store_true",
                    help="run a temporary copy of the suite in which the setup around each "
                    "start_server block (external mode: `r function flush`, the CONFIG GET/SET "
                    "of the block's config overrides and their restore) is wrapped in catch, so "
                    "that a missing command or config parameter fails the tests that depend on "
                    "it instead of ending the whole block or unit; the same copy for both "
                    "servers (a no-op for redis-server). The --suite tree is not changed")
    ap.add_argument("--multidb", action="store_true",
                    help="run without --singledb: the suite's clients work in database 9 and "
                    "the tests that need several databases (MOVE, SWAPDB, SELECT) run too")
    ap.add_argument("--spawned", action="store_true",
                    help="let the runner start its servers itself, each from the configuration "
                    "file it writes (tests/assets/default.conf and each block's overrides), as "
                    "Redis's own CI does: the tests tagged external:skip run too (restarts, "
                    "CONFIG REWRITE, DEBUG RELOAD ...)")
    ap.add_argument("--without-aof", action="store_true",
                    help="with --spawned: start goblin-core without the `appendonly yes` line of "
                    "a block's configuration file (goblin-core refuses it, and the runner waits "
                    "two minutes for each such server); the rest of the block's tests run")
    ap.add_argument("--out", help="output folder (default benchmarks/out/redis-tcl/<timestamp>)")
    args = ap.parse_args()

    args.suite = os.path.abspath(os.path.expanduser(args.suite))
    if not os.path.isfile(os.path.join(args.suite, "tests", "test_helper.tcl")):
        sys.exit(suite_missing_message(args.suite))
    if not shutil.which("tclsh"):
        sys.exit("tclsh (Tcl 8.5 or newer) is needed to run the suite: apt-get install tcl")
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    for s in servers:
        if s not in ("goblin-core", "redis-server"):
            sys.exit(f"unknown server {s!r}: goblin-core or redis-server")
    bins = {}
    if "goblin-core" in servers:
        bins["goblin-core"] = args.goblin_bin or default_goblin_bin()
        if not bins["goblin-core"]:
            sys.exit("no goblin-core binary: pass --goblin-bin or `cargo build --release --bin "
                     "goblin-core`")
    if "redis-server" in servers:
        bins["redis-server"] = args.redis_bin
    for s, b in bins.items():
        if not (os.path.isfile(b) and os.access(b, os.X_OK)):
            sys.exit(f"{s} binary not found or not executable: {b}")
    units = [u.strip().removeprefix("unit/") for u in args.units.split(",")] if args.units \
        else list(DEFAULT_UNITS)
    for u in units:
        if not os.path.isfile(os.path.join(args.suite, "tests", unit_path(u) + ".tcl")):
            sys.exit(f"no unit {u}: tests/{unit_path(u)}.tcl is not in {args.suite}")

    patched = None
    if args.lenient_setup:
        patched = tempfile.mkdtemp(prefix="redis-tcl-suite-")
        shutil.copytree(os.path.join(args.suite, "tests"), os.path.join(patched, "tests"),
                        ignore=shutil.ignore_patterns("tmp"))
        os.makedirs(os.path.join(patched, "tests", "tmp"))
        sp = os.path.join(patched, "tests", "support", "server.tcl")
        with open(sp) as f:
            src = f.read()
        # Suites newer than 7.0 save every parameter (CONFIG GET *) and restore them under a
        # catch already; only the function flush and the overrides need wrapping there.
        patches = LENIENT_PATCHES_NEWER if "[r config get *]" in src else LENIENT_PATCHES
        for old, new in patches:
            if src.count(old) != 1:
                sys.exit(f"--lenient-setup: expected text not found once in support/server.tcl:"
                         f"\n{old}")
            src = src.replace(old, new)
        with open(sp, "w") as f:
            f.write(src)
        args.suite_run = patched
    else:
        args.suite_run = args.suite

    args.roots = {s: spawn_root(s, b, args.suite_run, args.without_aof)
                  for s, b in bins.items()} if args.spawned else {}

    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    outdir = args.out or os.path.join(ROOT, "benchmarks", "out", "redis-tcl", stamp)
    os.makedirs(outdir, exist_ok=True)

    def version(b):
        try:
            return subprocess.run([b, "--version"], capture_output=True, text=True,
                                  timeout=10).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "?"

    meta = {"started": stamp, "suite": args.suite, "tags": args.tags,
            "servers started by the runner from config files (--spawned)": bool(args.spawned),
            "lenient setup (block setup in catch)": bool(args.lenient_setup),
            "goblin-core started without `appendonly yes` (--without-aof)": bool(args.without_aof),
            "runner options": f"--host 127.0.0.1 --port P {'' if args.multidb else '--singledb '}--durable --clients 1 "
                              f"--timeout {args.test_timeout} --tags '{args.tags}' "
                              + " ".join(args.runner_arg or []),
            "unit wall-clock bound (s)": args.unit_timeout, "jobs": args.jobs, "units": units}
    for s, b in bins.items():
        meta[s] = f"{b} ({version(b)})"

    results = []
    lock = threading.Lock()
    tasks = [(s, u) for u in units for s in servers]

    def one(task):
        s, u = task
        r = run_unit(s, bins[s], u, args, outdir)
        with lock:
            results.append(r)
            print(f"{s:13} {u:22} {r['state']:22} pass {r['passed']:4} fail {r['failed']:4} "
                  f"exc {r['errors']} ({r['seconds']} s)", flush=True)
            write_summary(outdir, results, servers, meta)
        return r

    ex = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs))
    futures = [ex.submit(one, t) for t in tasks]
    try:
        for fut in futures:
            fut.result()
    except KeyboardInterrupt:
        print("interrupted: the units under way finish, the rest are dropped", file=sys.stderr)
    ex.shutdown(wait=True, cancel_futures=True)
    meta["finished"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    hdr, rows = write_summary(outdir, results, servers, meta)
    if patched:
        shutil.rmtree(patched, ignore_errors=True)
    for root in args.roots.values():
        shutil.rmtree(root, ignore_errors=True)
    print()
    print_table(hdr, rows)
    print(f"\nsummary: {os.path.join(outdir, 'summary.md')}")


if __name__ == "__main__":
    main()
