"""Loopback port helpers, binary lookup and RESP request encoding shared by the benchmark drivers."""

import os
import socket
import time


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20.0):
    """Returns once something accepts connections on 127.0.0.1:port; raises after `timeout` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:.0f} s")


def command(*args):
    """One RESP2 request (an array of bulk strings) for `args`: bytes as they are, anything else
    as its str()."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def target_dirs():
    """Where cargo may have put the binaries, in the order searched: $CARGO_TARGET_DIR, ./target
    (where the README's `cargo run --release` builds), ~/.cache/goblin-target (scripts/test.sh)."""
    dirs = []
    if os.environ.get("CARGO_TARGET_DIR"):
        dirs.append(os.environ["CARGO_TARGET_DIR"])
    dirs += [os.path.join(ROOT, "target"), os.path.expanduser("~/.cache/goblin-target")]
    return dirs


def find_binary(name, profile="release"):
    """The first `<dir>/<profile>/<name>` that exists among `target_dirs()`; exits with a message
    naming every place it looked otherwise."""
    for d in target_dirs():
        p = os.path.join(d, profile, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    tried = [os.path.join(d, profile, name) for d in target_dirs()]
    if not os.environ.get("CARGO_TARGET_DIR"):
        tried.insert(0, "$CARGO_TARGET_DIR (not set)")
    flag = " --release" if profile == "release" else ""
    raise SystemExit(f"cannot find the {profile} binary '{name}'; looked in: {', '.join(tried)}. "
                     f"Build it with `cargo build{flag} --bin {name}` (or set CARGO_TARGET_DIR).")


class SideBySide:
    """goblin-core (release build) and Debian's redis-server, optionally an older goblin-core
    build and a redis-server 8 beside them, each on a free loopback port with snapshots off; a
    context manager that stops them all. `names` and `ports` are in that order."""

    def __init__(self, goblin_before=None, redis8=None, extra=()):
        """`extra`: arguments every server is started with (both take the same flag names,
        e.g. `--enable-debug-command yes`)."""
        import subprocess
        servers = [("goblin-core", [find_binary("goblin-core"), *extra])]
        if goblin_before:
            servers.append(("goblin-core (before)", [goblin_before, *extra]))
        servers.append(("redis-server", ["redis-server", "--appendonly", "no", *extra]))
        if redis8:
            servers.append(("redis-server 8", [redis8, "--appendonly", "no", *extra]))
        self.names = [n for n, _ in servers]
        self.ports, self.procs = [], []
        # Started in a directory of their own: a stray dump.rdb where the driver runs (of a
        # newer RDB version, say) must not be loaded, or stop a redis-server from starting.
        import tempfile
        self.dir = tempfile.TemporaryDirectory(prefix="goblin-bench-")
        try:
            for _, argv in servers:
                port = free_port()
                self.procs.append(subprocess.Popen([*argv, "--port", str(port), "--save", ""], cwd=self.dir.name,
                                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
                wait_port(port)
                self.ports.append(port)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *_):
        for p in self.procs:
            p.terminate()
            p.wait()
        self.dir.cleanup()
