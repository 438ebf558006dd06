"""Shared fixtures for the external-client tests: one goblin-core process per test session.

The server is the real binary (GOBLIN_CORE_BIN, or the default cargo target path), listening on a
free loopback port and on a Unix socket in a temporary directory. Every test gets an empty keyspace
through the `r` fixture, so tests do not depend on one another's data.

Every test that uses the `server` fixture runs twice: with redis-py's default settings (RESP3,
the default of redis-py 8: `HELLO 3` on connect) and with `protocol=2`, the RESP2 run.
"""

import asyncio
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import redis
import redis.asyncio

REPO_ROOT = Path(__file__).resolve().parents[2]

# CLIENTS_REFERENCE=redis runs the same tests against Debian's redis-server (7.0), to tell a wrong
# test from a goblin-core bug. Tests of goblin-core's deliberate differences check this flag.
REFERENCE = os.environ.get("CLIENTS_REFERENCE") == "redis"


def goblin_core_bin() -> str:
    explicit = os.environ.get("GOBLIN_CORE_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/goblin-target")
    return os.path.join(target, "debug", "goblin-core")


def free_port() -> int:
    # The server cannot report an OS-chosen port (port 0 disables TCP, as in Redis), so we ask the
    # OS for a free one and hand it over; the window in which another process could take it is tiny.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, port: int, unixsocket: str, proc: subprocess.Popen, log_path: str, protocol=None):
        self.host = "127.0.0.1"
        self.port = port
        self.unixsocket = unixsocket
        self.proc = proc
        self.log_path = log_path
        # None: the client library's default (RESP3 for redis-py 8); 2: RESP2 chosen explicitly.
        self.protocol = protocol

    def with_protocol(self, protocol):
        return Server(self.port, self.unixsocket, self.proc, self.log_path, protocol)

    @property
    def resp(self) -> int:
        """The protocol the clients of this run speak."""
        return self.protocol or redis.utils.DEFAULT_RESP_VERSION

    def protocol_kw(self) -> dict:
        """Keyword arguments that select this run's protocol (none for the default run)."""
        return {} if self.protocol is None else {"protocol": self.protocol}

    def client(self, **kw) -> redis.Redis:
        for k, v in self.protocol_kw().items():
            kw.setdefault(k, v)
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host=self.host, port=self.port, **kw)


def start_server(tmpdir: str, extra_args=()) -> Server:
    binary = goblin_core_bin()
    if not os.access(binary, os.X_OK) and not REFERENCE:
        raise RuntimeError(f"goblin-core binary not found at {binary}; run cargo build -p goblin-core")
    port = free_port()
    # redis-server in cluster mode needs its port + 10000 (the cluster bus) to be a port too.
    while "--cluster-enabled" in extra_args and port > 55535:
        port = free_port()
    sock = os.path.join(tmpdir, "goblin.sock")
    log_path = os.path.join(tmpdir, "goblin-core.log")
    log = open(log_path, "wb")
    # Its files in the test's own folder, nothing saved at exit: without it the server would
    # load and write dump.rdb in the suite's folder, from one test to the next.
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", sock, "--loglevel", "warn",
            "--save", "", "--dir", tmpdir]
    if REFERENCE:
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", sock,
                "--save", "", "--appendonly", "no", "--loglevel", "warning", "--dir", tmpdir]
    args += list(extra_args)
    proc = subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 15
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"goblin-core exited with {proc.returncode}: {Path(log_path).read_text()}")
        try:
            if redis.Redis(port=port, protocol=2, socket_timeout=1).ping() and os.path.exists(sock):
                break
        except redis.ConnectionError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("goblin-core did not answer PING within 15 s")
        time.sleep(0.05)
    return Server(port, sock, proc, log_path)


@pytest.fixture(scope="session")
def server_process():
    with tempfile.TemporaryDirectory(prefix="goblin-clients-") as tmpdir:
        srv = start_server(tmpdir)
        try:
            yield srv
        finally:
            srv.proc.terminate()
            try:
                srv.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                srv.proc.kill()
                srv.proc.wait()
            # A crash during the session would otherwise only show up as connection errors.
            assert srv.proc.returncode in (0, -15), (
                f"goblin-core exited with {srv.proc.returncode}: {Path(srv.log_path).read_text()[-4000:]}"
            )


@pytest.fixture(scope="session", params=[None, 2], ids=["default-resp3", "resp2"])
def server(request, server_process):
    return server_process.with_protocol(request.param)


@pytest.fixture
def r(server):
    client = server.client()
    client.flushall()
    yield client
    client.close()


# Helpers the asyncio tests share (test_redis_py_asyncio.py, test_vector_sets.py).


def run(coro, timeout=60):
    """Runs `coro` in a fresh event loop; a test that does not finish in `timeout` s fails."""

    async def bounded():
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def aclient(server, **kw) -> redis.asyncio.Redis:
    """An asyncio client speaking this run's protocol (RESP3 by default, or protocol=2)."""
    for k, v in server.protocol_kw().items():
        kw.setdefault(k, v)
    kw.setdefault("socket_timeout", 10)
    return redis.asyncio.Redis(host=server.host, port=server.port, **kw)
