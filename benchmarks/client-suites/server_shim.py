#!/usr/bin/env python3
"""Stand-in for `docker` (node-redis test-utils) and `redis-server` (redis-rs tests).

Installed by run.py as <outdir>/wrap/docker and <outdir>/wrap/redis-server, first in PATH.
Environment: CS_SERVER_KIND=redis|goblin, GOBLIN_BIN=<goblin-core binary>, CS_STATE=<dir>.

docker run ... -e PORT=N ... -d --network host IMAGE:TAG [server args]  -> starts a server on N,
    prints an id; runs with `-v` mounts (sentinel nodes) fail at once (cluster nodes, `--cluster-enabled yes`, are always real redis-server: goblin-core has
    no cluster mode, and node-redis spawns the cluster in a `before` hook shared with the plain-client
    tests, so a failing cluster would hide every test; run.py drops the cluster tests from the counts); docker rm -f ID -> stops it; anything else (exec, TLS, sentinel) fails.
redis-server [config file] [--flag value ...] -> exec the chosen server with the flags it knows.
Stdlib only.
"""
import os
import subprocess
import sys

KIND = os.environ.get("CS_SERVER_KIND", "redis")
GOBLIN = os.environ.get("GOBLIN_BIN", "/tmp/goblin-tcl/goblin-core-debug-new")
STATE = os.environ.get("CS_STATE", "/tmp")
# flags goblin-core accepts (with one value each)
GOBLIN_FLAGS = {"port", "bind", "unixsocket", "unixsocketperm", "maxclients", "timeout", "hz",
                "notify-keyspace-events", "maxmemory", "maxmemory-policy", "maxmemory-samples",
                "lfu-log-factor", "lfu-decay-time", "enable-debug-command", "requirepass",
                "tls-port", "tls-cert-file", "tls-key-file", "tls-ca-cert-file", "tls-auth-clients",
                "proto-max-bulk-len", "busy-reply-threshold", "enable-protected-configs", "dir",
                "dbfilename"}


def real_redis_server():
    mydir = os.path.dirname(os.path.realpath(sys.argv[0]))
    for d in os.environ.get("PATH", "").split(":"):
        p = os.path.join(d, "redis-server")
        if (os.path.isfile(p) and os.access(p, os.X_OK)
                and os.path.dirname(os.path.realpath(p)) != mydir):
            return p
    return "/usr/bin/redis-server"


def parse_redis_args(args):
    """redis-server style args (optionally a config file first) -> list of (name, [values])."""
    opts = []
    if args and not args[0].startswith("--"):
        try:
            with open(args[0]) as f:
                for line in f:
                    parts = line.strip().split()
                    if parts and not parts[0].startswith("#"):
                        opts.append((parts[0].lower(), parts[1:]))
        except OSError:
            pass
        args = args[1:]
    i = 0
    while i < len(args):
        if args[i].startswith("--"):
            name, vals = args[i][2:].lower(), []
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                vals.append(args[i])
                i += 1
            opts.append((name, vals))
        else:
            i += 1
    return opts


def goblin_argv(opts):
    argv = [GOBLIN, "--enable-debug-command", "yes"]
    dropped = []
    for name, vals in opts:
        if name == "port" and vals:
            argv += ["--port", vals[0]]
        elif name == "bind" and vals:
            argv += ["--bind"] + [v for v in vals if v not in ("-::*",)]
        elif name == "unixsocket" and vals:
            argv += ["--unixsocket", vals[0]]
        elif name in GOBLIN_FLAGS and name != "enable-debug-command" and len(vals) == 1:
            argv += [f"--{name}", vals[0]]
        else:
            dropped.append(name)
    if dropped:
        sys.stderr.write(f"[shim] goblin-core: ignoring redis-server options {dropped}\n")
    # As for redis-server below: no dump.rdb saved at exit into the suite's folder, which
    # the next server started there would load.
    if "--save" not in argv:
        argv += ["--save", ""]
    return argv


def redis_argv(opts):
    argv = [real_redis_server()]
    for name, vals in opts:
        argv += [f"--{name}"] + (vals or [""])
    if "--save" not in argv:
        argv += ["--save", ""]
    return argv


def main_redis_server(args):
    opts = parse_redis_args(args)
    if "--version" in args or "-v" in args:
        os.execv(real_redis_server(), [real_redis_server(), "--version"])
    cluster = any(n == "cluster-enabled" and v[:1] == ["yes"] for n, v in opts)
    if KIND == "goblin" and not cluster:
        argv = goblin_argv(opts)
        logfile = [v[0] for n, v in opts if n == "logfile" and v]
        if logfile:  # goblin-core has no --logfile: send its output there
            fd = os.open(logfile[0], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
    else:
        argv = redis_argv(opts)
    os.execv(argv[0], argv)


def main_docker(args):
    if not args:
        return 1
    if args[0] == "run":
        if "-v" in args[:args.index("--network") if "--network" in args else len(args)]:
            # sentinel nodes: config mounted into the container; not emulated -> fail fast
            sys.stderr.write("shim: docker run with volume mounts (sentinel) not supported\n")
            return 1
        port, rest, i = None, [], 1
        image_seen = False
        while i < len(args):
            a = args[i]
            if not image_seen:
                if a == "-e" and args[i + 1].startswith("PORT="):
                    port = args[i + 1].split("=", 1)[1]
                    i += 2
                    continue
                if a in ("-e", "--network", "-v", "--name", "-p"):
                    i += 2
                    continue
                if a.startswith("-"):
                    i += 1
                    continue
                image_seen = True
                i += 1
                continue
            rest.append(a)
            i += 1
        if port is None:
            sys.stderr.write("shim: no PORT\n")
            return 1
        opts = [(n, v) for n, v in parse_redis_args(rest) if n not in ("port",)]
        opts.append(("port", [port]))
        cluster = any(n == "cluster-enabled" and v[:1] == ["yes"] for n, v in opts)
        if KIND == "goblin" and not cluster:
            argv = goblin_argv(opts)
        else:
            extra = [("enable-debug-command", ["yes"])]
            if cluster:  # nodes share the state dir: one cluster config file each
                extra.append(("cluster-config-file", [f"nodes-{port}.conf"]))
            argv = redis_argv(opts + extra)
        log = open(os.path.join(STATE, f"server-{port}.log"), "ab")
        log.write(f"[shim] docker {args!r}\n[shim] -> {argv!r}\n".encode())
        log.flush()
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                             cwd=STATE)
        with open(os.path.join(STATE, "pids"), "a") as f:
            f.write(f"{p.pid}\n")
        print(f"shim{p.pid}")
        return 0
    if args[0] in ("rm", "stop", "kill"):
        for a in args[1:]:
            if a.startswith("shim"):
                try:
                    os.kill(int(a[4:]), 15)
                except (OSError, ValueError):
                    pass
        return 0
    sys.stderr.write(f"shim: docker {' '.join(args[:3])} not supported\n")
    return 1


if __name__ == "__main__":
    prog = os.path.basename(sys.argv[0])
    if prog == "docker":
        sys.exit(main_docker(sys.argv[1:]))
    main_redis_server(sys.argv[1:])
