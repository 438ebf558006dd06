"""Redis 8's vector sets through redis-py's own API against a real goblin-core process.

redis-py 8 wraps the V* commands in `r.vset()` (vadd, vsim, vemb, vlinks, vinfo, vsetattr,
vgetattr, vrandmember, vcard, vdim, vrem, vrange) and registers reply parsers for them: VSIM
WITHSCORES/WITHATTRIBS as dicts, VEMB as floats, VGETATTR as parsed JSON, VINFO as a dict.
VISMEMBER has no wrapper and goes through `execute_command`. Every test runs twice (see
`conftest.py`): with redis-py's defaults (RESP3) and with `protocol=2`; the last two drive the
asyncio client (`redis.asyncio`) the same way.

What is checked is behaviour, not reply bytes: nearest neighbours of known vectors (VSIM TRUTH
against a brute-force scan, and the HNSW answer's recall), scores against the exact cosine
similarity (VSIM reports `(1 + cos) / 2`), VEMB round trips per quantization (exact for NOQUANT,
within one int8 step for the default Q8, signs for BIN), REDUCE, FILTER expressions over JSON
attributes, attribute round trips, the graph VLINKS shows, VRANDMEMBER's counts, errors and
WRONGTYPE, the key going away with its last element, 1000 VADDs in one pipeline, and
DUMP/RESTORE, COPY and RENAME keeping the set. Data comes from seeded generators; nothing
depends on timing.

`CLIENTS_REFERENCE=redis` with a redis-server 8.2 first on PATH runs the same tests against
Redis (Debian's 7.0 has no vector sets: the module is skipped there; VRANGE, Redis 8.4, is
skipped on a reference without it).
"""

import asyncio
import math
import random
import struct

import pytest
import redis
from redis.commands.vectorset.commands import QuantizationOptions
from redis.exceptions import ResponseError

from conftest import REFERENCE, aclient, run

NOQUANT = QuantizationOptions.NOQUANT
BIN = QuantizationOptions.BIN
Q8 = QuantizationOptions.Q8

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def server_lacks(r, *command) -> bool:
    """True if the server answers `command` with 'unknown command'."""
    try:
        r.execute_command(*command)
    except ResponseError as e:
        return "unknown command" in str(e)
    return False


@pytest.fixture(autouse=True)
def _reference_has_vector_sets(r):
    """Debian's redis-server 7.0 (the default reference) has no vector sets."""
    if REFERENCE and server_lacks(r, "VCARD", "no-such-key"):
        pytest.skip("the reference redis-server has no vector sets (Redis 8.0+)")


# --- helpers ----------------------------------------------------------------------------------


def f32(vec):
    """`vec` rounded to 32-bit floats, as the server stores it."""
    return list(struct.unpack(f"{len(vec)}f", struct.pack(f"{len(vec)}f", *vec)))


def fp32_blob(vec):
    return struct.pack(f"<{len(vec)}f", *vec)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb)


def similarity(a, b):
    """VSIM's score: 1 - d/2 with d the cosine distance 1 - cos, i.e. (1 + cos) / 2."""
    return (1.0 + cosine(a, b)) / 2.0


def gaussian_vectors(seed, count, dim):
    rng = random.Random(seed)
    return [[rng.gauss(0, 1) for _ in range(dim)] for _ in range(count)]


def brute_force(vectors, query, k):
    """The k (name, score) pairs of `vectors` (a name -> vector dict) nearest `query`."""
    scored = [(name, similarity(vec, query)) for name, vec in vectors.items()]
    scored.sort(key=lambda p: p[1], reverse=True)
    return scored[:k]


def name(x):
    return x.decode() if isinstance(x, bytes) else x


def names(reply):
    return [name(x) for x in reply]


def fill(r, key, vectors, **kw):
    """Adds a name -> vector dict through one pipeline; every VADD must report a new element."""
    p = r.pipeline(transaction=False)
    for n, vec in vectors.items():
        p.vset().vadd(key, vec, n, **kw)
    assert p.execute() == [1] * len(vectors)


# --- basics -----------------------------------------------------------------------------------


def test_vadd_vcard_vdim_vinfo_and_update(r):
    """VADD creates the key and reports a new element with 1, an update of an existing one with
    0 (its vector replaced); VCARD/VDIM/VINFO describe the set."""
    vs = r.vset()
    assert vs.vcard("vs") == 0
    assert vs.vinfo("vs") is None
    assert vs.vadd("vs", [1.0, 0.0, 0.0], "a") == 1
    assert vs.vadd("vs", [0.0, 1.0, 0.0], "b") == 1
    assert r.type("vs") == b"vectorset"
    assert vs.vcard("vs") == 2
    assert vs.vdim("vs") == 3
    info = {name(k): v for k, v in vs.vinfo("vs").items()}
    assert name(info["quant-type"]) == "int8"  # Q8 is the default
    assert info["vector-dim"] == 3
    assert info["size"] == 2
    assert info["projection-input-dim"] == 0
    assert info["attributes-count"] == 0
    assert info["hnsw-m"] == 16  # M is fixed when the set is created
    assert info["max-level"] >= 0

    # Update: same element, new vector. Not a new element; VSIM now finds it where it moved.
    assert vs.vadd("vs", [0.0, 0.0, 1.0], "a") == 0
    assert vs.vcard("vs") == 2
    assert vs.vemb("vs", "a") == pytest.approx([0.0, 0.0, 1.0], abs=1e-6)
    assert names(vs.vsim("vs", [0.0, 0.0, 1.0], count=1)) == ["a"]

    assert vs.vadd("nq", [1.0, 2.0], "x", quantization=NOQUANT) == 1
    assert name(vs.vinfo("nq")[b"quant-type"]) == "f32"
    assert vs.vadd("bq", [1.0, -2.0], "x", quantization=BIN) == 1
    assert name(vs.vinfo("bq")[b"quant-type"]) == "bin"
    assert vs.vadd("q8", [1.0, -2.0], "x", quantization=Q8) == 1
    assert name(vs.vinfo("q8")[b"quant-type"]) == "int8"
    assert vs.vadd("m4", [1.0, 2.0], "x", numlinks=4) == 1
    assert vs.vinfo("m4")[b"hnsw-m"] == 4


def test_vsim_truth_is_the_exact_nearest_neighbours(r):
    """VSIM TRUTH scans the whole set: its top-k are the brute-force top-k, best first, with
    scores equal to (1 + cos) / 2 of the stored (f32) vectors."""
    vs = r.vset()
    data = {f"e{i}": v for i, v in enumerate(gaussian_vectors(11, 300, 12))}
    fill(r, "vs", data, quantization=NOQUANT)
    stored = {n: f32(v) for n, v in data.items()}
    for query in gaussian_vectors(12, 5, 12):
        got = vs.vsim("vs", query, with_scores=True, count=10, truth=True)
        got = [(name(k), v) for k, v in got.items()]
        expected = brute_force(stored, query, 11)
        kth = expected[9][1]
        assert len(got) == 10
        for n, score in got:
            assert score == pytest.approx(similarity(stored[n], query), abs=1e-5)
            assert score >= kth - 1e-5, f"{n} ({score}) is not among the 10 nearest"
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        # Elements clearly inside the top 10 (not tied with the 11th) must all be there.
        must = {n for n, s in expected[:10] if s > expected[10][1] + 1e-5}
        assert must <= {n for n, _ in got}


def test_vsim_hnsw_recall_and_self_match(r):
    """The HNSW answer (no TRUTH) over 2000 vectors finds nearly all of the exact top 10, and an
    element's own vector finds that element first with score 1."""
    vs = r.vset()
    data = {f"e{i}": v for i, v in enumerate(gaussian_vectors(21, 2000, 24))}
    fill(r, "vs", data, quantization=NOQUANT)
    stored = {n: f32(v) for n, v in data.items()}
    recalls = []
    for query in gaussian_vectors(22, 20, 24):
        got = names(vs.vsim("vs", query, count=10, ef=200))
        assert len(got) == 10
        exact = {n for n, _ in brute_force(stored, query, 10)}
        recalls.append(len(exact & set(got)) / 10)
    assert sum(recalls) / len(recalls) >= 0.9, recalls
    for n in ("e0", "e777", "e1999"):
        top = vs.vsim("vs", data[n], with_scores=True, count=1)
        assert [name(k) for k in top] == [n]
        assert list(top.values())[0] == pytest.approx(1.0, abs=1e-6)


def test_vsim_by_element_count_epsilon_and_missing_key(r):
    """VSIM ELE (a str input) queries by an element's own vector; COUNT caps the answer;
    EPSILON keeps only elements whose distance is below it (score above 1 - epsilon)."""
    vs = r.vset()
    angles = [0, 10, 20, 45, 90, 135, 180]
    for a in angles:
        rad = math.radians(a)
        vs.vadd("vs", [math.cos(rad), math.sin(rad)], f"deg{a}", quantization=NOQUANT)
    got = vs.vsim("vs", "deg0", with_scores=True)
    assert [name(k) for k in got] == [f"deg{a}" for a in angles]
    for a in angles:
        expected = (1 + math.cos(math.radians(a))) / 2
        assert got[f"deg{a}".encode()] == pytest.approx(expected, abs=1e-6)
    assert names(vs.vsim("vs", "deg0", count=3)) == ["deg0", "deg10", "deg20"]
    # EPSILON e keeps scores of at least 1 - e. 0.1: cos >= 0.8, so 0, 10 and 20 degrees.
    assert set(names(vs.vsim("vs", "deg0", epsilon=0.1))) == {"deg0", "deg10", "deg20"}
    # 0.3: cos >= 0.4, 45 degrees too; 0.55: cos >= -0.1, 90 degrees too.
    assert set(names(vs.vsim("vs", "deg0", epsilon=0.3))) == {"deg0", "deg10", "deg20", "deg45"}
    assert set(names(vs.vsim("vs", "deg0", epsilon=0.55))) == {
        "deg0", "deg10", "deg20", "deg45", "deg90"
    }
    assert vs.vsim("nokey", [1.0, 0.0]) == []
    with pytest.raises(ResponseError, match="element not found"):
        vs.vsim("vs", "nosuchelement")


# --- quantization -----------------------------------------------------------------------------


def test_noquant_vemb_returns_the_vector_as_given(r):
    """NOQUANT keeps 32-bit floats: VEMB gives back the vector as sent (not normalized), and
    VEMB RAW its f32 bytes and its L2 norm."""
    vs = r.vset()
    vectors = {f"v{i}": v for i, v in enumerate(gaussian_vectors(31, 20, 7))}
    vectors["big"] = [1e3, -2.5e2, 3.0, 0.125, -7.0, 0.0, 42.0]
    fill(r, "vs", vectors, quantization=NOQUANT)
    for n, v in vectors.items():
        emb = vs.vemb("vs", n)
        scale = max(abs(x) for x in v)
        assert emb == pytest.approx(f32(v), abs=2e-6 * scale), n
    raw = vs.vemb("vs", "big", raw=True)
    assert name(raw["quantization"]) == "f32"
    assert len(raw["raw"]) == 4 * 7
    norm = math.sqrt(sum(x * x for x in vectors["big"]))
    assert raw["l2"] == pytest.approx(norm, rel=1e-5)
    normalized = struct.unpack("<7f", raw["raw"])
    assert list(normalized) == pytest.approx([x / norm for x in vectors["big"]], abs=1e-6)
    assert vs.vemb("vs", "nosuch") is None
    assert vs.vemb("nokey", "v0") is None


def test_q8_vemb_within_one_quantization_step(r):
    """The default Q8 stores each component as an int8 of the largest one: VEMB is within one
    step (max|x| / 127) of what was sent, and VEMB RAW has one byte per dimension."""
    vs = r.vset()
    vectors = {f"v{i}": v for i, v in enumerate(gaussian_vectors(41, 30, 16))}
    vectors["spiky"] = [100.0] + [0.5] * 15
    fill(r, "vs", vectors)
    for n, v in vectors.items():
        step = max(abs(x) for x in v) / 127
        assert vs.vemb("vs", n) == pytest.approx(v, abs=step + 1e-6), n
    raw = vs.vemb("vs", "spiky", raw=True)
    assert name(raw["quantization"]) == "int8"
    assert len(raw["raw"]) == 16
    assert struct.unpack("16b", raw["raw"])[0] == 127  # the largest component maps to 127
    assert raw["l2"] == pytest.approx(math.sqrt(100.0**2 + 15 * 0.25), rel=1e-5)
    # Scores stay close to the exact similarity despite quantization.
    query = gaussian_vectors(42, 1, 16)[0]
    for k, score in vs.vsim("vs", query, with_scores=True, count=5).items():
        assert score == pytest.approx(similarity(vectors[name(k)], query), abs=0.02)


def test_bin_quantization_keeps_signs(r):
    """BIN keeps one bit per component: VEMB answers +1/-1 by sign, identical signs score 1,
    opposite signs 0."""
    vs = r.vset()
    v = [0.5, -2.0, 3.0, -0.1, 7.0, -8.0, 0.25, -0.75]
    vs.vadd("vs", v, "a", quantization=BIN)
    vs.vadd("vs", [-x for x in v], "opposite", quantization=BIN)
    vs.vadd("vs", [x * 3 for x in v], "scaled", quantization=BIN)
    assert vs.vemb("vs", "a") == [1.0 if x > 0 else -1.0 for x in v]
    scores = {name(k): s for k, s in vs.vsim("vs", v, with_scores=True).items()}
    assert scores["a"] == pytest.approx(1.0)
    assert scores["scaled"] == pytest.approx(1.0)
    assert scores["opposite"] == pytest.approx(0.0, abs=1e-6)
    raw = vs.vemb("vs", "a", raw=True)
    assert name(raw["quantization"]) == "bin"


def test_fp32_blob_equals_values(r):
    """A vector sent as an FP32 blob (bytes) is stored exactly as the same one sent as VALUES."""
    vs = r.vset()
    vecs = gaussian_vectors(51, 10, 9)
    for i, v in enumerate(vecs):
        assert vs.vadd("blob", fp32_blob(v), f"e{i}", quantization=NOQUANT) == 1
        assert vs.vadd("vals", v, f"e{i}", quantization=NOQUANT) == 1
    for i in range(10):
        assert vs.vemb("blob", f"e{i}") == vs.vemb("vals", f"e{i}")
    q = vecs[3]
    assert vs.vsim("blob", fp32_blob(q), with_scores=True, truth=True) == vs.vsim(
        "vals", q, with_scores=True, truth=True
    )


def test_reduce_projects_to_fewer_dimensions(r):
    """REDUCE stores a random projection: VDIM is the reduced dimension, VINFO keeps the input
    one, queries are given in the input dimension and find each element itself first."""
    vs = r.vset()
    data = {f"e{i}": v for i, v in enumerate(gaussian_vectors(61, 50, 32))}
    for n, v in data.items():
        assert vs.vadd("vs", v, n, reduce_dim=8) == 1
    assert vs.vdim("vs") == 8
    info = vs.vinfo("vs")
    assert info[b"vector-dim"] == 8
    assert info[b"projection-input-dim"] == 32
    assert len(vs.vemb("vs", "e0")) == 8
    for n in ("e0", "e17", "e49"):
        top = vs.vsim("vs", data[n], with_scores=True, count=1)
        assert [name(k) for k in top] == [n]
        assert list(top.values())[0] == pytest.approx(1.0, abs=0.01)
    with pytest.raises(ResponseError, match="Input dimension mismatch for projection"):
        vs.vsim("vs", [1.0] * 16)
    with pytest.raises(ResponseError, match="Input dimension mismatch for projection"):
        vs.vadd("vs", [1.0] * 16, "bad", reduce_dim=8)


# --- attributes and FILTER --------------------------------------------------------------------

MOVIES = {
    "alien": {"title": "Alien", "year": 1979, "genre": "scifi", "rating": 8.5, "classic": True},
    "starwars": {
        "title": "Star Wars", "year": 1977, "genre": "scifi", "rating": 8.6, "classic": True
    },
    "matrix": {
        "title": "The Matrix", "year": 1999, "genre": "scifi", "rating": 8.7, "classic": False
    },
    "amelie": {"title": "Amelie", "year": 2001, "genre": "comedy", "rating": 8.3, "classic": False},
    "heat": {"title": "Heat", "year": 1995, "genre": "crime", "rating": 8.3},
    "up": {"title": "Up", "year": 2009, "genre": "animation", "rating": 8.3, "classic": False},
    "cats": {"title": "Cats", "year": 2019, "genre": "musical", "rating": 2.8, "classic": False},
}


def add_movies(r):
    vs = r.vset()
    for i, (n, attrs) in enumerate(MOVIES.items()):
        rad = math.radians(10 * i)
        assert vs.vadd("movies", [math.cos(rad), math.sin(rad), 0.1 * i], n, attributes=attrs) == 1
    vs.vadd("movies", [0.5, 0.5, 0.5], "noattrs")  # never matches a FILTER
    vs.vadd("movies", [0.5, 0.4, 0.5], "badjson")
    r.execute_command("VSETATTR", "movies", "badjson", "{not json")  # excluded as well


def test_filter_expressions_select_by_attributes(r):
    """FILTER evaluates an expression over each candidate's JSON attributes; elements without
    attributes, with malformed JSON, or missing a field the expression reads are left out."""
    add_movies(r)
    vs = r.vset()

    def sel(expr):
        return set(names(vs.vsim("movies", [1.0, 0.0, 0.0], count=20, filter=expr)))

    def py(pred):
        return {n for n, a in MOVIES.items() if pred(a)}

    assert sel(".year >= 2000") == py(lambda a: a["year"] >= 2000)
    assert sel('.genre == "scifi" and .rating > 8.55') == {"starwars", "matrix"}
    assert sel('.genre in ["comedy", "crime"]') == {"amelie", "heat"}
    assert sel('"Star" in .title') == {"starwars"}
    assert sel("!.classic") == {"matrix", "amelie", "up", "cats"}  # heat has no 'classic'
    assert sel(".classic") == {"alien", "starwars"}
    assert sel("(.year - 1900) * 2 > 200") == py(lambda a: (a["year"] - 1900) * 2 > 200)
    assert sel(".rating >= 8.6 or .year < 1978") == {"starwars", "matrix"}
    assert sel(".year % 2 == 1 and .rating < 8.4") == py(
        lambda a: a["year"] % 2 == 1 and a["rating"] < 8.4
    )
    assert sel(".nosuchfield == 1") == set()
    assert sel(".year > 0") == set(MOVIES)  # noattrs and badjson never match
    # FILTER composes with WITHSCORES and COUNT: the best matches first.
    got = vs.vsim("movies", [1.0, 0.0, 0.0], filter='.genre == "scifi"', with_scores=True, count=2)
    assert [name(k) for k in got] == ["alien", "starwars"]
    with pytest.raises(ResponseError, match="syntax error in FILTER expression"):
        vs.vsim("movies", [1.0, 0.0, 0.0], filter=".year >")


def test_attributes_json_round_trip(server, r):
    """VSETATTR/VGETATTR keep the JSON text as given (redis-py encodes and decodes it); an empty
    string removes it; VINFO counts elements with attributes; VSIM WITHATTRIBS returns them."""
    vs = r.vset()
    vs.vadd("vs", [1.0, 0.0], "a")
    vs.vadd("vs", [0.0, 1.0], "b", attributes={"seed": 1})
    doc = {
        "name": "Zoë ✓",
        "price": 12.5,
        "tags": ["x", "y", 3, None, True],
        "nested": {"deep": {"list": [1.25, -2, {"k": "v"}]}},
        "flag": False,
        "big": 2**53,
    }
    assert vs.vsetattr("vs", "a", doc) == 1
    assert vs.vgetattr("vs", "a") == doc
    assert vs.vgetattr("vs", "b") == {"seed": 1}
    text = '{"spacing" :  [1,2] , "s":"a\\"b"}'
    assert vs.vsetattr("vs", "b", text) == 1
    plain = server.client()  # no r.vset() on it: VGETATTR's reply is not parsed
    try:
        assert plain.execute_command("VGETATTR", "vs", "b") == text.encode()  # stored verbatim
    finally:
        plain.close()
    assert vs.vgetattr("vs", "b") == {"spacing": [1, 2], "s": 'a"b'}
    assert vs.vinfo("vs")[b"attributes-count"] == 2
    got = vs.vsim("vs", [1.0, 0.0], with_scores=True, with_attribs=True)
    assert got[b"a"]["attributes"] == doc
    assert got[b"a"]["score"] == pytest.approx(1.0)
    assert vs.vsim("vs", [1.0, 0.0], with_attribs=True)[b"b"] == {"spacing": [1, 2], "s": 'a"b'}
    # Removal, and elements or keys that are not there.
    assert vs.vsetattr("vs", "b", "") == 1
    assert vs.vgetattr("vs", "b") is None
    assert vs.vinfo("vs")[b"attributes-count"] == 1
    assert not vs.vsetattr("vs", "nosuch", {"a": 1})
    assert not vs.vsetattr("nokey", "a", {"a": 1})
    assert vs.vgetattr("vs", "nosuch") is None
    assert vs.vgetattr("nokey", "a") is None
    # VREM drops the element's attributes with it.
    assert vs.vrem("vs", "a")
    assert vs.vinfo("vs")[b"attributes-count"] == 0


# --- graph, sampling, removal -----------------------------------------------------------------


def test_vlinks_shows_a_consistent_graph(r):
    """VLINKS lists an element's neighbours per layer (top layer first): members other than the
    element, at most 2M at layer 0 and M above, every link reciprocal on its layer, scores
    equal to the pair's similarity, and VINFO's max-level the tallest element's level."""
    vs = r.vset()
    data = {f"e{i}": v for i, v in enumerate(gaussian_vectors(71, 120, 6))}
    fill(r, "vs", data, quantization=NOQUANT, numlinks=4)
    links = {}
    for n in data:
        layers = vs.vlinks("vs", n)
        assert layers, n
        links[n] = [names(layer) for layer in layers]
        assert len(links[n][-1]) >= 1, f"{n} has no layer-0 neighbour"
        assert len(links[n][-1]) <= 8
        for layer in links[n]:
            assert n not in layer
            assert set(layer) <= set(data)
        for layer in links[n][:-1]:
            assert len(layer) <= 4
    for n, layers in links.items():
        for level, layer in enumerate(reversed(layers)):
            for m in layer:
                back = list(reversed(links[m]))
                assert level < len(back) and n in back[level], (
                    f"{n} -> {m} (layer {level}) has no way back"
                )
    assert vs.vinfo("vs")[b"max-level"] == max(len(layers) - 1 for layers in links.values())
    scored = vs.vlinks("vs", "e5", with_scores=True)
    for layer in scored:
        for m, score in layer.items():
            assert score == pytest.approx(similarity(f32(data["e5"]), f32(data[name(m)])), abs=1e-5)
    assert vs.vlinks("vs", "nosuch") is None
    assert vs.vlinks("nokey", "e0") is None


def test_vrandmember_counts(r):
    """VRANDMEMBER: one member; N distinct members (at most all of them); -N members with
    repetitions allowed; none for a missing key."""
    vs = r.vset()
    data = {f"e{i}": [float(i), 1.0] for i in range(30)}
    fill(r, "vs", data)
    assert name(vs.vrandmember("vs")) in data
    five = names(vs.vrandmember("vs", 5))
    assert len(five) == 5 and len(set(five)) == 5 and set(five) <= set(data)
    assert sorted(names(vs.vrandmember("vs", 100))) == sorted(data)
    many = names(vs.vrandmember("vs", -100))  # 100 draws from 30 members, repeats allowed
    assert len(many) == 100 and set(many) <= set(data)
    assert vs.vrandmember("vs", 0) == []
    assert vs.vrandmember("nokey") is None
    assert vs.vrandmember("nokey", 3) == []
    vs.vadd("two", [1.0, 0.0], "x")
    vs.vadd("two", [0.0, 1.0], "y")
    assert {name(vs.vrandmember("two")) for _ in range(200)} == {"x", "y"}


def test_vrem_of_the_last_element_deletes_the_key(r):
    """VREM reports whether it removed something; the key disappears with its last element."""
    vs = r.vset()
    data = {f"e{i}": [math.cos(i), math.sin(i), 1.0] for i in range(40)}
    fill(r, "vs", data)
    assert not vs.vrem("vs", "nosuch")
    assert not vs.vrem("nokey", "e0")
    order = list(data)
    random.Random(81).shuffle(order)
    for i, n in enumerate(order):
        assert vs.vrem("vs", n)
        assert not vs.vrem("vs", n)
        left = len(order) - i - 1
        assert vs.vcard("vs") == left
        if left:
            assert n not in names(vs.vsim("vs", data[n], count=50))
            assert vs.vemb("vs", n) is None
    assert r.exists("vs") == 0
    assert r.type("vs") == b"none"
    assert vs.vinfo("vs") is None
    assert vs.vsim("vs", [1.0, 0.0, 0.0]) == []
    # A new set may take the name with another dimension.
    assert vs.vadd("vs", [1.0, 2.0], "again") == 1
    assert vs.vdim("vs") == 2


# --- errors -----------------------------------------------------------------------------------


def test_invalid_input_raises(r):
    vs = r.vset()
    vs.vadd("vs", [1.0, 0.0, 0.0], "a")
    with pytest.raises(ResponseError, match="Vector dimension mismatch - got 2 but set has 3"):
        vs.vadd("vs", [1.0, 0.0], "b")
    with pytest.raises(ResponseError, match="Vector dimension mismatch"):
        vs.vsim("vs", [1.0, 0.0])
    with pytest.raises(ResponseError, match="quantization mismatch"):
        vs.vadd("vs", [1.0, 0.0, 0.0], "b", quantization=NOQUANT)
    with pytest.raises(ResponseError, match="invalid vector specification"):
        vs.vadd("vs", [1.0, "x", 0.0], "b")
    with pytest.raises(ResponseError, match="invalid vector specification"):
        vs.vadd("vs", b"\x00\x00\x80", "b")  # an FP32 blob must be a multiple of 4 bytes
    with pytest.raises(ResponseError, match="invalid COUNT"):  # redis-py drops count=0
        r.execute_command("VSIM", "vs", "VALUES", 3, 1, 0, 0, "COUNT", 0)
    with pytest.raises(ResponseError, match="M value mismatch"):  # M is the set's, fixed
        vs.vadd("vs", [0.0, 1.0, 0.0], "b", numlinks=8)
    with pytest.raises(ResponseError, match="invalid M"):  # redis-py drops numlinks=0 and ef=0
        r.execute_command("VADD", "other", "VALUES", 2, 1, 0, "a", "M", 0)
    with pytest.raises(ResponseError, match="invalid EF"):
        r.execute_command("VADD", "other", "VALUES", 2, 1, 0, "a", "EF", 0)
    with pytest.raises(ResponseError, match="key does not exist"):
        vs.vdim("nokey")
    with pytest.raises(ResponseError, match="wrong number of arguments"):
        r.execute_command("VADD", "vs")
    with pytest.raises(redis.DataError):
        vs.vadd("vs", None, "b")  # refused by redis-py before sending
    # Nothing above changed the set.
    assert vs.vcard("vs") == 1
    assert r.exists("other") == 0


def test_wrongtype_both_ways(r):
    vs = r.vset()
    r.set("str", "x")
    r.lpush("list", "x")
    for key in ("str", "list"):
        with pytest.raises(ResponseError, match=WRONGTYPE):
            vs.vadd(key, [1.0, 0.0], "a")
        with pytest.raises(ResponseError, match=WRONGTYPE):
            vs.vsim(key, [1.0, 0.0])
        with pytest.raises(ResponseError, match=WRONGTYPE):
            vs.vcard(key)
        with pytest.raises(ResponseError, match=WRONGTYPE):
            vs.vemb(key, "a")
    vs.vadd("vs", [1.0, 0.0], "a")
    with pytest.raises(ResponseError, match=WRONGTYPE):
        r.get("vs")
    with pytest.raises(ResponseError, match=WRONGTYPE):
        r.lpush("vs", "x")
    with pytest.raises(ResponseError, match=WRONGTYPE):
        r.hget("vs", "a")
    with pytest.raises(ResponseError, match=WRONGTYPE):
        r.sadd("vs", "a")
    assert r.get("str") == b"x"
    assert vs.vcard("vs") == 1


# --- pipelines, transactions, whole-key commands -----------------------------------------------


def test_pipeline_of_1000_vadds(r):
    """1000 VADDs in one pipeline each report a new element, in order; the set then answers
    queries for them; VADDs in a MULTI/EXEC transaction apply together."""
    vs = r.vset()
    data = {f"e:{i}": v for i, v in enumerate(gaussian_vectors(91, 1000, 16))}
    p = r.pipeline(transaction=False)
    pv = p.vset()
    for n, v in data.items():
        pv.vadd("vs", v, n, quantization=NOQUANT)
    pv.vcard("vs")
    results = p.execute()
    assert results[:1000] == [1] * 1000
    assert results[1000] == 1000
    for n in ("e:0", "e:1", "e:500", "e:999"):
        top = vs.vsim("vs", data[n], with_scores=True, count=1)
        assert [name(k) for k in top] == [n]
    tx = r.pipeline(transaction=True)
    tv = tx.vset()
    tv.vadd("vs", [1.0] * 16, "tx1", quantization=NOQUANT)
    tv.vadd("vs", [1.0] * 16, "tx1", quantization=NOQUANT)
    tv.vrem("vs", "e:0")
    tv.vcard("vs")
    assert tx.execute() == [1, 0, 1, 1000]


def test_dump_restore_copy_rename_keep_the_set(r):
    """Whole-key commands carry the set with its graph: a RESTOREd or COPYed set answers VSIM
    and VLINKS exactly as the original, RENAME moves it, EXPIRE and MEMORY USAGE apply.
    (redis-server 8.2 refuses COPY of a vector set, 'not supported for this module key';
    goblin-core copies it.)"""
    vs = r.vset()
    data = {f"e{i}": v for i, v in enumerate(gaussian_vectors(101, 200, 8))}
    fill(r, "vs", data)
    vs.vsetattr("vs", "e3", {"k": 3})
    q = gaussian_vectors(102, 1, 8)[0]
    answer = vs.vsim("vs", q, with_scores=True, count=20)
    payload = r.dump("vs")
    assert r.restore("restored", 0, payload)
    if REFERENCE:
        with pytest.raises(ResponseError, match="not supported for this module key"):
            r.copy("vs", "copied")
        assert r.restore("copied", 0, payload)
    else:
        assert r.copy("vs", "copied")
    for key in ("restored", "copied"):
        assert vs.vsim(key, q, with_scores=True, count=20) == answer
        assert vs.vcard(key) == 200
        assert vs.vgetattr(key, "e3") == {"k": 3}
        # The same neighbours on each layer (redis-server lists them in another order after a
        # RESTORE).
        def layers(k):
            return [sorted(layer) for layer in vs.vlinks(k, "e7")]

        assert layers(key) == layers("vs")
        assert vs.vemb(key, "e9") == vs.vemb("vs", "e9")
    # The copies are independent.
    vs.vrem("copied", "e3")
    assert vs.vcard("vs") == 200 and vs.vcard("copied") == 199
    assert r.rename("vs", "moved")
    assert r.exists("vs") == 0
    assert vs.vsim("moved", q, with_scores=True, count=20) == answer
    assert r.expire("moved", 1000)
    assert 990 < r.ttl("moved") <= 1000
    assert r.memory_usage("moved") > 200 * 8
    with pytest.raises(ResponseError, match="BUSYKEY"):
        r.restore("restored", 0, payload)
    assert r.restore("restored", 0, payload, replace=True)


def test_vismember_and_vrange(r):
    """VISMEMBER (no redis-py wrapper) and VRANGE (Redis 8.4), which walks names in byte order
    with [inclusive, (exclusive, - and + bounds."""
    vs = r.vset()
    words = ["apple", "apricot", "banana", "cherry", "date", "fig", "grape"]
    for w in words:
        vs.vadd("vs", [float(len(w)), 1.0], w)
    assert r.execute_command("VISMEMBER", "vs", "fig") in (1, True)
    assert r.execute_command("VISMEMBER", "vs", "kiwi") in (0, False)
    assert r.execute_command("VISMEMBER", "nokey", "fig") in (0, False)
    if REFERENCE and server_lacks(r, "VRANGE", "no-such-key", "-", "+"):
        pytest.skip("the reference redis-server predates VRANGE (Redis 8.4)")
    assert names(vs.vrange("vs", "-", "+")) == words
    assert names(vs.vrange("vs", "[apple", "[banana", 10)) == ["apple", "apricot", "banana"]
    assert names(vs.vrange("vs", "(apple", "(cherry", 10)) == ["apricot", "banana"]
    assert names(vs.vrange("vs", "[b", "+", 2)) == ["banana", "cherry"]
    assert vs.vrange("vs", "[zzz", "+") == []
    assert vs.vrange("nokey", "-", "+") == []
    seen, start = [], "-"
    while True:  # the iteration pattern: restart after the last name, exclusive
        batch = names(vs.vrange("vs", start, "+", 3))
        seen += batch
        if len(batch) < 3:
            break
        start = "(" + batch[-1]
    assert seen == words


# --- asyncio ----------------------------------------------------------------------------------


def test_asyncio_concurrent_vadds_and_queries(server, r):
    """50 tasks adding 10 elements each through one asyncio client, then 20 concurrent queries:
    every element is there once, and each element's vector finds it first."""
    data = {
        f"t{t}:{i}": v for t in range(50) for i, v in enumerate(gaussian_vectors(1000 + t, 10, 12))
    }

    async def main():
        c = aclient(server)
        try:
            vs = c.vset()

            async def adder(t):
                out = []
                for i in range(10):
                    n = f"t{t}:{i}"
                    out.append(await vs.vadd("vs", data[n], n, quantization=NOQUANT))
                return out

            added = await asyncio.gather(*(adder(t) for t in range(50)))
            assert all(res == [1] * 10 for res in added)
            assert await vs.vcard("vs") == 500
            picks = sorted(data)[::25]

            async def query(n):
                top = await vs.vsim("vs", data[n], with_scores=True, count=1)
                return n, top

            for n, top in await asyncio.gather(*(query(n) for n in picks)):
                assert [name(k) for k in top] == [n]
                assert list(top.values())[0] == pytest.approx(1.0, abs=1e-6)
            emb = await vs.vemb("vs", "t7:3")
            assert emb == pytest.approx(f32(data["t7:3"]), abs=1e-5)
            info = await vs.vinfo("vs")
            assert info[b"size"] == 500
        finally:
            await c.aclose()

    run(main())


def test_asyncio_pipeline_filters_attributes_and_errors(server, r):
    """The asyncio client's pipeline of VADDs with attributes, FILTER queries, VGETATTR as
    parsed JSON, and errors raised in place."""

    async def main():
        c = aclient(server, decode_responses=True)
        try:
            p = c.pipeline(transaction=False)
            pv = p.vset()
            for i in range(100):
                rad = math.radians(i * 3.6)
                attrs = {"i": i, "even": i % 2 == 0}
                pv.vadd("vs", [math.cos(rad), math.sin(rad)], f"p{i}", attributes=attrs)
            assert await p.execute() == [1] * 100
            vs = c.vset()
            got = await vs.vsim("vs", [1.0, 0.0], filter=".i < 10 and .even", count=50)
            assert set(got) == {"p0", "p2", "p4", "p6", "p8"}
            assert await vs.vgetattr("vs", "p42") == {"i": 42, "even": True}
            scored = await vs.vsim("vs", [1.0, 0.0], with_scores=True, count=3)
            assert list(scored) == ["p0", "p1", "p99"] or list(scored) == ["p0", "p99", "p1"]
            assert scored["p1"] == pytest.approx((1 + math.cos(math.radians(3.6))) / 2, abs=0.01)
            with pytest.raises(ResponseError, match="Vector dimension mismatch"):
                await vs.vadd("vs", [1.0, 2.0, 3.0], "bad")
            await c.set("str", "x")
            with pytest.raises(ResponseError, match=WRONGTYPE):
                await vs.vsim("str", [1.0, 0.0])
            p = c.pipeline(transaction=False)
            p.vset().vadd("vs", [1.0], "short")
            p.vset().vcard("vs")
            res = await p.execute(raise_on_error=False)
            assert isinstance(res[0], ResponseError) and "dimension mismatch" in str(res[0])
            assert res[1] == 100
        finally:
            await c.aclose()

    run(main())
