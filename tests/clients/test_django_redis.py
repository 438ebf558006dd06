"""Django's cache framework on goblin-core: django-redis and Django's own Redis backend.

Django is configured in code (`settings.configure`, `django.setup()`), with no project files:
cache aliases for django-redis (`django_redis.cache.RedisCache`) and for Django's built-in
`django.core.cache.backends.redis.RedisCache`, each once with redis-py's defaults (RESP3) and
once with `protocol=2`, so every test runs in both protocols like the rest of the suite. The
cache API is what views and services call: set/get/add/incr/decr/touch and the *_many
variants with timeouts, versioned keys, and django-redis's extras (`ttl`, `lock`, `keys`,
`iter_keys` and `delete_pattern` over SCAN). The session tests go through Django's
`SessionMiddleware` with the `cache` session engine, driven by Django's test `Client` against
views defined in this module (it is its own `ROOT_URLCONF`).
"""

import threading
import time

import django
import pytest
from django.conf import settings
from django.http import JsonResponse
from django.urls import path

# One configuration per process: both protocols' aliases at once (the server's port is the same
# for both runs of a test; only the client protocol differs).
_configured_port = None

BACKENDS = {
    "django-redis": "django_redis.cache.RedisCache",
    "django": "django.core.cache.backends.redis.RedisCache",
}


def _alias(kind, server):
    return f"{kind}-resp{server.resp}"


def _configure(server):
    global _configured_port
    if _configured_port is not None:
        assert _configured_port == server.port, "Django is configured for another server"
        return
    base = f"redis://{server.host}:{server.port}/0"
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    for resp, proto_kw in ((3, {}), (2, {"protocol": 2})):
        # django-redis keeps one connection pool per LOCATION for the whole process, whatever
        # the alias's other options: the protocol goes in the URL, which redis-py parses.
        location = base if not proto_kw else f"{base}?protocol=2"
        dr_options = {"SOCKET_TIMEOUT": 10}
        caches[f"django-redis-resp{resp}"] = {
            "BACKEND": BACKENDS["django-redis"],
            "LOCATION": location,
            "TIMEOUT": 300,
            "OPTIONS": dr_options,
        }
        caches[f"django-resp{resp}"] = {
            "BACKEND": BACKENDS["django"],
            "LOCATION": location,
            "TIMEOUT": 300,
            "OPTIONS": dict(proto_kw, socket_timeout=10),
        }
        # A second application sharing the server: its own prefix and cache version.
        caches[f"shop-resp{resp}"] = {
            "BACKEND": BACKENDS["django-redis"],
            "LOCATION": location,
            "KEY_PREFIX": "shop",
            "VERSION": 2,
            "OPTIONS": dr_options,
        }
    settings.configure(
        DEBUG=False,
        SECRET_KEY="goblin-core client tests",
        ALLOWED_HOSTS=["testserver"],
        USE_TZ=True,
        DATABASES={},
        INSTALLED_APPS=["django.contrib.sessions"],
        MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware"],
        ROOT_URLCONF=__name__,
        CACHES=caches,
        SESSION_ENGINE="django.contrib.sessions.backends.cache",
        SESSION_CACHE_ALIAS="django-redis-resp3",
        SESSION_COOKIE_AGE=600,
    )
    django.setup()
    _configured_port = server.port


@pytest.fixture
def django_server(server, r):
    """Django configured for the session's server; an empty keyspace (`r` flushes)."""
    _configure(server)
    yield server
    from django.core.cache import caches

    caches.close_all()


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def cache(request, django_server):
    from django.core.cache import caches

    return caches[_alias(request.param, django_server)]


def _raw(cache):
    """The redis-py client under a cache alias, to look at what the backend stored."""
    if hasattr(cache, "client") and hasattr(cache.client, "get_client"):
        return cache.client.get_client(write=True)  # django-redis
    return cache._cache.get_client(write=True)  # Django's RedisCache


def _wait_gone(cache, key, timeout=5.0):
    deadline = time.monotonic() + timeout
    while cache.get(key) is not None:
        assert time.monotonic() < deadline, f"{key} did not expire within {timeout} s"
        time.sleep(0.05)


# --- views for the session tests (this module is the ROOT_URLCONF) ----------------------------


def count_view(request):
    request.session["n"] = request.session.get("n", 0) + 1
    if request.GET.get("expire"):
        request.session.set_expiry(int(request.GET["expire"]))
    return JsonResponse({"n": request.session["n"]})


def login_view(request):
    request.session.cycle_key()
    request.session["user"] = "ada"
    return JsonResponse({"ok": True})


def logout_view(request):
    request.session.flush()
    return JsonResponse({"ok": True})


urlpatterns = [
    path("count/", count_view),
    path("login/", login_view),
    path("logout/", logout_view),
]


# --- the cache API on both backends ------------------------------------------------------------------


def test_set_get_add_and_timeouts(cache, django_server):
    """set/get/add/has_key/delete/get_or_set with Python values, the timeout on the server
    (TIMEOUT, a per-call one, None for no expiry, 0 for none stored), and an entry actually
    expiring."""
    raw = _raw(cache)
    assert int(raw.client_info()["resp"]) == django_server.resp

    value = {"name": "ada", "tags": ["a", "b"], "n": 3, "blob": b"\x00\xff"}
    cache.set("profile", value)
    assert cache.get("profile") == value
    assert 290 < raw.ttl(cache.make_key("profile")) <= 300  # the alias's TIMEOUT
    cache.set("short", "s", timeout=30)
    assert 25 < raw.ttl(cache.make_key("short")) <= 30
    cache.set("forever", "f", timeout=None)
    assert raw.ttl(cache.make_key("forever")) == -1
    cache.set("zero", "z", timeout=0)
    assert cache.get("zero") is None and not cache.has_key("zero")
    assert cache.get("missing") is None
    assert cache.get("missing", "fallback") == "fallback"

    assert cache.add("added", 1) is True
    assert cache.add("added", 2) is False
    assert cache.get("added") == 1
    assert cache.get_or_set("computed", lambda: "made", timeout=60) == "made"
    assert cache.get_or_set("computed", lambda: "made again") == "made"
    assert cache.has_key("computed")
    assert cache.delete("computed") is True
    assert cache.delete("computed") is False
    assert cache.get("ünïcode-kéy") is None
    cache.set("ünïcode-kéy", "välue")
    assert cache.get("ünïcode-kéy") == "välue"

    cache.set("brief", "here", timeout=1)
    assert cache.get("brief") == "here"
    _wait_gone(cache, "brief")
    assert not cache.has_key("brief")


def test_incr_decr_and_the_many_variants(cache):
    """incr/decr on stored integers (kept as plain integers, so INCRBY works on the server), a
    missing key refused with ValueError, and set_many/get_many/delete_many with timeouts."""
    raw = _raw(cache)
    cache.set("hits", 10)
    assert raw.get(cache.make_key("hits")) == b"10"
    assert cache.incr("hits") == 11
    assert cache.incr("hits", 5) == 16
    assert cache.decr("hits", 20) == -4
    assert cache.get("hits") == -4
    with pytest.raises(ValueError):
        cache.incr("nope")
    with pytest.raises(ValueError):
        cache.decr("nope")
    assert not cache.has_key("nope")

    data = {f"item:{i}": {"i": i} for i in range(20)}
    cache.set_many(data, timeout=45)
    for key in data:
        assert 40 < raw.ttl(cache.make_key(key)) <= 45
    got = cache.get_many(["item:0", "item:7", "missing", "item:19"])
    assert got == {"item:0": {"i": 0}, "item:7": {"i": 7}, "item:19": {"i": 19}}
    cache.delete_many([f"item:{i}" for i in range(10)] + ["missing"])
    assert cache.get_many(list(data)) == {k: v for k, v in data.items() if int(k.split(":")[1]) >= 10}
    cache.set_many({"p1": 1, "p2": 2}, timeout=None)
    assert raw.ttl(cache.make_key("p1")) == -1


def test_touch(cache):
    """touch gives an entry a new timeout, longer or shorter (None removes it), and reports a
    missing key."""
    raw = _raw(cache)
    cache.set("session-ish", "x", timeout=10)
    assert cache.touch("session-ish", 100) is True
    assert 95 < raw.ttl(cache.make_key("session-ish")) <= 100
    assert cache.touch("session-ish", None) is True
    assert raw.ttl(cache.make_key("session-ish")) == -1
    assert cache.touch("absent", 10) is False
    cache.set("soon", "y", timeout=100)
    assert cache.touch("soon", 2) is True
    assert 0 < raw.pttl(cache.make_key("soon")) <= 2000


def test_versioned_keys(cache, django_server):
    """Versions are part of the key: a value set for version 2 is not seen by version 1, and
    incr_version moves an entry to the next version; an alias with KEY_PREFIX and VERSION keeps
    its keys apart from the others on the same server."""
    from django.core.cache import caches

    cache.set("config", "v1")
    cache.set("config", "v2", version=2)
    assert cache.get("config") == "v1"
    assert cache.get("config", version=2) == "v2"
    assert cache.get("config", version=3) is None
    assert cache.incr_version("config", version=2) == 3
    assert cache.get("config", version=2) is None
    assert cache.get("config", version=3) == "v2"
    assert cache.get("config") == "v1"
    with pytest.raises(ValueError):
        cache.incr_version("absent")

    shop = caches[f"shop-resp{django_server.resp}"]
    shop.set("config", "shop's")
    assert shop.get("config") == "shop's"
    assert cache.get("config") == "v1"
    raw = _raw(cache)
    assert raw.exists("shop:2:config") == 1
    assert raw.exists(":1:config") == 1 and raw.exists(":3:config") == 1


# --- django-redis's own API ---------------------------------------------------------------------


@pytest.fixture
def dr(django_server):
    from django.core.cache import caches

    return caches[_alias("django-redis", django_server)]


def test_django_redis_ttl_persist_and_expire(dr):
    """django-redis's `ttl`/`pttl` (None for no expiry, 0 for a missing key), `persist`,
    `expire`, `expire_at`, and an integer overflowing INCRBY handled as a stored value."""
    dr.set("k", "v", timeout=50)
    assert 45 < dr.ttl("k") <= 50
    assert 45000 < dr.pttl("k") <= 50000
    assert dr.persist("k") is True
    assert dr.ttl("k") is None
    assert dr.ttl("missing") == 0
    assert dr.expire("k", 20) is True
    assert 15 < dr.ttl("k") <= 20
    assert dr.expire_at("k", int(time.time()) + 100) is True
    assert 90 < dr.ttl("k") <= 100
    dr.set("k2", "v", timeout=None)
    assert dr.ttl("k2") is None

    # INCRBY refuses to overflow; django-redis then adds in Python and keeps the TTL.
    dr.set("huge", 2**63 - 1, timeout=80)
    assert dr.incr("huge") == 2**63
    assert dr.get("huge") == 2**63
    assert 70 < dr.ttl("huge") <= 80
    # incr(ignore_key_check=True) creates the key.
    assert dr.incr("fresh", 4, ignore_key_check=True) == 4


def test_django_redis_keys_iter_keys_and_delete_pattern(dr, django_server):
    """`keys` (KEYS), `iter_keys` (SCAN with the alias's prefix and version) and
    `delete_pattern` (SCAN + DEL in a pipeline) over 1000 entries, leaving other entries, other
    versions and the other application's prefix alone."""
    from django.core.cache import caches

    dr.set_many({f"user:{i}": i for i in range(1000)}, timeout=300)
    dr.set_many({f"order:{i}": i for i in range(50)}, timeout=300)
    dr.set("user:v2", "other version", version=2)
    shop = caches[f"shop-resp{django_server.resp}"]
    shop.set("user:1", "shop user")

    assert sorted(dr.keys("order:*")) == sorted(f"order:{i}" for i in range(50))
    assert sorted(dr.keys("user:1?")) == sorted(f"user:1{i}" for i in range(10))
    scanned = list(dr.iter_keys("user:*", itersize=100))
    assert len(scanned) == len(set(scanned))
    assert set(scanned) == {f"user:{i}" for i in range(1000)}

    assert dr.delete_pattern("user:*", itersize=75) == 1000
    assert dr.keys("user:*") == []
    assert dr.get("user:v2", version=2) == "other version"
    assert shop.get("user:1") == "shop user"
    assert len(dr.keys("order:*")) == 50
    assert dr.delete_pattern("nothing:*") == 0


def test_django_redis_lock(dr, django_server):
    """`cache.lock` (redis-py's Lock under the cache's key scheme): held by one thread, refused
    to another, handed to a blocked waiter on release, and 4 threads x 10 read-modify-writes
    under it losing nothing."""
    from django.core.cache import caches

    lock = dr.lock("report", timeout=10)
    assert lock.acquire(blocking=False) is True
    raw = _raw(dr)
    assert raw.exists(dr.make_key("report")) == 1
    results = {}

    def contender():
        other = caches[_alias("django-redis", django_server)]  # the thread's own cache object
        results["try"] = other.lock("report", timeout=10).acquire(blocking=False)
        waiter = other.lock("report", timeout=10, sleep=0.01)
        results["wait"] = waiter.acquire(blocking_timeout=10)
        if results["wait"]:
            waiter.release()

    t = threading.Thread(target=contender)
    t.start()
    deadline = time.monotonic() + 5
    while "try" not in results and time.monotonic() < deadline:
        time.sleep(0.01)
    assert results.get("try") is False
    lock.release()
    t.join(10)
    assert not t.is_alive()
    assert results["wait"] is True
    assert raw.exists(dr.make_key("report")) == 0

    dr.set("tally", 0, timeout=None)
    errors = []

    def add_ten():
        c = caches[_alias("django-redis", django_server)]
        try:
            for _ in range(10):
                with c.lock("tally-lock", timeout=10, sleep=0.002, blocking_timeout=20):
                    value = c.get("tally")
                    time.sleep(0.001)
                    c.set("tally", value + 1, timeout=None)
        except Exception as e:  # reported below, not swallowed
            errors.append(e)
        finally:
            caches.close_all()

    threads = [threading.Thread(target=add_ten) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    assert dr.get("tally") == 40


def test_django_redis_hashes_and_serializer(dr):
    """django-redis's hash helpers (HSET/HDEL/HLEN/HKEYS/HEXISTS on a cache key) and values
    stored pickled: what the server holds is the pickle, except for plain integers."""
    import pickle

    assert dr.hset("h", "a", {"x": 1}) == 1
    dr.hset("h", "b", 2)
    assert dr.hlen("h") == 2
    assert sorted(dr.hkeys("h")) == ["a", "b"]
    assert dr.hexists("h", "a") and not dr.hexists("h", "zz")
    assert dr.hdel("h", "a") == 1
    assert dr.hlen("h") == 1

    raw = _raw(dr)
    dr.set("obj", [1, "two"])
    assert pickle.loads(raw.get(dr.make_key("obj"))) == [1, "two"]
    dr.set("int", 12)
    assert raw.get(dr.make_key("int")) == b"12"


# --- sessions (the cache session engine) ------------------------------------------------------------


@pytest.fixture(params=list(BACKENDS), ids=list(BACKENDS))
def session_alias(request, django_server):
    from django.test.utils import override_settings

    alias = _alias(request.param, django_server)
    with override_settings(SESSION_CACHE_ALIAS=alias):
        yield alias


def test_session_store_saves_loads_and_expires(session_alias):
    """`django.contrib.sessions.backends.cache.SessionStore` on each backend: a saved session
    is a cache entry with the session's expiry as its TTL, another store loads it by key, a
    modified one is saved again, `cycle_key` moves it, `delete` removes it, and a session with
    a 1 s expiry is gone (an empty session) once the server expired it."""
    from django.contrib.sessions.backends.cache import KEY_PREFIX, SessionStore
    from django.core.cache import caches

    cache = caches[session_alias]
    raw = _raw(cache)
    s = SessionStore()
    s["user_id"] = 42
    s["cart"] = ["apple"]
    s.save()
    key = s.session_key
    assert key and SessionStore().exists(key)
    cache_key = cache.make_key(KEY_PREFIX + key)
    assert raw.exists(cache_key) == 1
    assert 590 < raw.ttl(cache_key) <= 600  # SESSION_COOKIE_AGE

    loaded = SessionStore(session_key=key)
    assert loaded["user_id"] == 42 and loaded["cart"] == ["apple"]
    loaded["cart"] = ["apple", "pear"]
    loaded.save()
    assert SessionStore(session_key=key)["cart"] == ["apple", "pear"]

    loaded.cycle_key()
    new_key = loaded.session_key
    assert new_key != key
    assert not SessionStore().exists(key)
    assert SessionStore(session_key=new_key)["user_id"] == 42
    loaded.delete()
    assert not SessionStore().exists(new_key)
    assert raw.exists(cache.make_key(KEY_PREFIX + new_key)) == 0

    brief = SessionStore()
    brief["x"] = 1
    brief.set_expiry(1)
    brief.save()
    brief_key = cache.make_key(KEY_PREFIX + brief.session_key)
    assert 0 < raw.pttl(brief_key) <= 1000
    deadline = time.monotonic() + 5
    while raw.exists(brief_key):
        assert time.monotonic() < deadline, "the session did not expire"
        time.sleep(0.05)
    assert SessionStore(session_key=brief.session_key).load() == {}


def test_sessions_through_the_middleware(session_alias):
    """Requests through `SessionMiddleware`: the session cookie brings the same session back
    (its counter goes up), login's `cycle_key` replaces the key on the server, logout's `flush`
    deletes it, and a session with a 1 s expiry starts over once the server expired it."""
    from django.contrib.sessions.backends.cache import KEY_PREFIX
    from django.core.cache import caches
    from django.test import Client

    cache = caches[session_alias]
    raw = _raw(cache)
    client = Client()
    assert client.get("/count/").json() == {"n": 1}
    first_key = client.cookies["sessionid"].value
    assert raw.exists(cache.make_key(KEY_PREFIX + first_key)) == 1
    assert client.get("/count/").json() == {"n": 2}
    assert client.get("/count/").json() == {"n": 3}
    assert client.cookies["sessionid"].value == first_key

    assert client.get("/login/").json() == {"ok": True}
    login_key = client.cookies["sessionid"].value
    assert login_key != first_key
    assert raw.exists(cache.make_key(KEY_PREFIX + first_key)) == 0
    assert raw.exists(cache.make_key(KEY_PREFIX + login_key)) == 1
    assert client.get("/count/").json() == {"n": 4}  # the data moved with the key

    assert client.get("/logout/").json() == {"ok": True}
    assert raw.exists(cache.make_key(KEY_PREFIX + login_key)) == 0
    assert client.get("/count/").json() == {"n": 1}

    other = Client()
    assert other.get("/count/?expire=1").json() == {"n": 1}
    short_key = cache.make_key(KEY_PREFIX + other.cookies["sessionid"].value)
    assert 0 < raw.pttl(short_key) <= 1000
    deadline = time.monotonic() + 5
    while raw.exists(short_key):
        assert time.monotonic() < deadline, "the session did not expire"
        time.sleep(0.05)
    assert other.get("/count/").json() == {"n": 1}
