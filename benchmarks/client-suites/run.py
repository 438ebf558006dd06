#!/usr/bin/env python3
"""Run popular Redis client libraries' OWN test suites against redis-server and goblin-core.

For each library the test tree is fetched (or reused) under ~/.cache/client-suites/<lib>, then the
suite is run twice -- once against a fresh redis-server, once against a fresh goblin-core -- each
inside its own network namespace (`unshare -n`), so the server can listen on the port the suite
expects by default (6379) without colliding with anything else on the machine.

Output: benchmarks/out/client-suites/<timestamp>/
    summary.md                       counts table + goblin-core failures (among Redis-passing tests)
    <lib>/<server>.log               raw suite output
    <lib>/<server>.results.json      {test id: [outcome, message]}
    <lib>/<server>.server.log        server stdout/stderr

Stdlib only.  See README.md beside this file.
"""

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CACHE = os.path.expanduser("~/.cache/client-suites")
MIRROR = "/work/.mirror"
DEFAULT_GOBLIN = "/tmp/goblin-tcl/goblin-core-debug-new"
PORT = 6379  # inside the private network namespace

# ----------------------------------------------------------------------------------------------
# helpers


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), check=True, **kw)


def git_dir(slug):
    return os.path.join(MIRROR, slug.replace("/", "+"), "repo")


def pick_ref(gd, candidates):
    tags = set(subprocess.run(["git", "--git-dir", gd, "tag"], capture_output=True, text=True).stdout.split())
    for c in candidates:
        if c in tags:
            return c
    return "HEAD"


def extract(slug, dest, candidates, paths):
    """Extract `paths` of repository `slug` (bare mirror under /work/.mirror) into dest."""
    gd = git_dir(slug)
    if not os.path.isdir(gd):
        raise SystemExit(
            f"no mirror of {slug} at {gd}: bring it with the `fetch` tool (github:{slug}) or "
            f"`git clone --bare https://github.com/{slug} {gd}`")
    ref = pick_ref(gd, candidates)
    os.makedirs(dest, exist_ok=True)
    p1 = subprocess.Popen(["git", "--git-dir", gd, "archive", ref] + paths, stdout=subprocess.PIPE)
    sh(["tar", "x", "-C", dest], stdin=p1.stdout)
    p1.wait()
    with open(os.path.join(dest, ".ref"), "w") as f:
        f.write(ref + "\n")
    return ref


def read_ref(d):
    try:
        with open(os.path.join(d, ".ref")) as f:
            return f.read().strip()
    except OSError:
        return "?"


def wait_port(port, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"PING\r\n")
            if s.recv(64).startswith(b"+PONG"):
                s.close()
                return True
            s.close()
        except OSError:
            pass
        time.sleep(0.1)
    return False


def server_argv(kind, port, goblin):
    if kind == "redis":
        return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--enable-debug-command", "yes", "--daemonize", "no"]
    return [goblin, "--port", str(port), "--bind", "127.0.0.1", "--enable-debug-command", "yes",
            "--enable-protected-configs", "yes"]


# ----------------------------------------------------------------------------------------------
# libraries: prepare() makes the test tree ready, command() gives argv/cwd/env, parse() reads results


class RedisPy:
    needs_server = True
    name = "redis-py"
    slug = "redis/redis-py"

    def __init__(self):
        self.dir = os.path.join(CACHE, "redis-py")

    def version(self):
        try:
            import importlib.metadata as md
            return md.version("redis")
        except Exception:
            return "8.1.0"

    def prepare(self):
        if not os.path.isdir(os.path.join(self.dir, "tests")):
            v = self.version()
            extract(self.slug, self.dir, [f"v{v}", v], ["tests", "pyproject.toml", "dev_requirements.txt"])
        need = {"pytest_asyncio": "pytest-asyncio", "pytest_timeout": "pytest-timeout",
                "pybreaker": "pybreaker", "aiohttp": "aiohttp", "numpy": "numpy",
                "opentelemetry.sdk": "opentelemetry-sdk"}
        missing = []
        for mod, pkg in need.items():
            if subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode:
                missing.append(pkg)
        if missing:
            sh([sys.executable, "-m", "pip", "install", "-q"] + missing)

    # need docker-compose topologies (multi-db, maintenance scenarios) or Redis Stack modules
    # (bloom/json/search/timeseries/vector sets): they fail against plain redis-server 7.0 as well,
    # and the async variants retry with back-off, so running them only burns the time bound.
    IGNORE = ["tests/test_scenario", "tests/maint_notifications", "tests/test_multidb",
              "tests/test_asyncio/test_scenario", "tests/test_asyncio/test_multidb"] + [
        f"tests/{d}test_{m}.py" for d in ("", "test_asyncio/")
        for m in ("bloom", "json", "search", "timeseries", "vsets")]

    def command(self, port, outdir, kind):
        junit = os.path.join(outdir, f"{kind}.junit.xml")
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=",
                "--timeout=30", "-rN", "-v", "--continue-on-collection-errors", f"--junitxml={junit}",
                f"--redis-url=redis://127.0.0.1:{port}"]
        for i in self.IGNORE:
            argv.append(f"--ignore={i}")
        argv += ["-m", "not redismod and not onlycluster"]
        argv.append("tests")
        return argv, self.dir, dict(os.environ)

    def parse(self, outdir, kind, log):
        res = {}
        junit = os.path.join(outdir, f"{kind}.junit.xml")
        if os.path.exists(junit):
            try:
                root = ET.parse(junit).getroot()
                for tc in root.iter("testcase"):
                    tid = f"{tc.get('classname')}::{tc.get('name')}"
                    out, msg = "passed", ""
                    for child in tc:
                        if child.tag in ("failure", "error"):
                            out = "failed"
                            msg = (child.get("message") or "") + "\n" + (child.text or "")[-1500:]
                            break
                        if child.tag == "skipped":
                            out = "skipped"
                            msg = child.get("message") or ""
                    res[tid] = (out, msg)
                return res
            except ET.ParseError:
                pass
        # fallback (suite killed by the wall-clock bound): parse `-v` lines
        for m in re.finditer(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)", log, re.M):
            st = m.group(2)
            out = "passed" if st in ("PASSED", "XPASS") else "skipped" if st in ("SKIPPED", "XFAIL") else "failed"
            tid = m.group(1).replace("/", ".").replace(".py::", "::")
            res[tid] = (out, "")
        return res


class IORedis:
    needs_server = True
    name = "ioredis"
    slug = "redis/ioredis"

    def __init__(self):
        self.dir = os.path.join(CACHE, "ioredis")
        self.nodedir = os.path.join(REPO, "tests", "clients", "node")

    def version(self):
        try:
            with open(os.path.join(self.nodedir, "node_modules", "ioredis", "package.json")) as f:
                return json.load(f)["version"]
        except Exception:
            return "6.0.0"

    def prepare(self):
        if not os.path.isdir(os.path.join(self.dir, "test")):
            v = self.version()
            extract(self.slug, self.dir, [f"v{v}", v],
                    ["bin", "lib", "test", "package.json", "package-lock.json", "tsconfig.json"])
        if not os.path.isdir(os.path.join(self.dir, "node_modules", "mocha")):
            sh(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=self.dir)

    def commands(self, port, outdir, kind):
        """Its `test:js` script, but one mocha process per functional test file (per 25 files of
        test/functional/commands): an uncaught error
        in a callback (e.g. `expect` after a failed SELECT in select.ts) ends the whole mocha run,
        which would silently drop every later file from the goblin-core side."""
        env = dict(os.environ, TS_NODE_TRANSPILE_ONLY="true", NODE_ENV="test")
        groups = [["test/unit/**/*.ts"]]
        chunk = []  # the ~250 per-command files: chunks of 25 (mocha start-up is ~4 s)
        for root, _dirs, files in sorted(os.walk(os.path.join(self.dir, "test", "functional"))):
            for f in sorted(files):
                if f.endswith(".ts"):
                    rel = os.path.relpath(os.path.join(root, f), self.dir)
                    if "/commands/" in rel:
                        chunk.append(rel)
                        if len(chunk) == 25:
                            groups.append(chunk)
                            chunk = []
                    else:
                        groups.append([rel])
        if chunk:
            groups.append(chunk)
        runs = []
        for i, g in enumerate(groups):
            rep = os.path.join(outdir, f"{kind}.mocha", f"{i:03d}.json")
            runs.append((["npx", "mocha", "--no-experimental-strip-types", "--reporter", "json",
                          "--reporter-option", f"output={rep}", "test/helpers/*.ts"] + g, self.dir, env))
        os.makedirs(os.path.join(outdir, f"{kind}.mocha"), exist_ok=True)
        return runs

    def parse(self, outdir, kind, log):
        res = {}
        d = os.path.join(outdir, f"{kind}.mocha")
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                res.update(parse_mocha_json(os.path.join(d, f)))
        else:  # older single-process layout
            res = parse_mocha_json(os.path.join(outdir, f"{kind}.mocha.json"))
        return res


def parse_mocha_json(path):
    res = {}
    if not os.path.exists(path):
        return res
    try:
        with open(path) as f:
            data = json.load(f)
    except ValueError:
        return res
    for t in data.get("passes", []):
        res[t["fullTitle"]] = ("passed", "")
    for t in data.get("pending", []):
        res[t["fullTitle"]] = ("skipped", "")
    for t in data.get("failures", []):
        err = t.get("err") or {}
        res[t["fullTitle"]] = ("failed", (err.get("message") or "") + "\n" + (err.get("stack") or "")[:1200])
    return res


class NodeRedis:
    name = "node-redis"
    slug = "redis/node-redis"

    def __init__(self):
        self.dir = os.path.join(CACHE, "node-redis")
        self.nodedir = os.path.join(REPO, "tests", "clients", "node")

    def version(self):
        try:
            with open(os.path.join(self.nodedir, "node_modules", "redis", "package.json")) as f:
                return json.load(f)["version"]
        except Exception:
            return "6.3.1"

    def prepare(self):
        if not os.path.isdir(os.path.join(self.dir, "packages")):
            v = self.version()
            extract(self.slug, self.dir, [f"redis@{v}", f"v{v}"],
                    ["packages", "package.json", "package-lock.json", "tsconfig.base.json", "tsconfig.json"])
        if not os.path.isdir(os.path.join(self.dir, "node_modules", "mocha")):
            sh(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=self.dir)
        if not os.path.isdir(os.path.join(self.dir, "packages", "test-utils", "dist")):
            sh(["npx", "tsc", "--build"], cwd=self.dir)  # workspaces resolve each other via dist/

    needs_server = False  # test-utils spawns servers through `docker run`: served by server_shim.py

    def command(self, port, outdir, kind):
        rep = os.path.join(outdir, f"{kind}.mocha.json")
        env = shim_env(outdir, kind)
        # --redis-version=7.0: the reference server is 7.0.15, so newer-feature tests are gated off
        argv = ["npx", "mocha", "-r", "tsx", "--exit", "--reporter", "json", "--reporter-option",
                f"output={rep}", "./lib/**/*.spec.ts", "--", "--redis-version=7.0"]
        return argv, os.path.join(self.dir, "packages", "client"), env

    def parse(self, outdir, kind, log):
        res = parse_mocha_json(os.path.join(outdir, f"{kind}.mocha.json"))
        # cluster-topology tests run against real redis-server in both runs (see server_shim.py)
        for t in list(res):
            if re.search(r"\bcluster\.|[Cc]luster", t):
                res[t] = ("skipped", "cluster topology (real redis-server in both runs)")
        return res


class RedisRs:
    name = "redis-rs"
    slug = "redis-rs/redis-rs"

    def __init__(self):
        self.dir = os.path.join(CACHE, "redis-rs")

    def prepare(self):
        if not os.path.isdir(os.path.join(self.dir, "redis")):
            extract(self.slug, self.dir, ["redis-1.6.0"], ["."])

    needs_server = False  # its tests spawn `redis-server` from PATH: served by server_shim.py

    def command(self, port, outdir, kind):
        env = shim_env(outdir, kind)
        env["CARGO_TARGET_DIR"] = os.path.join(CACHE, "redis-rs-target")
        # default features, as `cargo test` would; --tests skips the doctests (no server involved,
        # and compiling them takes minutes)
        argv = ["cargo", "test", "-p", "redis", "--tests", "--no-fail-fast", "--", "--test-threads=1"]
        return argv, self.dir, env

    def parse(self, outdir, kind, log):
        res, unit, fails = {}, "", {}
        # failure messages: "---- name stdout ----" blocks, per binary
        for line in log.splitlines():
            m = re.match(r"\s+(Running|Doc-tests) (\S+)", line)
            if m:
                unit = os.path.basename(m.group(2)).split(" ")[0]
                unit = re.sub(r"-[0-9a-f]{16}$", "", unit)
                continue
            m = re.match(r"^test (\S+(?: - .*?)?) \.\.\. (ok|FAILED|ignored)", line)
            if m:
                st = {"ok": "passed", "FAILED": "failed", "ignored": "skipped"}[m.group(2)]
                res[f"{unit}::{m.group(1)}"] = (st, "")
        cur = None
        for line in log.splitlines():
            m = re.match(r"^---- (\S+) stdout ----", line)
            if m:
                cur = m.group(1)
                fails[cur] = ""
                continue
            if cur and (line.startswith("failures:") or line.startswith("test result")):
                cur = None
            elif cur and len(fails[cur]) < 1500 and not re.match(r"^thread '.*' .*panicked at", line):
                fails[cur] += line + "\n"
        for k, (st, _) in list(res.items()):
            name = k.split("::", 1)[1]
            if st == "failed" and name in fails:
                res[k] = (st, fails[name])
        return res


def shim_env(outdir, kind):
    """PATH with server_shim.py as `docker` and `redis-server` first."""
    wrap = os.path.join(outdir, "wrap")
    state = os.path.join(outdir, f"{kind}.servers")
    os.makedirs(wrap, exist_ok=True)
    os.makedirs(state, exist_ok=True)
    for n in ("docker", "redis-server"):
        dst = os.path.join(wrap, n)
        shutil.copy(os.path.join(HERE, "server_shim.py"), dst)
        os.chmod(dst, 0o755)
    env = dict(os.environ, CS_SERVER_KIND=kind, CS_STATE=state)
    env["PATH"] = wrap + ":" + env["PATH"]
    return env


LIBS = {c.name: c for c in (RedisPy, IORedis, NodeRedis, RedisRs)}

# ----------------------------------------------------------------------------------------------
# one run (executed inside `unshare -n`)


def inner(lib, kind, outdir, goblin, bound):
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally-blocks below
    subprocess.run(["ip", "link", "set", "lo", "up"], check=False)
    os.environ["GOBLIN_BIN"] = goblin
    srv = None
    if lib.needs_server:
        srvlog = open(os.path.join(outdir, f"{kind}.server.log"), "w")
        srv = subprocess.Popen(server_argv(kind, PORT, goblin), stdout=srvlog, stderr=subprocess.STDOUT,
                               cwd=outdir, start_new_session=True)
    try:
        if srv and not wait_port(PORT):
            print(f"{kind} server did not start", flush=True)
            return 2
        runs = (lib.commands(PORT, outdir, kind) if hasattr(lib, "commands")
                else [lib.command(PORT, outdir, kind)])
        logf = open(os.path.join(outdir, f"{kind}.log"), "w")
        t0 = time.time()
        timed_out = False
        for argv, cwd, env in runs:
            left = bound - (time.time() - t0)
            if left <= 0:
                timed_out = True
                break
            logf.write(f"### run: {' '.join(argv)}\n")
            logf.flush()
            p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            try:
                p.wait(timeout=left)
            except (subprocess.TimeoutExpired, SystemExit):
                timed_out = True
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            logf.write(f"\n### exit={p.returncode} wall={time.time() - t0:.1f}s timed_out={timed_out}\n")
            logf.flush()
            if timed_out:
                break
        logf.close()
        with open(os.path.join(outdir, f"{kind}.meta.json"), "w") as f:
            json.dump({"wall": time.time() - t0, "timed_out": timed_out, "rc": p.returncode}, f)
    finally:
        if srv:
            os.killpg(srv.pid, signal.SIGTERM)
            try:
                srv.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(srv.pid, signal.SIGKILL)
        # servers spawned through the shim (their own sessions): stop them
        state = os.path.join(outdir, f"{kind}.servers")
        if os.path.isdir(state):
            for pid in shim_pids(state):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    return 0


def shim_pids(state):
    try:
        with open(os.path.join(state, "pids")) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def run_one(lib, kind, outdir, goblin, bound):
    me = os.path.abspath(__file__)
    cmd = [sys.executable, me, "--inner", lib.name, kind, outdir, "--goblin", goblin, "--bound", str(bound)]
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"]).returncode == 0:
        cmd = ["unshare", "-n"] + cmd
    else:
        print("WARNING: unshare -n unavailable; the suite will use the host's port 6379", flush=True)
    subprocess.run(cmd)
    with open(os.path.join(outdir, f"{kind}.log"), errors="replace") as f:
        log = f.read()
    res = lib.parse(outdir, kind, log)
    with open(os.path.join(outdir, f"{kind}.results.json"), "w") as f:
        json.dump(res, f, indent=0)
    return res


# ----------------------------------------------------------------------------------------------
# classification


def classify(msg):
    """(cause, detail) from a failure message; the first line decides, the rest is a fallback."""
    head = msg.strip().split("\n", 1)[0] if msg.strip() else ""
    for text in (head, msg):
        m = re.search(r"unknown command '?`?([A-Za-z.|_-]+)`?'?(?:, with args beginning with: '?([A-Za-z-]*))?",
                      text, re.I)
        if m:
            sub = m.group(2) if m.group(1).upper() in ("CLUSTER", "CLIENT", "CONFIG", "OBJECT", "MEMORY",
                                                        "XINFO", "XGROUP", "SCRIPT", "FUNCTION") else ""
            return "missing command", (m.group(1) + (" " + sub if sub else "")).upper()
        m = re.search(r"unknown subcommand '?`?([A-Za-z._-]+)`?'?\.? *(?:Try ([A-Z]+) HELP)?", text, re.I)
        if m:
            return "missing subcommand", ((m.group(2) or "") + " " + m.group(1)).strip().upper()
        if re.search(r"DB index is out of range|invalid DB index|SELECT is not allowed", text, re.I):
            return "multiple databases (SELECT/MOVE/COPY DB n, non-zero db)", ""
        if re.search(r"ACL SETUSER modifier|NOPERM", text):
            return "ACL rules (restricted users)", ""
        if re.search(r"doesn't exist in Redis commands|COMMAND (INFO|DOCS|GETKEYS)", text):
            return "COMMAND introspection", ""
        if re.search(r"Timeout|timed out|TimeoutError|exceeded", text, re.I) and text is head:
            return "timeout / timing", ""
        if re.search(r"ConnectionError|ECONNRESET|Connection closed|ConnectionResetError|Connection refused|"
                     r"socket hang up|EPIPE", text):
            return "connection error / closed", ""
        if re.search(r"ResponseError|ReplyError|^ERR |WRONGTYPE|syntax error|\bERR\b", text):
            m = re.search(r"(?:ResponseError|ReplyError|RedisError):?\s*([^\n]{0,90})", text)
            return "error reply where Redis succeeds / differs", (m.group(1).strip() if m else text[:90])
        if text is head and re.search(r"AssertionError|assert |expected|deepEqual|deepStrictEqual|TypeError|"
                                      r"KeyError|IndexError|ValueError|panicked|Expected values|assertion", text):
            return "wrong reply / assertion", ""
    return "other", head[:90]


def summarize(results, outroot, order):
    lines = ["# Client-library test suites: redis-server vs goblin-core", "",
             f"Run at {os.path.basename(outroot)} (UTC).  'passed on goblin' counts only tests that passed "
             "against redis-server.", "",
             "| library | ref | tests run | passed on redis-server | of those, passed on goblin-core | ratio | wall redis / goblin |",
             "|---|---|---:|---:|---:|---:|---|"]
    details = []
    for name in order:
        if name not in results:
            continue
        r = results[name]
        red, gob = r["redis"], r["goblin"]
        ran = len([t for t in red if red[t][0] != "skipped"])
        rpass = [t for t in red if red[t][0] == "passed"]
        gpass = [t for t in rpass if gob.get(t, ("missing",))[0] == "passed"]
        ratio = f"{100.0 * len(gpass) / len(rpass):.1f}%" if rpass else "-"
        walls = "/".join(f"{r['meta'][k].get('wall', 0):.0f}s{' (TIMEOUT)' if r['meta'][k].get('timed_out') else ''}"
                         for k in ("redis", "goblin"))
        lines.append(f"| {name} | {r['ref']} | {ran} | {len(rpass)} | {len(gpass)} | {ratio} | {walls} |")
        groups = collections.defaultdict(list)
        for t in rpass:
            st = gob.get(t)
            if st is None:
                groups[("not run on goblin (suite killed / crashed early)", "")].append(t)
            elif st[0] == "skipped":
                groups[("skipped on goblin (version/feature gate)", "")].append(t)
            elif st[0] != "passed":
                groups[classify(st[1])].append(t)
        details.append(f"\n## {name}: goblin-core failures among Redis-passing tests "
                       f"({len(rpass) - len(gpass)})\n")
        bycause = collections.defaultdict(list)
        for (cause, sub), tests in groups.items():
            bycause[cause].append((sub, tests))
        for cause, subs in sorted(bycause.items(), key=lambda kv: -sum(len(t) for _, t in kv[1])):
            n = sum(len(t) for _, t in subs)
            details.append(f"### {cause} ({n})")
            for sub, tests in sorted(subs, key=lambda st: -len(st[1])):
                label = f"`{sub}` " if sub else ""
                details.append(f"- {label}({len(tests)}): " + ", ".join(f"`{t}`" for t in sorted(tests)[:8])
                               + (" ..." if len(tests) > 8 else ""))
            details.append("")
    text = "\n".join(lines + details) + "\n"
    with open(os.path.join(outroot, "summary.md"), "w") as f:
        f.write(text)
    # machine-readable list of all regressions with messages
    regress = {}
    for name in results:
        red, gob = results[name]["redis"], results[name]["goblin"]
        regress[name] = {t: gob.get(t, ("missing", ""))[1][:600] for t in red
                         if red[t][0] == "passed" and gob.get(t, ("missing",))[0] != "passed"}
    with open(os.path.join(outroot, "goblin_failures.json"), "w") as f:
        json.dump(regress, f, indent=1)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("libs", nargs="*", default=["redis-py", "ioredis", "node-redis", "redis-rs"],
                    help="libraries to run, in order (default: all)")
    ap.add_argument("--goblin", default=os.environ.get("GOBLIN_BIN", DEFAULT_GOBLIN))
    ap.add_argument("--bound", type=int, default=900, help="wall-clock bound per suite run, seconds")
    ap.add_argument("--out", default=None, help="output dir (default benchmarks/out/client-suites/<ts>)")
    ap.add_argument("--servers", default="redis,goblin")
    ap.add_argument("--inner", nargs=3, metavar=("LIB", "KIND", "OUTDIR"), help=argparse.SUPPRESS)
    ap.add_argument("--resummarize", action="store_true",
                    help="only re-parse the raw outputs already in --out and rebuild summary.md")
    a = ap.parse_args()
    if a.inner:
        lib, kind, outdir = a.inner
        sys.exit(inner(LIBS[lib](), kind, outdir, a.goblin, a.bound))

    ts = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    outroot = os.path.abspath(a.out or os.path.join(REPO, "benchmarks", "out", "client-suites", ts))
    os.makedirs(outroot, exist_ok=True)
    results = {}
    for name in a.libs:
        lib = LIBS[name]()
        d = os.path.join(outroot, name)
        os.makedirs(d, exist_ok=True)
        if a.resummarize:
            try:
                results[name] = {"ref": read_ref(lib.dir), "meta": {}}
                for kind in ("redis", "goblin"):  # re-parse the raw outputs
                    with open(os.path.join(d, f"{kind}.log"), errors="replace") as f:
                        results[name][kind] = lib.parse(d, kind, f.read())
                    with open(os.path.join(d, f"{kind}.results.json"), "w") as f:
                        json.dump(results[name][kind], f, indent=0)
                    mp = os.path.join(d, f"{kind}.meta.json")
                    results[name]["meta"][kind] = json.load(open(mp)) if os.path.exists(mp) else {}
            except (OSError, ValueError):
                results.pop(name, None)
            continue
        print(f"== {name}: preparing", flush=True)
        try:
            lib.prepare()
        except Exception as e:  # keep going with the other libraries
            print(f"   prepare failed: {e}", flush=True)
            continue
        ref = read_ref(lib.dir)
        results[name] = {"ref": ref, "meta": {}}
        for kind in a.servers.split(","):
            print(f"== {name}: running against {kind} (bound {a.bound}s)", flush=True)
            t0 = time.time()
            results[name][kind] = run_one(lib, kind, d, a.goblin, a.bound)
            mp = os.path.join(d, f"{kind}.meta.json")
            results[name]["meta"][kind] = json.load(open(mp)) if os.path.exists(mp) else {}
            c = collections.Counter(v[0] for v in results[name][kind].values())
            print(f"   {kind}: {dict(c)} in {time.time() - t0:.0f}s", flush=True)
        if all(k in results[name] for k in ("redis", "goblin")):
            summarize(results, outroot, a.libs)
    text = summarize(results, outroot, a.libs)
    print(text)
    print(f"written to {outroot}")


if __name__ == "__main__":
    main()
