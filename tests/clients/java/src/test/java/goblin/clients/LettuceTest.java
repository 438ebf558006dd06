package goblin.clients;

import static goblin.clients.Support.next;
import static goblin.clients.Support.sha1Hex;
import static goblin.clients.Support.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import goblin.clients.Support.Proto;
import io.lettuce.core.Consumer;
import io.lettuce.core.KeyValue;
import io.lettuce.core.KillArgs;
import io.lettuce.core.LettuceFutures;
import io.lettuce.core.Range;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanIterator;
import io.lettuce.core.ScoredValue;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.StreamMessage;
import io.lettuce.core.TrackingArgs;
import io.lettuce.core.TransactionResult;
import io.lettuce.core.XReadArgs;
import io.lettuce.core.XReadArgs.StreamOffset;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.reactive.RedisReactiveCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.models.stream.PendingMessages;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import io.lettuce.core.support.ConnectionPoolSupport;
import io.lettuce.core.support.caching.CacheAccessor;
import io.lettuce.core.support.caching.CacheFrontend;
import io.lettuce.core.support.caching.ClientSideCaching;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.commons.pool2.impl.GenericObjectPool;
import org.apache.commons.pool2.impl.GenericObjectPoolConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import reactor.core.publisher.Flux;

/**
 * Lettuce 7: sync, async (pipelined), reactive, pub/sub, MULTI, scripts, streams, pools,
 * reconnects, keyspace notifications and client-side caching.
 */
@SuppressWarnings("unchecked") // Lettuce's generic varargs (ScoredValue..., StreamOffset...)
class LettuceTest {
  /** A pub/sub listener that queues each event as one line of text, in arrival order. */
  static final class Recorder extends RedisPubSubAdapter<String, String> {
    private final BlockingQueue<String> events;

    Recorder(BlockingQueue<String> events) {
      this.events = events;
    }

    @Override
    public void subscribed(String channel, long count) {
      events.add("subscribed " + channel + " " + count);
    }

    @Override
    public void psubscribed(String pattern, long count) {
      events.add("psubscribed " + pattern + " " + count);
    }

    @Override
    public void unsubscribed(String channel, long count) {
      events.add("unsubscribed " + channel + " " + count);
    }

    @Override
    public void message(String channel, String message) {
      events.add("message " + channel + " " + message);
    }

    @Override
    public void message(String pattern, String channel, String message) {
      events.add("pmessage " + pattern + " " + channel + " " + message);
    }
  }

  static final Duration WAIT = Duration.ofSeconds(10);
  static ClientResources resources;
  static final Map<Proto, RedisClient> clients = new EnumMap<>(Proto.class);

  @BeforeAll
  static void clients() {
    // one set of event loops for the class: creating them per test would dominate the run time
    resources = DefaultClientResources.create();
    for (Proto p : Proto.values()) {
      clients.put(p, p.lettuce(resources));
    }
  }

  @AfterAll
  static void shutdown() {
    clients.values().forEach(c -> c.shutdown(Duration.ZERO, Duration.ofSeconds(2)));
    clients.clear();
    if (resources != null) {
      resources.shutdown(0, 2, TimeUnit.SECONDS);
    }
  }

  @BeforeEach
  void emptyKeyspace() {
    Support.flushAll();
  }

  static StatefulRedisConnection<String, String> connect(Proto proto) {
    return clients.get(proto).connect();
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void syncApi(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      assertTrue(Support.hasField(r.clientInfo(), proto.clientInfoResp()), r.clientInfo());
      assertEquals("OK", r.set("k", "v1", SetArgs.Builder.nx().ex(100)));
      assertNull(r.set("k", "v2", SetArgs.Builder.nx()), "NX on an existing key");
      assertEquals("v1", r.get("k"));
      long ttl = r.ttl("k");
      assertTrue(ttl > 95 && ttl <= 100, "ttl " + ttl);
      assertEquals("v1", r.setGet("k", "v2"));
      assertEquals(-1, r.ttl("k"), "SET without KEEPTTL drops the TTL");
      assertEquals("v2", r.getdel("k"));
      assertEquals(0, r.exists("k"));

      assertEquals("OK", r.mset(Map.of("a", "1", "b", "2")));
      assertEquals(List.of(KeyValue.just("a", "1"), KeyValue.empty("nope"), KeyValue.just("b", "2")),
          r.mget("a", "nope", "b"));
      assertEquals(3, r.incrby("a", 2));
      assertEquals(3.5, r.incrbyfloat("a", 0.5));

      assertEquals(2, r.hset("h", Map.of("name", "ada", "lang", "java")));
      assertEquals(Map.of("name", "ada", "lang", "java"), r.hgetall("h"));
      assertEquals(5, r.hincrby("h", "n", 5));

      assertEquals(3, r.rpush("l", "a", "b", "c"));
      assertEquals(List.of("a", "b", "c"), r.lrange("l", 0, -1));
      assertEquals(2, r.sadd("s", "x", "y"));
      assertEquals(Set.of("x", "y"), r.smembers("s"));

      assertEquals(3, r.zadd("z", ScoredValue.just(1.5, "a"), ScoredValue.just(2.0, "b"),
          ScoredValue.just(3.25, "c")));
      assertEquals(List.of(ScoredValue.just(2.0, "b"), ScoredValue.just(3.25, "c")),
          r.zrangebyscoreWithScores("z", Range.create(2, 5)));
      assertEquals(4.0, r.zincrby("z", 2.5, "a"));
      assertEquals(0L, r.zrevrank("z", "a"));

      assertTrue(r.expire("l", 50));
      assertTrue(r.persist("l"));
      assertEquals("list", r.type("l"));
      assertEquals(6, r.dbsize());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void asyncFuturesAndErrors(Proto proto) throws Exception {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisAsyncCommands<String, String> a = conn.async();
      assertEquals("OK", a.set("k", "7").get(5, TimeUnit.SECONDS));
      // chained stages, each issued when the previous reply arrived
      String chained = a.incrby("k", 3).thenCompose(n -> a.append("k", "!"))
          .thenCompose(len -> a.get("k")).toCompletableFuture().get(5, TimeUnit.SECONDS);
      assertEquals("10!", chained);

      RedisFuture<Long> bad = a.incr("k");
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> bad.get(5, TimeUnit.SECONDS));
      assertInstanceOf(RedisCommandExecutionException.class, e.getCause());
      assertEquals("ERR value is not an integer or out of range", e.getCause().getMessage());
      a.sadd("set", "m");
      e = assertThrows(ExecutionException.class,
          () -> a.lpush("set", "x").get(5, TimeUnit.SECONDS));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          e.getCause().getMessage());
      assertEquals("PONG", a.ping().get(5, TimeUnit.SECONDS));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void asyncPipeliningWithManualFlush(Proto proto) throws Exception {
    try (StatefulRedisConnection<String, String> conn = connect(proto);
        StatefulRedisConnection<String, String> observer = connect(proto)) {
      RedisAsyncCommands<String, String> a = conn.async();
      conn.setAutoFlushCommands(false);
      List<RedisFuture<Long>> pushes = new ArrayList<>();
      List<RedisFuture<Long>> incrs = new ArrayList<>();
      List<RedisFuture<?>> all = new ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        RedisFuture<Long> f = i % 2 == 0 ? a.rpush("pl", "v" + i) : a.incr("pc");
        (i % 2 == 0 ? pushes : incrs).add(f);
        all.add(f);
      }
      // nothing has left the client yet
      assertEquals(0, observer.sync().exists("pl", "pc"));
      assertFalse(all.get(0).isDone());
      conn.flushCommands();
      assertTrue(LettuceFutures.awaitAll(WAIT, all.toArray(new RedisFuture[0])),
          "1000 pipelined replies within " + WAIT);
      for (int k = 0; k < 500; k++) {
        assertEquals(k + 1, pushes.get(k).get(), "RPUSH reply " + k);
        assertEquals(k + 1, incrs.get(k).get(), "INCR reply " + k);
      }
      List<String> list = observer.sync().lrange("pl", 0, -1);
      assertEquals(500, list.size());
      for (int k = 0; k < 500; k++) {
        assertEquals("v" + (2 * k), list.get(k));
      }
      conn.setAutoFlushCommands(true);
      assertEquals("500", a.get("pc").get(5, TimeUnit.SECONDS));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void reactiveApi(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisReactiveCommands<String, String> rx = conn.reactive();
      Long last = Flux.range(0, 100).concatMap(i -> rx.incr("rc")).last().block(WAIT);
      assertEquals(100L, last);
      List<String> items = rx.lpush("rl", "x", "y", "z").thenMany(rx.lrange("rl", 0, -1))
          .collectList().block(WAIT);
      assertEquals(List.of("z", "y", "x"), items);
      RedisCommandExecutionException e = assertThrows(RedisCommandExecutionException.class,
          () -> rx.hget("rl", "f").block(WAIT));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          e.getMessage());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void pubSubListenerInOrder(Proto proto) {
    BlockingQueue<String> events = new LinkedBlockingQueue<>();
    try (StatefulRedisPubSubConnection<String, String> sub = clients.get(proto).connectPubSub();
        StatefulRedisConnection<String, String> pub = connect(proto)) {
      sub.addListener(new Recorder(events));
      sub.sync().subscribe("orders", "alerts");
      assertEquals("subscribed orders 1", next(events, "subscribed orders"));
      assertEquals("subscribed alerts 2", next(events, "subscribed alerts"));
      RedisCommands<String, String> p = pub.sync();
      for (int i = 0; i < 200; i++) {
        assertEquals(1, p.publish("orders", "o" + i));
      }
      for (int i = 0; i < 200; i++) {
        assertEquals("message orders o" + i, next(events, "o" + i));
      }
      sub.sync().psubscribe("news.*");
      assertEquals("psubscribed news.* 3", next(events, "psubscribed"));
      assertEquals(1, p.publish("news.tech", "release"));
      assertEquals("pmessage news.* news.tech release", next(events, "pmessage"));
      assertEquals(Map.of("orders", 1L), p.pubsubNumsub("orders"));
      sub.sync().unsubscribe("orders");
      assertEquals("unsubscribed orders 2", next(events, "unsubscribed"));
      assertEquals(0, p.publish("orders", "late"));
      assertEquals(1, p.publish("alerts", "fire"));
      assertEquals("message alerts fire", next(events, "alerts"));
      assertTrue(events.isEmpty(), "unexpected " + events);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void transactionsAndWatch(Proto proto) throws Exception {
    try (StatefulRedisConnection<String, String> conn = connect(proto);
        StatefulRedisConnection<String, String> other = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      assertEquals("OK", r.multi());
      assertNull(r.set("k", "1"), "inside MULTI the sync API returns null (QUEUED)");
      r.incrby("k", 41);
      r.get("k");
      r.set("str", "x");
      r.lpush("str", "e");
      TransactionResult tr = r.exec();
      assertFalse(tr.wasDiscarded());
      assertEquals(5, tr.size());
      assertEquals("OK", tr.get(0));
      assertEquals(42L, (Long) tr.get(1));
      assertEquals("42", tr.get(2));
      assertEquals("OK", tr.get(3));
      RedisCommandExecutionException e = assertInstanceOf(RedisCommandExecutionException.class,
          tr.get(4));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          e.getMessage());

      r.set("balance", "100");
      assertEquals("OK", r.watch("balance"));
      other.sync().set("balance", "50");
      r.multi();
      r.set("balance", "70");
      TransactionResult aborted = r.exec();
      assertTrue(aborted.wasDiscarded(), "EXEC after a watched key changed");
      assertEquals(0, aborted.size());
      assertEquals("50", r.get("balance"));

      r.multi();
      r.set("balance", "999");
      assertEquals("OK", r.discard());
      assertEquals("50", r.get("balance"));

      // async: the queued commands' futures complete with EXEC
      RedisAsyncCommands<String, String> a = conn.async();
      a.multi();
      RedisFuture<String> set = a.set("x", "1");
      RedisFuture<Long> incr = a.incr("x");
      TransactionResult result = a.exec().get(5, TimeUnit.SECONDS);
      assertEquals(2, result.size());
      assertEquals("OK", set.get(5, TimeUnit.SECONDS));
      assertEquals(2L, incr.get(5, TimeUnit.SECONDS));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void scriptingWithNoScriptFallback(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      assertEquals("OK", r.scriptFlush());
      String none = r.eval("return ARGV[1]", ScriptOutputType.VALUE, new String[0], "x");
      assertEquals("x", none);
      Long n = r.eval("return redis.call('INCRBY', KEYS[1], ARGV[1])", ScriptOutputType.INTEGER,
          new String[] {"c"}, "7");
      assertEquals(7L, n);
      List<Object> multi = r.eval("return {1,'two',{3}}", ScriptOutputType.MULTI);
      assertEquals(List.of(1L, "two", List.of(3L)), multi);
      String status = r.eval("return redis.status_reply('FINE')", ScriptOutputType.STATUS);
      assertEquals("FINE", status);
      Boolean yes = r.eval("return 1", ScriptOutputType.BOOLEAN);
      assertTrue(yes);

      // what applications do: EVALSHA first, EVAL (or SCRIPT LOAD) on NOSCRIPT
      String script = "return redis.call('GET', KEYS[1])";
      String sha = r.digest(script);
      assertEquals(sha1Hex(script), sha);
      r.set("k", "cached");
      RedisNoScriptException noScript = assertThrows(RedisNoScriptException.class,
          () -> r.evalsha(sha, ScriptOutputType.VALUE, "k"));
      assertEquals("NOSCRIPT No matching script. Please use EVAL.", noScript.getMessage());
      assertEquals(sha, r.scriptLoad(script));
      assertEquals(List.of(true), r.scriptExists(sha));
      String viaSha = r.evalsha(sha, ScriptOutputType.VALUE, "k");
      assertEquals("cached", viaSha);

      String boom = "return redis.call('INCR', KEYS[1])";
      RedisCommandExecutionException e = assertThrows(RedisCommandExecutionException.class,
          () -> r.eval(boom, ScriptOutputType.INTEGER, "k"));
      assertEquals("ERR value is not an integer or out of range script: " + sha1Hex(boom)
          + ", on @user_script:1.", e.getMessage());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void blockingPopWithTimeout(Proto proto) throws Exception {
    try (StatefulRedisConnection<String, String> blocking = connect(proto);
        StatefulRedisConnection<String, String> other = connect(proto)) {
      long t0 = System.nanoTime();
      assertNull(blocking.sync().blpop(0.2, "empty"));
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms >= 150, "BLPOP 0.2 returned after " + ms + " ms");

      RedisFuture<KeyValue<String, String>> popped = blocking.async().blpop(10, "jobs");
      waitFor(Duration.ofSeconds(5), "BLPOP to block", () -> Integer.parseInt(
          Support.parseInfo(other.sync().info("clients")).get("blocked_clients")) == 1);
      assertEquals(1, other.sync().rpush("jobs", "job-1"));
      assertEquals(KeyValue.just("jobs", "job-1"), popped.get(5, TimeUnit.SECONDS));
      assertEquals(0, other.sync().llen("jobs"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void streamsBasics(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      String id1 = r.xadd("events", Map.of("type", "signup", "user", "1"));
      String id2 = r.xadd("events", Map.of("type", "login", "user", "1"));
      assertEquals(2, r.xlen("events"));
      assertEquals("OK", r.xgroupCreate(StreamOffset.from("events", "0-0"), "workers"));
      List<StreamMessage<String, String>> msgs = r.xreadgroup(Consumer.from("workers", "c1"),
          XReadArgs.Builder.count(10), StreamOffset.lastConsumed("events"));
      assertEquals(2, msgs.size());
      assertEquals("events", msgs.get(0).getStream());
      assertEquals(id1, msgs.get(0).getId());
      assertEquals(Map.of("type", "signup", "user", "1"), msgs.get(0).getBody());
      assertEquals(id2, msgs.get(1).getId());
      PendingMessages pending = r.xpending("events", "workers");
      assertEquals(2, pending.getCount());
      assertEquals(Map.of("c1", 2L), pending.getConsumerMessageCount());
      assertEquals(id1, pending.getMessageIds().getLower().getValue());
      assertEquals(id2, pending.getMessageIds().getUpper().getValue());
      assertEquals(1, r.xack("events", "workers", id1));
      assertEquals(1, r.xpending("events", "workers").getCount());
      List<StreamMessage<String, String>> range = r.xrange("events", Range.create("-", "+"));
      assertEquals(List.of(id1, id2), range.stream().map(StreamMessage::getId).toList());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void scanIterators(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      Map<String, String> keys = new HashMap<>();
      for (int i = 0; i < 300; i++) {
        keys.put("user:" + i, "u" + i);
        keys.put("other:" + i, "o" + i);
      }
      assertEquals("OK", r.mset(keys));
      Set<String> seen = new HashSet<>();
      ScanIterator<String> it = ScanIterator.scan(r, ScanArgs.Builder.matches("user:*").limit(50));
      while (it.hasNext()) {
        seen.add(it.next());
      }
      Set<String> users = new HashSet<>();
      keys.keySet().stream().filter(k -> k.startsWith("user:")).forEach(users::add);
      assertEquals(users, seen);

      Map<String, String> fields = new HashMap<>();
      for (int i = 0; i < 200; i++) {
        fields.put("f" + i, "v" + i);
      }
      r.hset("h", fields);
      Map<String, String> scanned = new HashMap<>();
      ScanIterator<KeyValue<String, String>> hit =
          ScanIterator.hscan(r, "h", ScanArgs.Builder.limit(20));
      while (hit.hasNext()) {
        KeyValue<String, String> kv = hit.next();
        scanned.put(kv.getKey(), kv.getValue());
      }
      assertEquals(fields, scanned);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void connectionPoolWithTransactions(Proto proto) throws Exception {
    // ConnectionPoolSupport: how services give each MULTI/EXEC its own connection
    GenericObjectPoolConfig<StatefulRedisConnection<String, String>> cfg =
        new GenericObjectPoolConfig<>();
    cfg.setMaxTotal(4);
    cfg.setMaxWait(Duration.ofSeconds(10));
    int threads = 8;
    int perThread = 50;
    try (GenericObjectPool<StatefulRedisConnection<String, String>> pool =
        ConnectionPoolSupport.createGenericObjectPool(() -> connect(proto), cfg)) {
      ExecutorService exec = Executors.newFixedThreadPool(threads);
      try {
        List<Future<?>> done = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          String name = "t" + t;
          done.add(exec.submit(() -> {
            for (int i = 0; i < perThread; i++) {
              try (StatefulRedisConnection<String, String> c = pool.borrowObject()) {
                RedisCommands<String, String> r = c.sync();
                r.multi();
                r.incr("tx-counter");
                r.rpush("tx-log", name);
                TransactionResult res = r.exec();
                assertFalse(res.wasDiscarded());
                assertEquals(2, res.size());
              }
            }
            return null;
          }));
        }
        for (Future<?> f : done) {
          f.get(60, TimeUnit.SECONDS);
        }
      } finally {
        exec.shutdownNow();
      }
      assertEquals(0, pool.getNumActive());
      try (StatefulRedisConnection<String, String> c = pool.borrowObject()) {
        assertEquals(String.valueOf(threads * perThread), c.sync().get("tx-counter"));
        assertEquals(threads * perThread, c.sync().llen("tx-log"));
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void autoReconnectAfterServerSideKill(Proto proto) {
    try (StatefulRedisConnection<String, String> conn = connect(proto);
        StatefulRedisConnection<String, String> other = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      r.set("survives", "yes");
      long id = r.clientId();
      assertEquals(1, other.sync().clientKill(KillArgs.Builder.id(id)));
      // Lettuce notices the drop, reconnects and repeats its handshake; commands go on
      waitFor(Duration.ofSeconds(20), "Lettuce to reconnect", () -> {
        try {
          return r.clientId() != id;
        } catch (RedisException e) {
          return false; // the command that met the dead connection
        }
      });
      assertTrue(Support.hasField(r.clientInfo(), proto.clientInfoResp()), r.clientInfo());
      assertEquals("yes", r.get("survives"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void pubSubResubscribesAfterReconnect(Proto proto) {
    BlockingQueue<String> events = new LinkedBlockingQueue<>();
    try (StatefulRedisPubSubConnection<String, String> sub = clients.get(proto).connectPubSub();
        StatefulRedisConnection<String, String> pub = connect(proto)) {
      sub.addListener(new Recorder(events));
      long id = sub.sync().clientId(); // before SUBSCRIBE: RESP2 allows no CLIENT ID after it
      sub.sync().subscribe("events");
      assertEquals("subscribed events 1", next(events, "subscribed"));
      RedisCommands<String, String> p = pub.sync();
      assertEquals(1, p.publish("events", "before"));
      assertEquals("message events before", next(events, "before"));
      assertEquals(1, p.clientKill(KillArgs.Builder.id(id)));
      // Lettuce reconnects on its own and sends SUBSCRIBE again: the listener hears it
      assertEquals("subscribed events 1", next(events, "the resubscription"));
      assertEquals(Map.of("events", 1L), p.pubsubNumsub("events"));
      assertEquals(1, p.publish("events", "after"));
      assertEquals("message events after", next(events, "after"));
      assertTrue(events.isEmpty(), "unexpected " + events);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void clientNameFromRedisUri(Proto proto) {
    // RESP3: HELLO 3 SETNAME; RESP2: CLIENT SETNAME after the handshake
    RedisURI uri = RedisURI.Builder.redis(GoblinServer.HOST, GoblinServer.get().port)
        .withClientName("orders-svc").build();
    RedisClient named = RedisClient.create(resources, uri);
    named.setOptions(clients.get(proto).getOptions());
    try (StatefulRedisConnection<String, String> conn = named.connect()) {
      assertEquals("orders-svc", conn.sync().clientGetname());
      String info = conn.sync().clientInfo();
      assertTrue(Support.hasField(info, "name=orders-svc"), info);
      assertTrue(Support.hasField(info, proto.clientInfoResp()), info);
    } finally {
      named.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void keyspaceNotificationOfAnExpiredKey(Proto proto) {
    // what session stores (Spring Session and the like) listen to: __keyevent@0__:expired,
    // sent when the server expires the key on its own, with no client touching it
    BlockingQueue<String> events = new LinkedBlockingQueue<>();
    try (StatefulRedisPubSubConnection<String, String> sub = clients.get(proto).connectPubSub();
        StatefulRedisConnection<String, String> conn = connect(proto)) {
      RedisCommands<String, String> r = conn.sync();
      assertEquals("OK", r.configSet("notify-keyspace-events", "Ex"));
      try {
        sub.addListener(new RedisPubSubAdapter<>() {
          @Override
          public void message(String pattern, String channel, String message) {
            events.add(pattern + " " + channel + " " + message);
          }
        });
        sub.sync().psubscribe("__keyevent@*__:expired");
        assertEquals("OK", r.set("session:42", "data", SetArgs.Builder.px(100)));
        assertEquals("__keyevent@*__:expired __keyevent@0__:expired session:42",
            next(events, "the expired event"));
        assertEquals(0, r.exists("session:42"));
      } finally {
        r.configSet("notify-keyspace-events", "");
      }
    }
  }

  @Test
  void clientSideCachingInvalidatedByAnotherConnection() {
    // Lettuce's cache listens for RESP3 "invalidate" pushes on the tracking connection itself
    Map<String, String> local = new ConcurrentHashMap<>();
    StatefulRedisConnection<String, String> tracked = connect(Proto.RESP3);
    try (StatefulRedisConnection<String, String> other = connect(Proto.RESP3)) {
      RedisCommands<String, String> o = other.sync();
      o.set("cfg:color", "blue");
      CacheFrontend<String, String> frontend =
          ClientSideCaching.enable(CacheAccessor.forMap(local), tracked, TrackingArgs.Builder.enabled());
      try {
        assertEquals("blue", frontend.get("cfg:color"));
        assertEquals("blue", local.get("cfg:color"));
        long gets = getCalls(o);
        for (int i = 0; i < 5; i++) {
          assertEquals("blue", frontend.get("cfg:color"));
        }
        assertEquals(gets, getCalls(o), "served locally: no GET reached the server");

        o.set("cfg:color", "green");
        waitFor(Duration.ofSeconds(5), "the invalidation push to evict cfg:color",
            () -> !local.containsKey("cfg:color"));
        assertEquals("green", frontend.get("cfg:color"));
        assertEquals(gets + 1, getCalls(o), "the miss after invalidation read from the server");
      } finally {
        frontend.close(); // closes the tracked connection too
      }
    }
  }

  /** GET calls the server has counted (INFO commandstats). */
  static long getCalls(RedisCommands<String, String> r) {
    String line = Support.parseInfo(r.info("commandstats")).get("cmdstat_get");
    return line == null ? 0 : Long.parseLong(Support.parseFields(line).get("calls"));
  }
}
