package goblin.clients;

import static goblin.clients.Support.blockedClients;
import static goblin.clients.Support.next;
import static goblin.clients.Support.sha1Hex;
import static goblin.clients.Support.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import goblin.clients.Support.Proto;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPubSub;
import redis.clients.jedis.StreamEntryID;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisNoScriptException;
import redis.clients.jedis.params.XPendingParams;
import redis.clients.jedis.params.XReadGroupParams;
import redis.clients.jedis.resps.LibraryInfo;
import redis.clients.jedis.resps.StreamEntry;
import redis.clients.jedis.resps.StreamPendingEntry;
import redis.clients.jedis.resps.StreamPendingSummary;

/** Jedis pub/sub, Lua scripting, functions and streams, once per protocol. */
class JedisPubSubScriptingTest {
  @BeforeEach
  void emptyKeyspace() {
    Support.flushAll();
  }

  /** Writes every callback as one line, in arrival order. */
  static final class Recorder extends JedisPubSub {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    @Override
    public void onSubscribe(String channel, int count) {
      events.add("subscribe " + channel + " " + count);
    }

    @Override
    public void onUnsubscribe(String channel, int count) {
      events.add("unsubscribe " + channel + " " + count);
    }

    @Override
    public void onPSubscribe(String pattern, int count) {
      events.add("psubscribe " + pattern + " " + count);
    }

    @Override
    public void onPUnsubscribe(String pattern, int count) {
      events.add("punsubscribe " + pattern + " " + count);
    }

    @Override
    public void onMessage(String channel, String message) {
      events.add("message " + channel + " " + message);
    }

    @Override
    public void onPMessage(String pattern, String channel, String message) {
      events.add("pmessage " + pattern + " " + channel + " " + message);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void pubSubOnAThread(Proto proto) throws Exception {
    Recorder rec = new Recorder();
    AtomicReference<Throwable> subscriberError = new AtomicReference<>();
    try (Jedis sub = proto.jedis(); Jedis pub = proto.jedis()) {
      // subscribe() blocks its thread until the last unsubscribe, as in a service's listener
      Thread listener = new Thread(() -> {
        try {
          sub.subscribe(rec, "orders", "alerts");
        } catch (Throwable t) {
          subscriberError.set(t);
        }
      }, "jedis-subscriber");
      listener.start();
      assertEquals("subscribe orders 1", next(rec.events, "subscribe orders"));
      assertEquals("subscribe alerts 2", next(rec.events, "subscribe alerts"));

      for (int i = 0; i < 100; i++) {
        assertEquals(1, pub.publish("orders", "o" + i), "receivers of o" + i);
      }
      for (int i = 0; i < 100; i++) {
        assertEquals("message orders o" + i, next(rec.events, "o" + i));
      }
      assertEquals(Map.of("orders", 1L, "alerts", 1L, "none", 0L),
          pub.pubsubNumSub("orders", "alerts", "none"));

      rec.psubscribe("news.*");
      assertEquals("psubscribe news.* 3", next(rec.events, "psubscribe"));
      assertEquals(1, pub.publish("news.sport", "goal"));
      assertEquals("pmessage news.* news.sport goal", next(rec.events, "pmessage"));
      assertEquals(1, pub.pubsubNumPat());
      assertEquals(1, pub.publish("alerts", "fire"));
      assertEquals("message alerts fire", next(rec.events, "alerts message"));

      rec.unsubscribe("orders");
      assertEquals("unsubscribe orders 2", next(rec.events, "unsubscribe orders"));
      assertEquals(0, pub.publish("orders", "late"), "no one listens to orders any more");
      rec.unsubscribe("alerts");
      assertEquals("unsubscribe alerts 1", next(rec.events, "unsubscribe alerts"));
      rec.punsubscribe("news.*");
      assertEquals("punsubscribe news.* 0", next(rec.events, "punsubscribe"));
      // with no subscription left, subscribe() returns and the thread ends
      listener.join(5000);
      assertFalse(listener.isAlive(), "subscribe() did not return after the last unsubscribe");
      assertNull(subscriberError.get());
      assertTrue(rec.events.isEmpty(), "unexpected events " + rec.events);
      assertEquals("PONG", sub.ping(), "the connection is usable after leaving pub/sub");
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void evalEvalshaAndLuaErrors(Proto proto) {
    try (Jedis j = proto.jedis()) {
      assertEquals("OK", j.scriptFlush());
      // Lua -> reply conversion: floats truncate, nil ends the array
      assertEquals(List.of(1L, 2L, 3L, "x"), j.eval("return {1,2,3.99,'x',nil,5}"));
      assertEquals(1L, j.eval("return true"));
      assertNull(j.eval("return false"));
      assertEquals("FINE", j.eval("return redis.status_reply('FINE')"));
      assertEquals("val", j.eval(
          "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
          List.of("sk"), List.of("val")));

      String script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
      String sha = j.scriptLoad(script);
      assertEquals(sha1Hex(script), sha);
      assertEquals(List.of(true, false), j.scriptExists(sha, "0".repeat(40)));
      assertEquals(5L, j.evalsha(sha, List.of("cnt"), List.of("5")));
      assertEquals(12L, j.evalsha(sha, 1, "cnt", "7"));

      JedisDataException e = assertThrows(JedisDataException.class,
          () -> j.eval("return redis.error_reply('MY custom')"));
      assertEquals("MY custom", e.getMessage());
      j.set("str", "abc");
      e = assertThrows(JedisDataException.class, () -> j.evalsha(sha, 1, "str", "1"));
      assertEquals("ERR value is not an integer or out of range script: " + sha
          + ", on @user_script:1.", e.getMessage());
      String boom = "error('boom')";
      e = assertThrows(JedisDataException.class, () -> j.eval(boom));
      assertEquals("ERR user_script:1: boom script: " + sha1Hex(boom) + ", on @user_script:1.",
          e.getMessage());
      // pcall hands the error to the script as a table
      assertEquals("ERR value is not an integer or out of range",
          j.eval("return redis.pcall('INCR', KEYS[1])['err']", 1, "str"));

      JedisNoScriptException noScript = assertThrows(JedisNoScriptException.class,
          () -> j.evalsha("0".repeat(40)));
      assertEquals("NOSCRIPT No matching script. Please use EVAL.", noScript.getMessage());
      assertEquals("OK", j.scriptFlush());
      assertEquals(List.of(false), j.scriptExists(new String[] {sha}));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void functionLoadAndFcall(Proto proto) {
    String lib = "#!lua name=javalib\n"
        + "redis.register_function('echo_first', function(keys, args) return args[1] end)\n"
        + "redis.register_function{function_name='get_ro', callback=function(keys, args)"
        + " return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n"
        + "redis.register_function('set_len', function(keys, args)"
        + " redis.call('SET', keys[1], args[1]); return redis.call('STRLEN', keys[1]) end)\n";
    try (Jedis j = proto.jedis()) {
      assertEquals("OK", j.functionFlush()); // FLUSHALL keeps functions
      assertEquals("javalib", j.functionLoad(lib));
      assertEquals("hello", j.fcall("echo_first", List.of(), List.of("hello")));
      assertEquals(5L, j.fcall("set_len", List.of("fk"), List.of("abcde")));
      assertEquals("abcde", j.fcallReadonly("get_ro", List.of("fk"), List.of()));

      JedisDataException e = assertThrows(JedisDataException.class, () -> j.functionLoad(lib));
      assertEquals("ERR Library 'javalib' already exists", e.getMessage());
      assertEquals("javalib", j.functionLoadReplace(lib));
      List<LibraryInfo> libs = j.functionList();
      assertEquals(1, libs.size());
      assertEquals("javalib", libs.get(0).getLibraryName());
      assertEquals("LUA", libs.get(0).getEngine());
      Set<Object> names = new HashSet<>();
      libs.get(0).getFunctions().forEach(f -> names.add(f.get("name")));
      assertEquals(Set.of("echo_first", "get_ro", "set_len"), names);

      e = assertThrows(JedisDataException.class,
          () -> j.fcall("nope", List.of(), List.of()));
      assertEquals("ERR Function not found", e.getMessage());
      assertEquals("OK", j.functionDelete("javalib"));
      e = assertThrows(JedisDataException.class,
          () -> j.fcall("echo_first", List.of(), List.of("x")));
      assertEquals("ERR Function not found", e.getMessage());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void streamsWithConsumerGroups(Proto proto) throws Exception {
    try (Jedis j = proto.jedis(); Jedis other = proto.jedis()) {
      StreamEntryID id1 = j.xadd("events", StreamEntryID.NEW_ENTRY, Map.of("type", "signup"));
      StreamEntryID id2 = j.xadd("events", StreamEntryID.NEW_ENTRY, Map.of("type", "login"));
      StreamEntryID id3 = j.xadd("events", StreamEntryID.NEW_ENTRY, Map.of("type", "logout"));
      assertTrue(id2.compareTo(id1) > 0 && id3.compareTo(id2) > 0, "IDs grow");
      assertEquals(3, j.xlen("events"));
      assertEquals(new StreamEntryID(5, 1), j.xadd("fixed", new StreamEntryID(5, 1), Map.of("a", "1")));
      JedisDataException e = assertThrows(JedisDataException.class,
          () -> j.xadd("fixed", new StreamEntryID(5, 0), Map.of("a", "2")));
      assertEquals("ERR The ID specified in XADD is equal or smaller than the target stream top item",
          e.getMessage());

      assertEquals("OK", j.xgroupCreate("events", "workers", new StreamEntryID(0, 0), false));
      var got = j.xreadGroup("workers", "c1", XReadGroupParams.xReadGroupParams().count(2),
          Map.of("events", StreamEntryID.XREADGROUP_UNDELIVERED_ENTRY));
      assertEquals(1, got.size());
      assertEquals("events", got.get(0).getKey());
      List<StreamEntry> entries = got.get(0).getValue();
      assertEquals(List.of(id1, id2), entries.stream().map(StreamEntry::getID).toList());
      assertEquals(Map.of("type", "signup"), entries.get(0).getFields());
      assertEquals(Map.of("type", "login"), entries.get(1).getFields());
      var rest = j.xreadGroup("workers", "c2", XReadGroupParams.xReadGroupParams().count(10),
          Map.of("events", StreamEntryID.XREADGROUP_UNDELIVERED_ENTRY));
      assertEquals(List.of(id3), rest.get(0).getValue().stream().map(StreamEntry::getID).toList());

      StreamPendingSummary pending = j.xpending("events", "workers");
      assertEquals(3, pending.getTotal());
      assertEquals(id1, pending.getMinId());
      assertEquals(id3, pending.getMaxId());
      assertEquals(Map.of("c1", 2L, "c2", 1L), pending.getConsumerMessageCount());
      assertEquals(2, j.xack("events", "workers", id1, id2));
      assertEquals(0, j.xack("events", "workers", id1), "acked twice");
      List<StreamPendingEntry> left = j.xpending("events", "workers",
          XPendingParams.xPendingParams().count(10));
      assertEquals(1, left.size());
      assertEquals(id3, left.get(0).getID());
      assertEquals("c2", left.get(0).getConsumerName());
      assertEquals(1, left.get(0).getDeliveredTimes());

      // a consumer blocked on the group is woken by another client's XADD
      CompletableFuture<List<Map.Entry<String, List<StreamEntry>>>> blocked =
          CompletableFuture.supplyAsync(() -> j.xreadGroup("workers", "c1",
              XReadGroupParams.xReadGroupParams().count(1).block(10_000),
              Map.of("events", StreamEntryID.XREADGROUP_UNDELIVERED_ENTRY)));
      waitFor(Duration.ofSeconds(5), "XREADGROUP BLOCK to block",
          () -> blockedClients(other) == 1);
      StreamEntryID id4 = other.xadd("events", StreamEntryID.NEW_ENTRY, Map.of("type", "late"));
      var woken = blocked.get(5, TimeUnit.SECONDS);
      assertEquals(id4, woken.get(0).getValue().get(0).getID());
      assertEquals(Map.of("type", "late"), woken.get(0).getValue().get(0).getFields());
      assertEquals(2, j.xpending("events", "workers").getTotal());
    }
  }
}
