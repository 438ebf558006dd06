package goblin.clients;

import static goblin.clients.Support.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import goblin.clients.Support.Proto;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.redisson.Redisson;
import org.redisson.api.BatchOptions;
import org.redisson.api.BatchResult;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBatch;
import org.redisson.api.RBlockingQueue;
import org.redisson.api.RBloomFilter;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RHyperLogLog;
import org.redisson.api.RLock;
import org.redisson.api.RMap;
import org.redisson.api.RMapCache;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RScoredSortedSet;
import org.redisson.api.RSemaphore;
import org.redisson.api.RStream;
import org.redisson.api.StreamMessageId;
import org.redisson.api.stream.StreamAddArgs;
import org.redisson.api.stream.StreamCreateGroupArgs;
import org.redisson.api.stream.StreamReadGroupArgs;
import org.redisson.api.RTopic;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;
import org.redisson.config.Protocol;
import redis.clients.jedis.Jedis;

/**
 * Redisson, the Java client whose objects are built from Lua scripts and pub/sub: buckets and
 * atomics, the reentrant lock (its unlock wakes waiters over pub/sub; its watchdog extends the
 * lease while the holder lives), read-write locks, semaphores, latches, the rate limiter, maps
 * with per-entry TTLs, blocking and delayed queues, topics, sorted sets, Bloom filters and
 * atomic batches (MULTI/EXEC). Every test runs with Redisson's default protocol (RESP2) and with
 * RESP3 (HELLO 3).
 */
class RedissonTest {
  /** The lock watchdog's period: short, so that a test can watch it renew a lease. */
  private static final long WATCHDOG_MS = 1500;

  private static final Map<Proto, RedissonClient> CLIENTS = new EnumMap<>(Proto.class);

  @BeforeAll
  static void connect() {
    for (Proto proto : Proto.values()) {
      Config config = new Config();
      config.setProtocol(proto == Proto.RESP3 ? Protocol.RESP3 : Protocol.RESP2);
      config.setLockWatchdogTimeout(WATCHDOG_MS);
      config.setCodec(StringCodec.INSTANCE);
      config.useSingleServer()
          .setAddress("redis://" + GoblinServer.HOST + ":" + GoblinServer.get().port)
          .setConnectionMinimumIdleSize(2)
          .setConnectionPoolSize(8)
          .setSubscriptionConnectionMinimumIdleSize(1)
          .setTimeout(10_000);
      CLIENTS.put(proto, Redisson.create(config));
    }
  }

  @AfterAll
  static void disconnect() {
    CLIENTS.values().forEach(RedissonClient::shutdown);
  }

  @BeforeEach
  void empty() {
    Support.flushAll();
  }

  private static RedissonClient r(Proto proto) {
    return CLIENTS.get(proto);
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void bucketsAndAtomicLongs(Proto proto) throws Exception {
    RBucket<String> b = r(proto).getBucket("price:eurusd");
    b.set("1.0842", Duration.ofSeconds(100));
    assertEquals("1.0842", b.get());
    long ttl = b.remainTimeToLive();
    assertTrue(ttl > 90_000 && ttl <= 100_000, "ttl " + ttl);
    assertFalse(b.setIfAbsent("other"));
    assertTrue(b.compareAndSet("1.0842", "1.0843"));
    assertFalse(b.compareAndSet("1.0842", "1.0844"));
    try (Jedis j = proto.jedis()) {
      assertEquals("1.0843", j.get("price:eurusd"));
    }
    assertEquals("1.0843", b.getAndDelete());
    assertFalse(b.isExists());

    RAtomicLong counter = r(proto).getAtomicLong("hits");
    ExecutorService pool = Executors.newFixedThreadPool(8);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < 8; t++) {
        done.add(pool.submit(() -> {
          for (int i = 0; i < 100; i++) {
            counter.incrementAndGet();
          }
        }));
      }
      for (Future<?> f : done) {
        f.get(30, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertEquals(800, counter.get());
    assertTrue(counter.compareAndSet(800, 5));
    assertEquals(15, counter.addAndGet(10));
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void reentrantLockIsExclusiveAndWakesItsWaiter(Proto proto) throws Exception {
    RLock lock = r(proto).getLock("lock:order");
    lock.lock();
    lock.lock();
    assertEquals(2, lock.getHoldCount());
    ExecutorService other = Executors.newSingleThreadExecutor();
    try {
      assertFalse(other.submit(() -> lock.tryLock()).get(10, TimeUnit.SECONDS));
      // A waiter blocks in tryLock until the holder's last unlock publishes the release.
      CountDownLatch waiting = new CountDownLatch(1);
      Future<Boolean> waiter = other.submit(() -> {
        waiting.countDown();
        boolean got = lock.tryLock(20, TimeUnit.SECONDS);
        if (got) {
          lock.unlock();
        }
        return got;
      });
      assertTrue(waiting.await(10, TimeUnit.SECONDS));
      Thread.sleep(300);
      assertFalse(waiter.isDone());
      lock.unlock();
      assertFalse(waiter.isDone() && waiter.get());
      lock.unlock();
      assertTrue(waiter.get(10, TimeUnit.SECONDS));
      assertFalse(lock.isLocked());
    } finally {
      other.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void aLeasedLockExpiresAndItsWaiterGetsIt(Proto proto) throws Exception {
    // A lock taken with a lease expires by itself, and the waiter gets it then. The waiter sleeps
    // for the PTTL its lock script returned and retries, often in the deadline's very
    // millisecond: there the key must still be live to EXISTS and to PTTL alike (PTTL 0). When
    // goblin-core's GET-style lookups dropped it a millisecond early, PTTL said -2 after EXISTS
    // said 1, and Redisson slept out the whole 20 s wait.
    RLock lock = r(proto).getLock("lock:leased");
    ExecutorService other = Executors.newSingleThreadExecutor();
    try {
      lock.lock(1, TimeUnit.SECONDS);
      long t0 = System.nanoTime();
      assertTrue(other.submit(() -> {
        boolean got = lock.tryLock(20, TimeUnit.SECONDS);
        if (got) {
          lock.unlock();
        }
        return got;
      }).get(30, TimeUnit.SECONDS));
      assertTrue(System.nanoTime() - t0 > TimeUnit.MILLISECONDS.toNanos(800));
    } finally {
      other.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void theWatchdogRenewsALockWhileItsHolderLives(Proto proto) throws Exception {
    RLock lock = r(proto).getLock("lock:watched");
    lock.lock();
    try {
      long first = lock.remainTimeToLive();
      assertTrue(first > 0 && first <= WATCHDOG_MS, "lease " + first);
      // Two lease periods later the lock is still held: the watchdog has extended it.
      Thread.sleep(2 * WATCHDOG_MS + 500);
      assertTrue(lock.isLocked());
      assertTrue(lock.remainTimeToLive() > 0);
      ExecutorService other = Executors.newSingleThreadExecutor();
      try {
        assertFalse(other.submit(() -> lock.tryLock()).get(10, TimeUnit.SECONDS));
      } finally {
        other.shutdownNow();
      }
    } finally {
      lock.unlock();
    }
    assertFalse(lock.isLocked());
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void readWriteLockSemaphoreAndLatch(Proto proto) throws Exception {
    RReadWriteLock rw = r(proto).getReadWriteLock("rw:book");
    ExecutorService pool = Executors.newFixedThreadPool(3);
    try {
      rw.readLock().lock();
      // Other readers share it; a writer waits.
      assertTrue(pool.submit(() -> {
        boolean got = rw.readLock().tryLock();
        if (got) {
          rw.readLock().unlock();
        }
        return got;
      }).get(10, TimeUnit.SECONDS));
      assertFalse(pool.submit(() -> rw.writeLock().tryLock()).get(10, TimeUnit.SECONDS));
      rw.readLock().unlock();
      assertTrue(pool.submit(() -> {
        boolean got = rw.writeLock().tryLock(10, TimeUnit.SECONDS);
        if (got) {
          rw.writeLock().unlock();
        }
        return got;
      }).get(20, TimeUnit.SECONDS));

      RSemaphore sem = r(proto).getSemaphore("sem:slots");
      assertTrue(sem.trySetPermits(2));
      sem.acquire(2);
      assertFalse(sem.tryAcquire());
      Future<Boolean> acquirer = pool.submit(() -> sem.tryAcquire(20, TimeUnit.SECONDS));
      Thread.sleep(200);
      assertFalse(acquirer.isDone());
      sem.release();
      assertTrue(acquirer.get(10, TimeUnit.SECONDS));
      assertEquals(0, sem.availablePermits());

      RCountDownLatch latch = r(proto).getCountDownLatch("latch:start");
      assertTrue(latch.trySetCount(3));
      for (int i = 0; i < 3; i++) {
        pool.submit(latch::countDown);
      }
      assertTrue(latch.await(10, TimeUnit.SECONDS));
      assertEquals(0, latch.getCount());
    } finally {
      pool.shutdownNow();
    }
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void rateLimiterLetsTheRateThroughAndNoMore(Proto proto) {
    RRateLimiter limiter = r(proto).getRateLimiter("limit:api");
    assertTrue(limiter.trySetRate(RateType.OVERALL, 5, Duration.ofSeconds(30)));
    int allowed = 0;
    for (int i = 0; i < 8; i++) {
      if (limiter.tryAcquire()) {
        allowed++;
      }
    }
    assertEquals(5, allowed);
    assertEquals(0, limiter.availablePermits());
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void mapsAndPerEntryTtls(Proto proto) throws Exception {
    RMap<String, String> map = r(proto).getMap("session:42");
    map.put("user", "ada");
    assertNull(map.putIfAbsent("cart", "3"));
    assertEquals("3", map.putIfAbsent("cart", "4"));
    assertTrue(map.fastPut("seen", "1"));
    assertEquals(Map.of("user", "ada", "cart", "3", "seen", "1"), map.readAllMap());
    try (Jedis j = proto.jedis()) {
      assertEquals("ada", j.hget("session:42", "user"));
    }

    RMapCache<String, String> cache = r(proto).getMapCache("cache:quotes");
    cache.put("short", "a", 1, TimeUnit.SECONDS);
    cache.put("long", "b", 100, TimeUnit.SECONDS);
    cache.put("forever", "c");
    assertEquals("a", cache.get("short"));
    waitFor(Duration.ofSeconds(10), "the 1 s entry to expire", () -> cache.get("short") == null);
    assertEquals("b", cache.get("long"));
    assertEquals("c", cache.get("forever"));
    long ttl = cache.remainTimeToLive("long");
    assertTrue(ttl > 90_000 && ttl <= 100_000, "entry ttl " + ttl);
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void blockingQueuesAndStreams(Proto proto) throws Exception {
    RBlockingQueue<String> q = r(proto).getBlockingQueue("jobs");
    ExecutorService other = Executors.newSingleThreadExecutor();
    try {
      Future<String> taker = other.submit(() -> q.poll(20, TimeUnit.SECONDS));
      Thread.sleep(200);
      assertFalse(taker.isDone());
      assertTrue(q.offer("job-1"));
      assertEquals("job-1", taker.get(10, TimeUnit.SECONDS));
    } finally {
      other.shutdownNow();
    }

    RStream<String, String> stream = r(proto).getStream("orders");
    stream.createGroup(StreamCreateGroupArgs.name("billing").makeStream());
    StreamMessageId first = stream.add(StreamAddArgs.entry("sku", "A1"));
    stream.add(StreamAddArgs.entries(Map.of("sku", "B2")));
    Map<StreamMessageId, Map<String, String>> batch =
        stream.readGroup("billing", "worker-1", StreamReadGroupArgs.neverDelivered().count(10));
    assertEquals(2, batch.size());
    assertEquals(Map.of("sku", "A1"), batch.get(first));
    assertEquals(2, stream.getPendingInfo("billing").getTotal());
    assertEquals(2, stream.ack("billing", batch.keySet().toArray(new StreamMessageId[0])));
    assertEquals(0, stream.getPendingInfo("billing").getTotal());
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void topicsSortedSetsAndProbabilisticSets(Proto proto) throws Exception {
    RTopic topic = r(proto).getTopic("prices");
    BlockingQueue<String> got = new LinkedBlockingQueue<>();
    int id = topic.addListener(String.class, (channel, msg) -> got.add(channel + "=" + msg));
    try {
      assertEquals(1, topic.publish("eurusd 1.08"));
      assertEquals("prices=eurusd 1.08", got.poll(10, TimeUnit.SECONDS));
    } finally {
      topic.removeListener(id);
    }

    RScoredSortedSet<String> board = r(proto).getScoredSortedSet("board");
    board.add(30, "carol");
    board.add(10, "alice");
    board.add(20, "bob");
    assertEquals(List.of("alice", "bob", "carol"), new ArrayList<>(board.readAll()));
    assertEquals(Integer.valueOf(2), board.revRank("alice"));
    assertEquals(Double.valueOf(25), board.addScore("bob", 5));
    assertEquals(List.of("bob", "carol"), new ArrayList<>(board.valueRange(21, true, 100, true)));

    RHyperLogLog<String> hll = r(proto).getHyperLogLog("visitors");
    for (int i = 0; i < 1000; i++) {
      hll.add("v" + i);
    }
    long est = hll.count();
    assertTrue(est > 950 && est < 1050, "estimate " + est);

    RBloomFilter<String> bloom = r(proto).getBloomFilter("seen-ids");
    assertTrue(bloom.tryInit(10_000, 0.01));
    for (int i = 0; i < 500; i++) {
      bloom.add("id" + i);
    }
    for (int i = 0; i < 500; i++) {
      assertTrue(bloom.contains("id" + i));
    }
    int falsePositives = 0;
    for (int i = 500; i < 1500; i++) {
      if (bloom.contains("id" + i)) {
        falsePositives++;
      }
    }
    assertTrue(falsePositives < 50, "false positives " + falsePositives);
  }

  @ParameterizedTest
  @EnumSource(Proto.class)
  void atomicBatchIsOneTransaction(Proto proto) throws Exception {
    RBatch batch = r(proto).createBatch(
        BatchOptions.defaults().executionMode(BatchOptions.ExecutionMode.IN_MEMORY_ATOMIC));
    batch.getBucket("a").setAsync("1");
    batch.getAtomicLong("n").incrementAndGetAsync();
    batch.getAtomicLong("n").incrementAndGetAsync();
    batch.getMap("m").fastPutAsync("k", "v");
    BatchResult<?> res = batch.execute();
    assertEquals(4, res.getResponses().size());
    assertEquals(2L, res.getResponses().get(2));
    try (Jedis j = proto.jedis()) {
      assertEquals("1", j.get("a"));
      assertEquals("2", j.get("n"));
      assertEquals("v", j.hget("m", "k"));
    }
    // Async calls from many threads interleave on Redisson's pooled connections.
    AtomicInteger failures = new AtomicInteger();
    List<CompletableFuture<Long>> futures = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      futures.add(r(proto).getAtomicLong("async").incrementAndGetAsync().toCompletableFuture()
          .whenComplete((v, e) -> {
            if (e != null) {
              failures.incrementAndGet();
            }
          }));
    }
    CompletableFuture.allOf(futures.toArray(new CompletableFuture[0])).get(30, TimeUnit.SECONDS);
    assertEquals(0, failures.get());
    assertEquals(1000L, r(proto).getAtomicLong("async").get());
  }
}
