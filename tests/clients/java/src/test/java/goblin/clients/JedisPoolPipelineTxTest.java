package goblin.clients;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import goblin.clients.Support.Proto;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.commons.pool2.impl.GenericObjectPoolConfig;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import redis.clients.jedis.Connection;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPoolConfig;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.Response;
import redis.clients.jedis.Transaction;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.params.ClientKillParams;
import redis.clients.jedis.resps.Tuple;

/** Jedis pools under threads, pipelines and MULTI/EXEC with WATCH. */
@SuppressWarnings("deprecation") // JedisPool: deprecated in Jedis 8 for RedisClient, still the common pool
class JedisPoolPipelineTxTest {
  static final int THREADS = 20;
  static final int PER_THREAD = 500;

  @BeforeEach
  void emptyKeyspace() {
    Support.flushAll();
  }

  /** Runs body(threadIndex) on THREADS threads released together; rethrows the first failure. */
  static void race(ThrowingIntConsumer body) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(THREADS);
    try {
      CountDownLatch start = new CountDownLatch(1);
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
        int id = t;
        done.add(pool.submit(() -> {
          start.await();
          body.accept(id);
          return null;
        }));
      }
      start.countDown();
      for (Future<?> f : done) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  interface ThrowingIntConsumer {
    void accept(int i) throws Exception;
  }

  @Test
  void jedisPoolUnderConcurrentThreads() throws Exception {
    // fewer connections than threads: borrowers wait for one another
    JedisPoolConfig cfg = new JedisPoolConfig();
    cfg.setMaxTotal(8);
    cfg.setMaxWait(Duration.ofSeconds(10));
    try (JedisPool pool = new JedisPool(cfg, Support.hostAndPort(), Proto.RESP3.jedisConfig())) {
      race(t -> {
        for (int i = 0; i < PER_THREAD; i++) {
          try (Jedis j = pool.getResource()) {
            j.incr("counter");
            j.hincrBy("per-thread", "t" + t, 1);
          }
        }
      });
      try (Jedis j = pool.getResource()) {
        assertEquals(String.valueOf(THREADS * PER_THREAD), j.get("counter"));
        Map<String, String> perThread = j.hgetAll("per-thread");
        assertEquals(THREADS, perThread.size());
        perThread.values().forEach(v -> assertEquals(String.valueOf(PER_THREAD), v));
      }
      assertEquals(0, pool.getNumActive(), "every connection went back to the pool");
      assertTrue(pool.getNumIdle() >= 1 && pool.getNumIdle() <= 8, "idle " + pool.getNumIdle());
    }
  }

  @Test
  void jedisPoolTestOnBorrowReplacesKilledConnections() {
    // connections the server dropped (restart, idle timeout, CLIENT KILL) must not reach callers
    JedisPoolConfig cfg = new JedisPoolConfig();
    cfg.setMaxTotal(4);
    cfg.setTestOnBorrow(true);
    cfg.setMaxWait(Duration.ofSeconds(10));
    try (JedisPool pool = new JedisPool(cfg, Support.hostAndPort(), Proto.RESP3.jedisConfig());
        Jedis killer = Proto.RESP3.jedis()) {
      List<Jedis> held = new ArrayList<>();
      Set<Long> oldIds = new HashSet<>();
      for (int i = 0; i < 4; i++) {
        held.add(pool.getResource());
        oldIds.add(held.get(i).clientId());
      }
      held.forEach(Jedis::close);
      assertEquals(4, pool.getNumIdle());
      for (long id : oldIds) {
        assertEquals(1, killer.clientKill(
            ClientKillParams.clientKillParams().id(String.valueOf(id))), "kill " + id);
      }
      held.clear();
      for (int i = 0; i < 4; i++) {
        Jedis j = pool.getResource(); // PING on borrow fails, the pool connects anew
        held.add(j);
        assertFalse(oldIds.contains(j.clientId()), "a killed connection was handed out");
        assertEquals(i + 1, j.incr("after-kill"));
      }
      held.forEach(Jedis::close);
      assertEquals(0, pool.getNumActive());
    }
  }

  @Test
  void redisClientSharedAcrossThreads() throws Exception {
    // RedisClient is Jedis 8's pooled client (JedisPooled's successor): one instance, many threads
    GenericObjectPoolConfig<Connection> cfg = new GenericObjectPoolConfig<>();
    cfg.setMaxTotal(8);
    try (RedisClient client = RedisClient.builder()
        .hostAndPort(Support.hostAndPort())
        .clientConfig(Proto.RESP3.jedisConfig())
        .poolConfig(cfg)
        .build()) {
      race(t -> {
        for (int i = 0; i < PER_THREAD; i++) {
          client.incr("counter");
        }
        client.rpush("finished", "t" + t);
      });
      assertEquals(String.valueOf(THREADS * PER_THREAD), client.get("counter"));
      assertEquals(THREADS, client.llen("finished"));
      assertEquals(0, client.getPool().getNumActive());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void pipelineResponsesAfterSync(Proto proto) {
    try (Jedis j = proto.jedis()) {
      j.set("str", "text");
      List<Response<Long>> incrs = new ArrayList<>();
      Response<String> set;
      Response<String> get;
      Response<Long> bad;
      Response<Map<String, String>> hash;
      Response<List<Tuple>> zset;
      try (Pipeline p = j.pipelined()) {
        for (int i = 0; i < 1000; i++) {
          incrs.add(p.incr("n"));
        }
        set = p.set("k", "v");
        get = p.get("k");
        bad = p.incr("str");
        p.hset("h", Map.of("a", "1", "b", "2"));
        hash = p.hgetAll("h");
        p.zadd("z", 1.5, "m");
        zset = p.zrangeWithScores("z", 0, -1);
        p.sync();
      }
      for (int i = 0; i < 1000; i++) {
        assertEquals(i + 1, incrs.get(i).get(), "reply " + i + " out of order");
      }
      assertEquals("OK", set.get());
      assertEquals("v", get.get());
      // one failed command fails only its own response
      JedisDataException e = assertThrows(JedisDataException.class, bad::get);
      assertEquals("ERR value is not an integer or out of range", e.getMessage());
      assertEquals(Map.of("a", "1", "b", "2"), hash.get());
      assertEquals(List.of(new Tuple("m", 1.5)), zset.get());
      assertEquals("1000", j.get("n"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void transactionMultiExecAndDiscard(Proto proto) {
    try (Jedis j = proto.jedis()) {
      Transaction t = j.multi();
      Response<String> set = t.set("k", "1");
      Response<Long> incr = t.incrBy("k", 41);
      Response<String> get = t.get("k");
      t.set("str", "x");
      Response<Long> bad = t.lpush("str", "e");
      List<Object> results = t.exec();
      assertEquals(5, results.size());
      assertEquals("OK", results.get(0));
      assertEquals(42L, results.get(1));
      assertEquals("42", results.get(2));
      assertEquals("OK", results.get(3));
      // a command that fails inside EXEC does not undo the others
      JedisDataException inExec = assertInstanceOf(JedisDataException.class, results.get(4));
      assertEquals("WRONGTYPE Operation against a key holding the wrong kind of value",
          inExec.getMessage());
      assertEquals("OK", set.get());
      assertEquals(42L, incr.get());
      assertEquals("42", get.get());
      assertThrows(JedisDataException.class, bad::get);

      Transaction discarded = j.multi();
      discarded.set("k", "never");
      assertEquals("OK", discarded.discard());
      assertEquals("42", j.get("k"));

      // a command refused while queueing aborts the whole transaction at EXEC
      Transaction aborted = j.multi();
      aborted.set("k", "never");
      aborted.sendCommand(Protocol.Command.SET, "only-a-key");
      JedisDataException e = assertThrows(JedisDataException.class, aborted::exec);
      assertEquals("EXECABORT Transaction discarded because of previous errors.", e.getMessage());
      assertEquals("42", j.get("k"));
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void watchFailsOnConcurrentChange(Proto proto) {
    try (Jedis j = proto.jedis(); Jedis other = proto.jedis()) {
      j.set("balance", "100");
      assertEquals("OK", j.watch("balance"));
      int seen = Integer.parseInt(j.get("balance"));
      other.set("balance", "50"); // another client changes the watched key
      Transaction t = j.multi();
      t.set("balance", String.valueOf(seen - 30));
      assertNull(t.exec(), "EXEC after a watched key changed aborts (null)");
      assertEquals("50", j.get("balance"));

      // undisturbed, the same read-modify-write goes through
      j.watch("balance");
      seen = Integer.parseInt(j.get("balance"));
      t = j.multi();
      t.set("balance", String.valueOf(seen - 30));
      assertEquals(List.of("OK"), t.exec());
      assertEquals("20", j.get("balance"));

      // UNWATCH forgets the watch: a later change no longer aborts
      j.watch("balance");
      assertEquals("OK", j.unwatch());
      other.set("balance", "7");
      t = j.multi();
      t.incr("balance");
      assertEquals(List.of(8L), t.exec());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Proto.class)
  void watchRetryLoopUnderContention(Proto proto) throws Exception {
    // the optimistic-locking loop services write: WATCH, read, MULTI, write, EXEC, retry on null
    AtomicInteger aborts = new AtomicInteger();
    int threads = 4;
    int perThread = 50;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        done.add(pool.submit(() -> {
          try (Jedis j = proto.jedis()) {
            for (int n = 0; n < perThread; n++) {
              while (true) {
                j.watch("total");
                String cur = j.get("total");
                int next = (cur == null ? 0 : Integer.parseInt(cur)) + 1;
                Transaction t = j.multi();
                t.set("total", String.valueOf(next));
                if (t.exec() != null) {
                  break;
                }
                aborts.incrementAndGet();
              }
            }
          }
          return null;
        }));
      }
      for (Future<?> f : done) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    try (Jedis j = proto.jedis()) {
      // no lost update: every increment that EXEC accepted is there, and only those
      assertEquals(String.valueOf(threads * perThread), j.get("total"),
          "after " + aborts.get() + " aborted attempts");
    }
  }
}
