package goblin.clients;

import static goblin.clients.Support.blockedClients;
import static goblin.clients.Support.parseFields;
import static goblin.clients.Support.parseInfo;
import static goblin.clients.Support.waitFor;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import goblin.clients.Support.Proto;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.args.ExpiryOption;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.params.GetExParams;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.params.SetParams;
import redis.clients.jedis.params.ZAddParams;
import redis.clients.jedis.resps.ScanResult;
import redis.clients.jedis.resps.Tuple;
import redis.clients.jedis.util.KeyValue;

/** Jedis 8 data commands, each test once per protocol (RESP3, RESP2). */
@SuppressWarnings("deprecation") // zrangeByScore*, setex: deprecated in Jedis 8, still what services call
class JedisDataTest {
  @BeforeEach
  void emptyKeyspace() {
    Support.flushAll();
  }

  @Test
  void defaultProtocolOfEachClientKind() {
    // RedisClient (Jedis 8's pooled client) with no protocol set sends HELLO 3 and keeps RESP3
    try (RedisClient client = RedisClient.builder().hostAndPort(Support.hostAndPort())
            .clientConfig(DefaultJedisClientConfig.builder().build()).build();
        Connection c = client.getPool().getResource()) {
      assertEquals(RedisProtocol.RESP3, c.getRedisProtocol());
      assertEquals("PONG", client.ping());
    }
    // the legacy Jedis class sends no HELLO: its parsers expect RESP2
    try (Jedis j = new Jedis(GoblinServer.HOST, GoblinServer.get().port)) {
      String info = j.clientInfo(); // this one connects lazily, on the first command
      assertTrue(Support.hasField(info, "resp=2"), info);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void handshakeUsesTheRequestedProtocol(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals(proto == Proto.RESP3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2,
          j.getConnection().getRedisProtocol());
      assertTrue(Support.hasField(j.clientInfo(), proto.clientInfoResp()), j.clientInfo());
    }
    // a client name in the config is set during the handshake (CLIENT SETNAME)
    try (Jedis j = new Jedis(Support.hostAndPort(), DefaultJedisClientConfig.builder()
        .from(proto.jedisConfig()).clientName("billing-svc").build())) {
      assertEquals("billing-svc", j.clientGetname());
      assertTrue(Support.hasField(j.clientInfo(), "name=billing-svc"), j.clientInfo());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void stringsWithSetParams(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals("OK", j.set("k", "v1", SetParams.setParams().nx()));
      assertNull(j.set("k", "v2", SetParams.setParams().nx()), "NX on an existing key");
      assertEquals("v1", j.get("k"));
      assertEquals("OK", j.set("k", "v3", SetParams.setParams().xx()));
      assertNull(j.set("absent", "x", SetParams.setParams().xx()), "XX on a missing key");
      assertFalse(j.exists("absent"));
      // SET ... GET hands back the value it replaced
      assertEquals("v3", j.setGet("k", "v4"));
      assertNull(j.setGet("fresh", "f1"));
      assertEquals("f1", j.get("fresh"));

      assertEquals("OK", j.set("ex", "1", SetParams.setParams().ex(100)));
      long ttl = j.ttl("ex");
      assertTrue(ttl > 95 && ttl <= 100, "ttl " + ttl);
      assertEquals("OK", j.set("px", "1", SetParams.setParams().px(50_000)));
      long pttl = j.pttl("px");
      assertTrue(pttl > 45_000 && pttl <= 50_000, "pttl " + pttl);
      // KEEPTTL keeps the deadline, a plain SET drops it
      assertEquals("OK", j.set("ex", "2", SetParams.setParams().keepTtl()));
      ttl = j.ttl("ex");
      assertTrue(ttl > 95 && ttl <= 100, "ttl after KEEPTTL " + ttl);
      assertEquals("2", j.get("ex"));
      j.set("ex", "3");
      assertEquals(-1, j.ttl("ex"));
      assertEquals(-2, j.ttl("absent"));
      assertEquals(-2, j.pttl("absent"));
      // SET with NX and GET together, on an existing key: nothing set, old value returned
      assertEquals("3", j.setGet("ex", "4", SetParams.setParams().nx()));
      assertEquals("3", j.get("ex"));

      // EXPIRE with NX / GT / LT (Redis 7.0)
      j.set("opt", "v");
      assertEquals(1, j.expire("opt", 100, ExpiryOption.NX));
      assertEquals(0, j.expire("opt", 50, ExpiryOption.NX), "NX: it has a TTL already");
      assertEquals(0, j.expire("opt", 50, ExpiryOption.GT), "GT: 50 < 100");
      assertEquals(1, j.expire("opt", 200, ExpiryOption.GT));
      assertEquals(1, j.expire("opt", 10, ExpiryOption.LT));
      ttl = j.ttl("opt");
      assertTrue(ttl > 5 && ttl <= 10, "ttl after LT " + ttl);
      assertEquals(0, j.expire("absent", 10));
      assertEquals(1, j.persist("opt"));
      assertEquals(-1, j.ttl("opt"));

      assertEquals("v4", j.getEx("k", GetExParams.getExParams().ex(30)));
      ttl = j.ttl("k");
      assertTrue(ttl > 25 && ttl <= 30, "ttl after GETEX EX " + ttl);
      assertEquals("v4", j.getEx("k", GetExParams.getExParams().persist()));
      assertEquals(-1, j.ttl("k"));
      assertNull(j.getEx("absent", GetExParams.getExParams().ex(5)));
      assertEquals("v4", j.getDel("k"));
      assertFalse(j.exists("k"));
      assertNull(j.getDel("k"));

      assertEquals("OK", j.mset("a", "1", "b", "2"));
      assertEquals(Arrays.asList("1", null, "2"), j.mget("a", "nope", "b"));
      assertEquals(0, j.msetnx("a", "x", "c", "3"), "MSETNX sets nothing if one key exists");
      assertFalse(j.exists("c"));

      assertEquals(10.5, j.incrByFloat("f", 10.5));
      assertEquals(10.6, j.incrByFloat("f", 0.1));
      assertEquals("10.6", j.get("f"));
      assertEquals(5000.0, j.incrByFloat("g", 5.0e3));
      assertEquals("5000", j.get("g"));
      assertEquals(7, j.incrBy("n", 7));
      assertEquals(6, j.decr("n"));
      assertEquals(5, j.append("s", "hello"));
      assertEquals("ell", j.getrange("s", 1, 3));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void hashesWithHscan(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals(3, j.hset("h", Map.of("name", "ada", "lang", "java", "n", "1")));
      assertEquals(1, j.hset("h", Map.of("name", "grace", "team", "core")), "one new field");
      assertEquals(Map.of("name", "grace", "lang", "java", "n", "1", "team", "core"),
          j.hgetAll("h"));
      assertEquals(Arrays.asList("grace", null), j.hmget("h", "name", "nope"));
      assertEquals(11, j.hincrBy("h", "n", 10));
      assertEquals(2.5, j.hincrByFloat("h", "fl", 2.5));
      assertTrue(j.hexists("h", "lang"));
      assertEquals(1, j.hdel("h", "lang", "nope"));
      assertEquals(4, j.hlen("h"));
      assertEquals(0, j.hsetnx("h", "name", "x"));
      assertEquals(Map.of(), j.hgetAll("absent"));

      // HSCAN with MATCH and COUNT over a hash too big to be answered whole
      Map<String, String> big = new HashMap<>();
      for (int i = 0; i < 300; i++) {
        big.put("f" + i, "v" + i);
      }
      assertEquals(300, j.hset("big", big));
      Set<String> expected = new HashSet<>();
      for (String f : big.keySet()) {
        if (f.startsWith("f1")) {
          expected.add(f);
        }
      }
      assertEquals(111, expected.size()); // f1, f10..f19, f100..f199
      Set<String> seen = new HashSet<>();
      ScanParams params = new ScanParams().match("f1*").count(10);
      String cursor = ScanParams.SCAN_POINTER_START;
      int calls = 0;
      do {
        ScanResult<Map.Entry<String, String>> r = j.hscan("big", cursor, params);
        for (Map.Entry<String, String> e : r.getResult()) {
          assertEquals("v" + e.getKey().substring(1), e.getValue(), "value of " + e.getKey());
          seen.add(e.getKey());
        }
        cursor = r.getCursor();
        assertTrue(++calls < 10_000, "HSCAN never returned cursor 0");
      } while (!cursor.equals("0"));
      assertEquals(expected, seen);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void lists(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals(3, j.rpush("l", "a", "b", "c"));
      assertEquals(5, j.lpush("l", "z", "y"));
      assertEquals(List.of("y", "z", "a", "b", "c"), j.lrange("l", 0, -1));
      assertEquals("a", j.lindex("l", 2));
      assertEquals("y", j.lpop("l"));
      assertEquals(List.of("z", "a"), j.lpop("l", 2));
      assertEquals("c", j.rpop("l"));
      assertEquals(List.of("b"), j.lrange("l", 0, -1));
      assertEquals(4, j.rpush("l", "x", "b", "x"));
      assertEquals(2, j.lrem("l", 0, "x"));
      assertEquals("OK", j.lset("l", 0, "first"));
      assertEquals(List.of("first", "b"), j.lrange("l", 0, -1));
      assertEquals("OK", j.ltrim("l", 1, -1));
      assertEquals(1, j.llen("l"));
      assertNull(j.lpop("absent"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void blpopTimesOutThenIsWokenByAnotherClient(Proto proto) throws Exception {
    try (Jedis j = proto.jedis(); Jedis other = proto.jedis()) {
      long t0 = System.nanoTime();
      assertNull(j.blpop(0.2, "empty"), "BLPOP on an empty list times out with nil");
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms >= 150, "BLPOP 0.2 returned after " + ms + " ms");

      CompletableFuture<KeyValue<String, String>> popped =
          CompletableFuture.supplyAsync(() -> j.blpop(10.0, "jobs", "other-jobs"));
      waitFor(Duration.ofSeconds(5), "BLPOP to block", () -> blockedClients(other) == 1);
      assertEquals(1, other.rpush("jobs", "job-1"));
      KeyValue<String, String> kv = popped.get(5, TimeUnit.SECONDS);
      assertEquals("jobs", kv.getKey());
      assertEquals("job-1", kv.getValue());
      assertEquals(0, other.llen("jobs"), "the woken client took the element");
      assertEquals(0, blockedClients(other));

      // the int-timeout form, answered at once, returns [key, value]
      other.rpush("ready", "x");
      assertEquals(List.of("ready", "x"), j.blpop(1, "ready"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void sets(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals(3, j.sadd("s1", "a", "b", "c"));
      assertEquals(1, j.sadd("s1", "c", "d"));
      assertEquals(Set.of("a", "b", "c", "d"), j.smembers("s1"));
      j.sadd("s2", "c", "d", "e");
      assertEquals(Set.of("c", "d"), j.sinter("s1", "s2"));
      assertEquals(Set.of("a", "b", "c", "d", "e"), j.sunion("s1", "s2"));
      assertEquals(Set.of("a", "b"), j.sdiff("s1", "s2"));
      assertTrue(j.sismember("s1", "a"));
      assertEquals(List.of(true, false), j.smismember("s1", "a", "zz"));
      assertEquals(4, j.scard("s1"));
      assertEquals(1, j.srem("s1", "a", "zz"));
      assertEquals(2, j.sinterstore("dst", "s1", "s2"));
      assertEquals(Set.of("c", "d"), j.smembers("dst"));
      assertEquals(Set.of("c", "d", "e"), j.spop("s2", 5));
      assertFalse(j.exists("s2"), "an emptied set is deleted");
      assertEquals(Set.of(), j.smembers("s2"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void sortedSets(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals(4, j.zadd("z", Map.of("alice", 1.0, "bob", 2.5, "carol", 3.0, "dave", 10.0)));
      assertEquals(0, j.zadd("z", 5.0, "alice", ZAddParams.zAddParams().nx()));
      assertEquals(1.0, j.zscore("z", "alice"));
      assertEquals(1, j.zadd("z", 5.0, "alice", ZAddParams.zAddParams().xx().ch()));
      assertEquals(0, j.zadd("z", 4.0, "alice", ZAddParams.zAddParams().gt().ch()), "GT: lower");
      assertEquals(5.0, j.zscore("z", "alice"));
      assertEquals(0, j.zadd("z", 1.0, "erin", ZAddParams.zAddParams().xx()));
      assertNull(j.zscore("z", "erin"));

      assertEquals(List.of(new Tuple("bob", 2.5), new Tuple("carol", 3.0)),
          j.zrangeByScoreWithScores("z", 1, 3));
      List<Tuple> page = j.zrangeByScoreWithScores("z", "(2.5", "+inf", 0, 2);
      assertEquals(List.of(new Tuple("carol", 3.0), new Tuple("alice", 5.0)), page);
      assertEquals("alice", page.get(1).getElement());
      assertEquals(5.0, page.get(1).getScore());
      assertEquals(0L, j.zrevrank("z", "dave"));
      assertEquals(3L, j.zrevrank("z", "bob"));
      assertNull(j.zrevrank("z", "nobody"));

      assertEquals(3.5, j.zincrby("z", 1.0, "bob"));
      assertEquals(0.25, j.zincrby("z", 0.25, "newcomer"));
      assertEquals(List.of("newcomer", "carol", "bob", "alice", "dave"), j.zrange("z", 0, -1));
      assertEquals(List.of(new Tuple("dave", 10.0), new Tuple("alice", 5.0)),
          j.zrevrangeWithScores("z", 0, 1));
      assertEquals(3, j.zcount("z", 3, 5));
      assertEquals(1, j.zrem("z", "newcomer", "nobody"));
      assertEquals(4, j.zcard("z"));
      assertEquals(1L, j.zrank("z", "bob"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void scanWithMatchAndCountOverManyKeys(Proto proto) {
    try (Jedis j = proto.jedis()) {
      Set<String> users = new HashSet<>();
      try (Pipeline p = j.pipelined()) {
        for (int i = 0; i < 1000; i++) {
          p.set("user:" + i, "u" + i);
          users.add("user:" + i);
        }
        for (int i = 0; i < 200; i++) {
          p.set("session:" + i, "s" + i);
        }
        p.hset("user:profiles", "1", "ada");
        p.sync();
      }
      users.add("user:profiles");
      assertEquals(1201, j.dbSize());

      ScanParams params = new ScanParams().match("user:*").count(100);
      Set<String> seen = new HashSet<>();
      String cursor = ScanParams.SCAN_POINTER_START;
      int calls = 0;
      do {
        ScanResult<String> r = j.scan(cursor, params);
        // COUNT bounds the work of one call: no reply carries the whole keyspace
        assertTrue(r.getResult().size() <= 500, "one SCAN reply held " + r.getResult().size());
        for (String k : r.getResult()) {
          assertTrue(k.startsWith("user:"), "MATCH let through " + k);
        }
        seen.addAll(r.getResult());
        cursor = r.getCursor();
        assertTrue(++calls < 10_000, "SCAN never returned cursor 0");
      } while (!cursor.equals("0"));
      assertEquals(users, seen);

      // SCAN ... TYPE hash
      Set<String> hashes = new HashSet<>();
      cursor = ScanParams.SCAN_POINTER_START;
      do {
        ScanResult<String> r = j.scan(cursor, params, "hash");
        hashes.addAll(r.getResult());
        cursor = r.getCursor();
      } while (!cursor.equals("0"));
      assertEquals(Set.of("user:profiles"), hashes);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void binarySafeValues(Proto proto) {
    try (Jedis j = proto.jedis()) {
      byte[] key = {'b', 'i', 'n', 0, '\r', '\n', 'k'};
      byte[] val = {0, 1, '\r', '\n', (byte) 0xff, 0, 'x', '\r'};
      assertEquals("OK", j.set(key, val));
      assertArrayEquals(val, j.get(key));
      assertEquals(val.length, j.strlen(key));
      assertFalse(j.exists(new byte[] {'b', 'i', 'n'}), "the key is not cut at the NUL");
      assertEquals(val.length + 2, j.append(key, new byte[] {0, '\n'}));
      byte[] appended = Arrays.copyOf(val, val.length + 2);
      appended[val.length] = 0;
      appended[val.length + 1] = '\n';
      assertArrayEquals(appended, j.get(key));

      byte[] field = {'\r', '\n', 0};
      assertEquals(1, j.hset("bh".getBytes(StandardCharsets.UTF_8), field, val));
      assertArrayEquals(val, j.hget("bh".getBytes(StandardCharsets.UTF_8), field));
      byte[] lk = "bl".getBytes(StandardCharsets.UTF_8);
      assertEquals(2, j.rpush(lk, val, new byte[0]));
      List<byte[]> items = j.lrange(lk, 0, -1);
      assertArrayEquals(val, items.get(0));
      assertArrayEquals(new byte[0], items.get(1));

      // 1 MiB of every byte value
      byte[] large = new byte[1 << 20];
      new Random(42).nextBytes(large);
      assertEquals("OK", j.set("large".getBytes(StandardCharsets.UTF_8), large));
      assertArrayEquals(large, j.get("large".getBytes(StandardCharsets.UTF_8)));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void errorsAsJedisDataException(Proto proto) {
    try (Jedis j = proto.jedis()) {
      j.set("str", "abc");
      JedisDataException e = assertThrows(JedisDataException.class, () -> j.lpush("str", "x"));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          e.getMessage());
      e = assertThrows(JedisDataException.class, () -> j.hgetAll("str"));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          e.getMessage());
      e = assertThrows(JedisDataException.class, () -> j.incr("str"));
      assertEquals("ERR value is not an integer or out of range", e.getMessage());
      e = assertThrows(JedisDataException.class, () -> j.incrByFloat("str", 1));
      assertEquals("ERR value is not a valid float", e.getMessage());
      e = assertThrows(JedisDataException.class,
          () -> j.set("k", "v", SetParams.setParams().ex(0)));
      assertEquals("ERR invalid expire time in 'set' command", e.getMessage());
      e = assertThrows(JedisDataException.class,
          () -> j.sendCommand(() -> "NOSUCHCMD".getBytes(StandardCharsets.UTF_8), "a"));
      assertEquals("ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' ",
          e.getMessage());
      // the connection stays usable after errors
      assertEquals("PONG", j.ping());
      assertEquals("abc", j.get("str"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void infoParsing(Proto proto) {
    try (Jedis j = proto.jedis(); Jedis second = proto.jedis()) {
      second.ping();
      j.set("a", "1");
      j.set("b", "2");
      j.setex("c", 100, "3");
      // in RESP3 INFO is a verbatim string: Jedis hands back the text without its "txt:" tag
      String all = j.info();
      assertTrue(all.startsWith("# Server"), all.substring(0, Math.min(40, all.length())));
      for (String section : List.of("# Clients", "# Memory", "# Stats", "# Keyspace")) {
        assertTrue(all.contains(section), "INFO lacks " + section);
      }
      Map<String, String> server = parseInfo(j.info("server"));
      assertTrue(server.get("redis_version").matches("\\d+\\.\\d+\\.\\d+"),
          server.get("redis_version"));
      assertEquals(String.valueOf(GoblinServer.get().port), server.get("tcp_port"));
      Map<String, String> clients = parseInfo(j.info("clients"));
      assertTrue(Integer.parseInt(clients.get("connected_clients")) >= 2, clients.toString());
      Map<String, String> db0 = parseFields(parseInfo(j.info("keyspace")).get("db0"));
      assertEquals("3", db0.get("keys"));
      assertEquals("1", db0.get("expires"));
      assertEquals(3, j.dbSize());
    }
  }
}
