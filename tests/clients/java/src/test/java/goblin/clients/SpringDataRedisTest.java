package goblin.clients;

import static goblin.clients.Support.waitFor;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.springframework.cache.annotation.CacheEvict;
import org.springframework.cache.annotation.CachePut;
import org.springframework.cache.annotation.Cacheable;
import org.springframework.cache.annotation.EnableCaching;
import org.springframework.context.ApplicationListener;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.dao.DataAccessException;
import org.springframework.data.annotation.Id;
import org.springframework.data.redis.cache.RedisCacheConfiguration;
import org.springframework.data.redis.cache.RedisCacheManager;
import org.springframework.data.redis.connection.DataType;
import org.springframework.data.redis.connection.RedisConnection;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.jedis.JedisClientConfiguration;
import org.springframework.data.redis.connection.jedis.JedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.Cursor;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.RedisHash;
import org.springframework.data.redis.core.RedisKeyExpiredEvent;
import org.springframework.data.redis.core.RedisKeyValueAdapter.EnableKeyspaceEvents;
import org.springframework.data.redis.core.RedisOperations;
import org.springframework.data.redis.core.RedisTemplate;
import org.springframework.data.redis.core.ScanOptions;
import org.springframework.data.redis.core.SessionCallback;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.TimeToLive;
import org.springframework.data.redis.core.ZSetOperations.TypedTuple;
import org.springframework.data.redis.core.index.Indexed;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.data.redis.core.script.RedisScript;
import org.springframework.data.redis.listener.ChannelTopic;
import org.springframework.data.redis.listener.PatternTopic;
import org.springframework.data.redis.listener.RedisMessageListenerContainer;
import org.springframework.data.redis.listener.adapter.MessageListenerAdapter;
import org.springframework.data.redis.repository.configuration.EnableRedisRepositories;
import org.springframework.data.redis.serializer.GenericJacksonJsonRedisSerializer;
import org.springframework.data.redis.serializer.JacksonJsonRedisSerializer;
import org.springframework.data.redis.serializer.RedisSerializationContext.SerializationPair;
import org.springframework.data.redis.serializer.RedisSerializer;
import org.springframework.data.repository.CrudRepository;
import org.springframework.session.FindByIndexNameSessionRepository;
import org.springframework.session.data.redis.RedisIndexedSessionRepository;
import org.springframework.session.data.redis.RedisIndexedSessionRepository.RedisSession;
import org.springframework.session.data.redis.config.annotation.web.http.EnableRedisIndexedHttpSession;
import org.springframework.session.events.AbstractSessionEvent;
import org.springframework.session.events.SessionCreatedEvent;
import org.springframework.session.events.SessionDeletedEvent;
import org.springframework.session.events.SessionExpiredEvent;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.RedisProtocol;
import tools.jackson.databind.jsontype.BasicPolymorphicTypeValidator;

/**
 * Spring Data Redis 4.1 and Spring Session 4.0 as a plain Spring application uses them (no
 * Spring Boot): connection factories for Lettuce and for Jedis, StringRedisTemplate and a
 * RedisTemplate with Jackson 3 JSON serializers, SessionCallback transactions with WATCH,
 * pipelines, Lua scripts run EVALSHA-first, {@code @RedisHash} repositories with their
 * {@code @Indexed} secondary-index sets and {@code @TimeToLive} entries cleaned up through
 * keyspace notifications, RedisMessageListenerContainer pub/sub, RedisCacheManager behind
 * {@code @Cacheable}, and Spring Session's RedisIndexedSessionRepository with its
 * principal-name index and expiry events. Every test runs on each of the four drivers: Lettuce
 * (the module's Lettuce 7.7; Spring Data Redis 4.1.2 was built on 7.5) and Jedis (the module's
 * Jedis 8; built on 7.4), each with RESP3 and with RESP2, except as {@link Driver} says.
 */
class SpringDataRedisTest {
  /**
   * The connection factory under test: the client library and the protocol it speaks. The two
   * tests that start with CONFIG GET notify-keyspace-events (keyspace-event repositories and
   * Spring Session) leave out JEDIS_RESP3: Spring Data Redis 4.1's JedisServerCommands.getConfig
   * casts each element of the reply to byte[], and a RESP3 CONFIG GET is a map, which Jedis
   * returns as KeyValue pairs (ClassCastException, on redis-server alike). Jedis 8's RedisClient
   * negotiates RESP3 unless told otherwise, so that is also what JedisConnectionFactory's
   * defaults get.
   */
  enum Driver {
    LETTUCE_RESP3,
    LETTUCE_RESP2,
    JEDIS_RESP3,
    JEDIS_RESP2;

    boolean resp3() {
      return this == LETTUCE_RESP3 || this == JEDIS_RESP3;
    }

    /**
     * A new, not yet initialized factory (a Spring context initializes the beans it holds;
     * {@link #started} does it by hand). Lettuce: the protocol through ClientOptions, the event
     * loops shared by the class; Jedis: its RedisClient (Jedis 7.3+ pools by itself), the protocol
     * through the JedisClientConfig customizer.
     */
    RedisConnectionFactory factory() {
      RedisStandaloneConfiguration server =
          new RedisStandaloneConfiguration(GoblinServer.HOST, GoblinServer.get().port);
      if (this == LETTUCE_RESP3 || this == LETTUCE_RESP2) {
        LettuceClientConfiguration cfg = LettuceClientConfiguration.builder()
            .clientResources(resources)
            .clientOptions(ClientOptions.builder()
                .protocolVersion(resp3() ? ProtocolVersion.RESP3 : ProtocolVersion.RESP2).build())
            .commandTimeout(Duration.ofSeconds(10))
            .shutdownTimeout(Duration.ZERO)
            .build();
        return new LettuceConnectionFactory(server, cfg);
      }
      JedisClientConfiguration cfg = JedisClientConfiguration.builder()
          .customizeClientConfig(
              b -> b.protocol(resp3() ? RedisProtocol.RESP3 : RedisProtocol.RESP2))
          .readTimeout(Duration.ofSeconds(10))
          .connectTimeout(Duration.ofSeconds(5))
          .build();
      return new JedisConnectionFactory(server, cfg);
    }

    /** A factory ready for use outside a Spring context; the caller destroys it. */
    RedisConnectionFactory started() {
      RedisConnectionFactory f = factory();
      try {
        ((org.springframework.beans.factory.InitializingBean) f).afterPropertiesSet();
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
      return f;
    }
  }

  /** A value stored as JSON (a record: Jackson 3 reads it through its canonical constructor). */
  public record Order(String id, String customer, List<String> items, double total) {}

  /** What the cache holds. */
  public record Book(String isbn, String title, int year) {}

  static ClientResources resources;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeAll
  static void eventLoops() {
    resources = DefaultClientResources.create();
  }

  @AfterAll
  static void shutdown() {
    if (resources != null) {
      resources.shutdown(0, 2, TimeUnit.SECONDS);
    }
  }

  @BeforeEach
  void emptyKeyspace() {
    Support.flushAll();
    // the repositories and Spring Session only turn notifications on where they are off
    setNotifyKeyspaceEvents("");
  }

  @AfterEach
  void closeAndReset() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    toClose.clear();
    setNotifyKeyspaceEvents("");
  }

  static void setNotifyKeyspaceEvents(String flags) {
    try (Jedis j = Support.Proto.RESP2.jedis()) {
      j.configSet("notify-keyspace-events", flags);
    }
  }

  static String notifyKeyspaceEvents() {
    try (Jedis j = Support.Proto.RESP2.jedis()) {
      return j.configGet("notify-keyspace-events").get("notify-keyspace-events");
    }
  }

  /** A started factory destroyed after the test. */
  RedisConnectionFactory factory(Driver driver) {
    RedisConnectionFactory f = driver.started();
    toClose.add(() -> ((org.springframework.beans.factory.DisposableBean) f).destroy());
    return f;
  }

  /** A Spring context with the driver's factory as its RedisConnectionFactory bean. */
  AnnotationConfigApplicationContext context(Driver driver, Class<?>... config) {
    AnnotationConfigApplicationContext ctx = new AnnotationConfigApplicationContext();
    ctx.registerBean("redisConnectionFactory", RedisConnectionFactory.class, driver::factory);
    ctx.register(config);
    toClose.add(ctx);
    ctx.refresh();
    return ctx;
  }

  static StringRedisTemplate stringTemplate(RedisConnectionFactory f) {
    StringRedisTemplate t = new StringRedisTemplate(f);
    t.afterPropertiesSet();
    return t;
  }

  /**
   * The generic JSON serializer with default typing limited to this package and java.util:
   * type hints in "@class" let a RedisTemplate&lt;String, Object&gt; read back what it wrote.
   */
  static GenericJacksonJsonRedisSerializer json() {
    return GenericJacksonJsonRedisSerializer.builder()
        .enableDefaultTyping(BasicPolymorphicTypeValidator.builder()
            .allowIfSubType("goblin.clients.")
            .allowIfSubType("java.util.")
            .build())
        .enableSpringCacheNullValueSupport()
        .build();
  }

  static RedisTemplate<String, Object> jsonTemplate(RedisConnectionFactory f) {
    RedisTemplate<String, Object> t = new RedisTemplate<>();
    t.setConnectionFactory(f);
    t.setKeySerializer(RedisSerializer.string());
    t.setHashKeySerializer(RedisSerializer.string());
    GenericJacksonJsonRedisSerializer json = json();
    t.setValueSerializer(json);
    t.setHashValueSerializer(json);
    t.afterPropertiesSet();
    return t;
  }

  /** CLIENT INFO of one of the factory's connections, whatever type the driver returns it as. */
  static String clientInfo(RedisConnectionFactory f) {
    try (RedisConnection c = f.getConnection()) {
      Object reply = c.execute("CLIENT", "INFO".getBytes(StandardCharsets.UTF_8));
      return reply instanceof byte[] b
          ? new String(b, StandardCharsets.UTF_8)
          : String.valueOf(reply);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Templates

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void templateOperationsWithJsonValues(Driver driver) {
    // The template API a service uses for each data type, on the protocol the driver negotiated,
    // with JSON values (type hints included) stored as plain strings and hashes that any client
    // can read.
    RedisConnectionFactory f = factory(driver);
    String info = clientInfo(f);
    assertTrue(Support.hasField(info, driver.resp3() ? "resp=3" : "resp=2"), info);
    StringRedisTemplate s = stringTemplate(f);
    RedisTemplate<String, Object> t = jsonTemplate(f);

    // strings with a TTL
    s.opsForValue().set("greeting", "hello", Duration.ofSeconds(100));
    assertEquals("hello", s.opsForValue().get("greeting"));
    long ttl = s.getExpire("greeting", TimeUnit.SECONDS);
    assertTrue(ttl > 95 && ttl <= 100, "ttl " + ttl);
    assertFalse(s.opsForValue().setIfAbsent("greeting", "other"));
    assertTrue(s.opsForValue().setIfAbsent("lock:job", "me", Duration.ofSeconds(30)));
    assertEquals(5L, s.opsForValue().increment("visits", 5));
    assertEquals(5.5, s.opsForValue().increment("visits", 0.5));
    assertEquals("hello", s.opsForValue().getAndDelete("greeting"));
    assertFalse(s.hasKey("greeting"));

    // a JSON value: written with its type hint, read back as the same record
    Order order = new Order("o-1", "ada", List.of("book", "pen"), 12.5);
    t.opsForValue().set("order:o-1", order, Duration.ofMinutes(5));
    String raw = s.opsForValue().get("order:o-1");
    assertTrue(raw.contains("\"@class\":\"goblin.clients.SpringDataRedisTest$Order\""), raw);
    assertTrue(raw.contains("\"customer\":\"ada\""), raw);
    assertEquals(order, t.opsForValue().get("order:o-1"));
    long orderTtl = t.getExpire("order:o-1");
    assertTrue(orderTtl > 290 && orderTtl <= 300, "ttl " + orderTtl);
    assertEquals(DataType.STRING, t.type("order:o-1"));

    // hashes: string fields through StringRedisTemplate, a JSON field through the JSON template
    s.opsForHash().putAll("user:1", Map.of("name", "ada", "lang", "java"));
    assertEquals("ada", s.opsForHash().get("user:1", "name"));
    assertEquals(3L, s.opsForHash().increment("user:1", "logins", 3));
    assertEquals(Map.of("name", "ada", "lang", "java", "logins", "3"),
        s.opsForHash().entries("user:1"));
    assertTrue(s.opsForHash().putIfAbsent("user:1", "email", "ada@example.com"));
    assertFalse(s.opsForHash().putIfAbsent("user:1", "email", "other@example.com"));
    assertEquals(1L, s.opsForHash().delete("user:1", "lang"));
    assertFalse(s.opsForHash().hasKey("user:1", "lang"));
    assertEquals(3L, s.opsForHash().size("user:1"));
    t.opsForHash().put("user:1", "lastOrder", order);
    assertEquals(order, t.opsForHash().get("user:1", "lastOrder"));
    assertEquals(DataType.HASH, s.type("user:1"));

    // lists: a JSON work queue
    Order second = new Order("o-2", "bob", List.of(), 0.0);
    assertEquals(2L, t.opsForList().rightPushAll("queue", order, second));
    assertEquals(List.of(order, second), t.opsForList().range("queue", 0, -1));
    assertEquals(order, t.opsForList().leftPop("queue"));
    assertEquals(1L, t.opsForList().size("queue"));
    s.opsForList().rightPushAll("log", "a", "b", "c", "d", "e");
    s.opsForList().trim("log", -3, -1);
    assertEquals(List.of("c", "d", "e"), s.opsForList().range("log", 0, -1));
    assertEquals("d", s.opsForList().index("log", 1));
    assertEquals(List.of("e", "d"), s.opsForList().rightPop("log", 2));

    // sets
    assertEquals(3L, s.opsForSet().add("tags:a", "x", "y", "z"));
    assertEquals(2L, s.opsForSet().add("tags:b", "y", "z"));
    assertTrue(s.opsForSet().isMember("tags:a", "x"));
    assertEquals(Set.of("y", "z"), s.opsForSet().intersect("tags:a", "tags:b"));
    assertEquals(Set.of("x"), s.opsForSet().difference("tags:a", "tags:b"));
    assertEquals(Set.of("x", "y", "z"), s.opsForSet().union("tags:a", "tags:b"));
    assertEquals(3L, s.opsForSet().size("tags:a"));

    // sorted sets
    assertTrue(s.opsForZSet().add("board", "ada", 30));
    assertEquals(2L, s.opsForZSet().add("board",
        Set.of(TypedTuple.of("bob", 10.0), TypedTuple.of("cy", 20.0))));
    assertEquals(45.0, s.opsForZSet().incrementScore("board", "bob", 35));
    assertEquals(List.of("bob", "ada", "cy"),
        new ArrayList<>(s.opsForZSet().reverseRange("board", 0, -1)));
    List<TypedTuple<String>> top = new ArrayList<>(s.opsForZSet().rangeWithScores("board", 0, 1));
    assertEquals(List.of(TypedTuple.of("cy", 20.0), TypedTuple.of("ada", 30.0)), top);
    assertEquals(2L, s.opsForZSet().rank("board", "bob"));
    assertEquals(Set.of("cy", "ada"), s.opsForZSet().rangeByScore("board", 15, 40));
    assertEquals(30.0, s.opsForZSet().score("board", "ada"));

    Set<String> keys = s.keys("*");
    assertEquals(Set.of("lock:job", "visits", "order:o-1", "user:1", "queue", "log", "tags:a",
        "tags:b", "board"), keys);
    Set<String> scanned = new java.util.HashSet<>();
    try (Cursor<String> c = s.scan(ScanOptions.scanOptions().match("tags:*").count(2).build())) {
      c.forEachRemaining(scanned::add);
    }
    assertEquals(Set.of("tags:a", "tags:b"), scanned);
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void sessionCallbackTransactionsWithWatch(Driver driver) {
    // execute(SessionCallback) pins one connection for WATCH/MULTI/EXEC: the queued commands'
    // replies come back from exec() deserialized, and a watched key changed by another client
    // aborts the transaction (exec() returns an empty list) without applying it.
    RedisConnectionFactory f = factory(driver);
    StringRedisTemplate s = stringTemplate(f);
    s.opsForValue().set("balance", "100");

    List<Object> applied = s.execute(new SessionCallback<List<Object>>() {
      @Override
      @SuppressWarnings("unchecked")
      public <K, V> List<Object> execute(RedisOperations<K, V> ops) {
        RedisOperations<String, String> o = (RedisOperations<String, String>) ops;
        o.watch("balance");
        int balance = Integer.parseInt(o.opsForValue().get("balance"));
        o.multi();
        o.opsForValue().set("balance", String.valueOf(balance - 30));
        o.opsForList().rightPush("ledger", "-30");
        o.opsForValue().increment("tx-count");
        o.opsForValue().get("balance");
        return o.exec();
      }
    });
    assertEquals(List.of(true, 1L, 1L, "70"), applied);
    assertEquals("70", s.opsForValue().get("balance"));

    List<Object> aborted = s.execute(new SessionCallback<List<Object>>() {
      @Override
      @SuppressWarnings("unchecked")
      public <K, V> List<Object> execute(RedisOperations<K, V> ops) {
        RedisOperations<String, String> o = (RedisOperations<String, String>) ops;
        o.watch("balance");
        int balance = Integer.parseInt(o.opsForValue().get("balance"));
        try (Jedis other = Support.Proto.RESP2.jedis()) {
          other.set("balance", "500"); // someone else's write between WATCH and EXEC
        }
        o.multi();
        o.opsForValue().set("balance", String.valueOf(balance - 30));
        o.opsForList().rightPush("ledger", "-30");
        return o.exec();
      }
    });
    assertEquals(List.of(), aborted);
    assertEquals("500", s.opsForValue().get("balance"));
    assertEquals(List.of("-30"), s.opsForList().range("ledger", 0, -1));

    // DISCARD drops what was queued
    s.execute(new SessionCallback<Void>() {
      @Override
      @SuppressWarnings("unchecked")
      public <K, V> Void execute(RedisOperations<K, V> ops) {
        RedisOperations<String, String> o = (RedisOperations<String, String>) ops;
        o.multi();
        o.opsForValue().set("balance", "0");
        o.discard();
        return null;
      }
    });
    assertEquals("500", s.opsForValue().get("balance"));
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void pipelinedCallbacks(Driver driver) {
    // executePipelined sends a callback's commands without waiting for each reply and returns
    // every reply in order, deserialized by the template (RedisCallback on the raw connection,
    // SessionCallback through the template's operations).
    RedisConnectionFactory f = factory(driver);
    StringRedisTemplate s = stringTemplate(f);
    List<Object> replies = s.executePipelined((RedisCallback<Object>) c -> {
      for (int i = 0; i < 500; i++) {
        c.stringCommands().set(("k" + i).getBytes(StandardCharsets.UTF_8),
            String.valueOf(i).getBytes(StandardCharsets.UTF_8));
        c.stringCommands().incr("counter".getBytes(StandardCharsets.UTF_8));
      }
      c.stringCommands().get("k499".getBytes(StandardCharsets.UTF_8));
      return null;
    });
    assertEquals(1001, replies.size());
    for (int i = 0; i < 500; i++) {
      assertEquals(true, replies.get(2 * i), "SET " + i);
      assertEquals((long) i + 1, replies.get(2 * i + 1), "INCR " + i);
    }
    assertEquals("499", replies.get(1000));
    assertEquals("500", s.opsForValue().get("counter"));

    RedisTemplate<String, Object> t = jsonTemplate(f);
    Order order = new Order("o-9", "cy", List.of("lamp"), 40.0);
    List<Object> typed = t.executePipelined(new SessionCallback<Object>() {
      @Override
      @SuppressWarnings("unchecked")
      public <K, V> Object execute(RedisOperations<K, V> ops) {
        RedisOperations<String, Object> o = (RedisOperations<String, Object>) ops;
        o.opsForValue().set("order:o-9", order);
        o.opsForValue().get("order:o-9");
        o.opsForList().rightPush("recent", order);
        o.opsForSet().add("customers", "cy");
        o.opsForValue().get("missing");
        return null;
      }
    });
    assertEquals(List.of(true, order, 1L, 1L), typed.subList(0, 4));
    assertNull(typed.get(4));
    assertEquals(5, typed.size());
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void luaScriptsEvalshaFirstThenEval(Driver driver) {
    // RedisScript runs as EVALSHA; on NOSCRIPT (an empty script cache) the template falls back to
    // EVAL once, after which EVALSHA finds the script. Replies are converted by result type, and
    // a script error surfaces as a DataAccessException carrying the server's error text.
    RedisConnectionFactory f = factory(driver);
    StringRedisTemplate s = stringTemplate(f);
    RedisScript<Long> limiter = new DefaultRedisScript<>(
        "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) "
            + "if n == tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[2]) end "
            + "return n",
        Long.class);
    try (Jedis j = Support.Proto.RESP2.jedis()) {
      j.scriptFlush();
      j.configResetStat();
      assertFalse(j.scriptExists(limiter.getSha1()));

      assertEquals(3L, s.execute(limiter, List.of("rate:ada"), "3", "60"));
      assertTrue(j.scriptExists(limiter.getSha1()), "EVAL cached the script");
      long evalsAfterFirst = calls(j, "eval");
      long evalshasAfterFirst = calls(j, "evalsha");
      assertEquals(1, evalsAfterFirst, "one EVAL after the NOSCRIPT");
      assertEquals(1, evalshasAfterFirst, "the EVALSHA that met NOSCRIPT");

      assertEquals(5L, s.execute(limiter, List.of("rate:ada"), "2", "60"));
      assertEquals(1, calls(j, "eval"), "no EVAL once the script is cached");
      assertEquals(2, calls(j, "evalsha"));
      long ttl = j.ttl("rate:ada");
      assertTrue(ttl > 55 && ttl <= 60, "ttl " + ttl);
    }

    s.opsForList().rightPushAll("items", "a", "b", "c");
    @SuppressWarnings({"rawtypes", "unchecked"})
    RedisScript<List> range = new DefaultRedisScript<>(
        "return redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]))", List.class);
    assertEquals(List.of("a", "b"), s.execute(range, List.of("items"), "1"));
    RedisScript<Boolean> exists = new DefaultRedisScript<>(
        "return redis.call('EXISTS', KEYS[1]) == 1", Boolean.class);
    assertEquals(true, s.execute(exists, List.of("items")));
    assertEquals(false, s.execute(exists, List.of("nothing")));
    RedisScript<String> status = new DefaultRedisScript<>(
        "return redis.status_reply('FINE')", String.class);
    assertEquals("FINE", s.execute(status, List.of()));

    RedisScript<Long> broken = new DefaultRedisScript<>(
        "return redis.call('INCR', KEYS[1])", Long.class);
    DataAccessException e = assertThrows(DataAccessException.class,
        () -> s.execute(broken, List.of("items")));
    assertTrue(String.valueOf(e.getMostSpecificCause().getMessage())
            .contains("WRONGTYPE Operation against a key holding the wrong kind of value"),
        e.getMostSpecificCause().toString());
  }

  /** How many times the server ran a command (INFO commandstats). */
  static long calls(Jedis j, String command) {
    String line = Support.parseInfo(j.info("commandstats")).get("cmdstat_" + command);
    return line == null ? 0 : Long.parseLong(Support.parseFields(line).get("calls"));
  }

  // ---------------------------------------------------------------------------------------------
  // Pub/sub

  /** A POJO listener behind MessageListenerAdapter: Spring calls handle(message, channel). */
  public static final class OrderHandler {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    public void handle(Order order, String channel) {
      events.add(channel + " " + order.id() + " " + order.items());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void messageListenerContainerChannelsAndPatterns(Driver driver) throws Exception {
    // RedisMessageListenerContainer subscribes its listeners' topics on one connection: a plain
    // MessageListener on a channel and a pattern, a MessageListenerAdapter turning JSON messages
    // into Order arguments, and an unsubscribe when a listener is removed.
    RedisConnectionFactory f = factory(driver);
    StringRedisTemplate s = stringTemplate(f);
    // orders travel as plain JSON (no type hint): one Jackson serializer typed to Order on both
    // sides
    JacksonJsonRedisSerializer<Order> orderJson = new JacksonJsonRedisSerializer<>(Order.class);
    RedisTemplate<String, Order> orders = new RedisTemplate<>();
    orders.setConnectionFactory(f);
    orders.setKeySerializer(RedisSerializer.string());
    orders.setValueSerializer(orderJson);
    orders.afterPropertiesSet();
    BlockingQueue<String> events = new LinkedBlockingQueue<>();
    // pattern: the matching pattern, or for a channel subscription the channel itself
    org.springframework.data.redis.connection.MessageListener plain = (message, pattern) ->
        events.add(new String(pattern, StandardCharsets.UTF_8) + " "
            + new String(message.getChannel(), StandardCharsets.UTF_8) + " "
            + new String(message.getBody(), StandardCharsets.UTF_8));
    OrderHandler handler = new OrderHandler();
    MessageListenerAdapter adapter = new MessageListenerAdapter(handler, "handle");
    adapter.setSerializer(orderJson);
    adapter.afterPropertiesSet();

    RedisMessageListenerContainer container = new RedisMessageListenerContainer();
    container.setConnectionFactory(f);
    container.addMessageListener(plain,
        List.of(new ChannelTopic("news"), new PatternTopic("audit.*")));
    container.addMessageListener(adapter, new ChannelTopic("orders"));
    container.afterPropertiesSet();
    toClose.add(container::destroy);
    container.start();

    try (Jedis j = Support.Proto.RESP2.jedis()) {
      waitFor(Duration.ofSeconds(10), "the container's SUBSCRIBE and PSUBSCRIBE",
          () -> j.pubsubNumSub("news", "orders").equals(Map.of("news", 1L, "orders", 1L))
              && j.pubsubNumPat() == 1);
    }
    assertEquals(1L, s.convertAndSend("news", "extra"));
    assertEquals("news news extra", Support.next(events, "the news message"));
    assertEquals(1L, s.convertAndSend("audit.login", "ada"));
    assertEquals("audit.* audit.login ada", Support.next(events, "the pattern message"));
    assertEquals(0L, s.convertAndSend("auditlogin", "nobody"));

    Order order = new Order("o-7", "ada", List.of("tea"), 3.0);
    assertEquals(1L, orders.convertAndSend("orders", order));
    assertEquals("orders o-7 [tea]", Support.next(handler.events, "the adapter's handle call"));

    container.removeMessageListener(plain, new ChannelTopic("news"));
    try (Jedis j = Support.Proto.RESP2.jedis()) {
      waitFor(Duration.ofSeconds(10), "UNSUBSCRIBE news",
          () -> j.pubsubNumSub("news").get("news") == 0L);
    }
    assertEquals(0L, s.convertAndSend("news", "unheard"));
    assertEquals(1L, s.convertAndSend("audit.logout", "ada"));
    assertEquals("audit.* audit.logout ada", Support.next(events, "the pattern message"));
    assertTrue(events.isEmpty(), "unexpected " + events);
  }

  // ---------------------------------------------------------------------------------------------
  // Repositories

  /** An entity stored as the hash people:ID with secondary-index sets for the indexed fields. */
  @RedisHash("people")
  public static class Person {
    @Id private String id;
    @Indexed private String firstname;
    @Indexed private String lastname;
    private int age;
    private Address address;

    public Person() {}

    Person(String firstname, String lastname, int age, String city) {
      this.firstname = firstname;
      this.lastname = lastname;
      this.age = age;
      this.address = new Address(city);
    }

    public String getId() {
      return id;
    }

    public String getFirstname() {
      return firstname;
    }

    public void setFirstname(String firstname) {
      this.firstname = firstname;
    }

    public String getLastname() {
      return lastname;
    }

    public int getAge() {
      return age;
    }

    public Address getAddress() {
      return address;
    }
  }

  public static class Address {
    @Indexed private String city;

    public Address() {}

    Address(String city) {
      this.city = city;
    }

    public String getCity() {
      return city;
    }
  }

  public interface PersonRepository extends CrudRepository<Person, String> {
    List<Person> findByFirstname(String firstname);

    List<Person> findByFirstnameAndLastname(String firstname, String lastname);

    List<Person> findByFirstnameOrLastname(String firstname, String lastname);

    List<Person> findByAddressCity(String city);
  }

  /** An entity whose hash expires after {@code ttl} seconds. */
  @RedisHash("tokens")
  public static class Token {
    @Id private String id;
    @Indexed private String owner;
    private String scope;
    @TimeToLive private Long ttl;

    public Token() {}

    Token(String id, String owner, String scope, Long ttl) {
      this.id = id;
      this.owner = owner;
      this.scope = scope;
      this.ttl = ttl;
    }

    public String getId() {
      return id;
    }

    public String getOwner() {
      return owner;
    }

    public String getScope() {
      return scope;
    }
  }

  public interface TokenRepository extends CrudRepository<Token, String> {
    List<Token> findByOwner(String owner);
  }

  /** Collects the RedisKeyExpiredEvents that the repositories' expiration listener publishes. */
  public static final class ExpiredEvents implements ApplicationListener<RedisKeyExpiredEvent<?>> {
    final BlockingQueue<RedisKeyExpiredEvent<?>> events = new LinkedBlockingQueue<>();

    @Override
    public void onApplicationEvent(RedisKeyExpiredEvent<?> event) {
      events.add(event);
    }
  }

  /** The template the repositories' RedisKeyValueAdapter works through ("redisTemplate"). */
  static RedisTemplate<byte[], byte[]> bytesTemplate(RedisConnectionFactory f) {
    RedisTemplate<byte[], byte[]> t = new RedisTemplate<>();
    t.setConnectionFactory(f);
    return t;
  }

  @Configuration
  @EnableRedisRepositories(basePackageClasses = SpringDataRedisTest.class,
      considerNestedRepositories = true)
  static class RepositoryConfig {
    @Bean
    RedisTemplate<byte[], byte[]> redisTemplate(RedisConnectionFactory f) {
      return bytesTemplate(f);
    }
  }

  @Configuration
  @EnableRedisRepositories(basePackageClasses = SpringDataRedisTest.class,
      considerNestedRepositories = true, enableKeyspaceEvents = EnableKeyspaceEvents.ON_STARTUP)
  static class ExpiringRepositoryConfig {
    @Bean
    RedisTemplate<byte[], byte[]> redisTemplate(RedisConnectionFactory f) {
      return bytesTemplate(f);
    }

    @Bean
    ExpiredEvents expiredEvents() {
      return new ExpiredEvents();
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void repositoriesWithIndexedFields(Driver driver) {
    // CrudRepository over @RedisHash: each entity a hash, the keyspace's id set, one set per
    // indexed value (people:firstname:ada) and a per-entity set of its index keys; derived
    // queries are SINTER (And) and SUNION (Or) of index sets; an update moves the entity between
    // index sets; delete removes the hash, the id and every index entry.
    AnnotationConfigApplicationContext ctx = context(driver, RepositoryConfig.class);
    PersonRepository people = ctx.getBean(PersonRepository.class);
    StringRedisTemplate s = stringTemplate(ctx.getBean(RedisConnectionFactory.class));

    Person ada = people.save(new Person("ada", "lovelace", 36, "london"));
    Person adaB = people.save(new Person("ada", "byron", 20, "paris"));
    Person alan = people.save(new Person("alan", "turing", 41, "london"));
    assertNotNull(ada.getId());
    assertEquals(3, people.count());
    assertEquals(Set.of(ada.getId(), adaB.getId(), alan.getId()), s.opsForSet().members("people"));
    Map<Object, Object> hash = s.opsForHash().entries("people:" + ada.getId());
    assertEquals("ada", hash.get("firstname"));
    assertEquals("lovelace", hash.get("lastname"));
    assertEquals("36", hash.get("age"));
    assertEquals("london", hash.get("address.city"));
    assertEquals(Set.of(ada.getId(), adaB.getId()), s.opsForSet().members("people:firstname:ada"));
    assertEquals(Set.of(ada.getId(), alan.getId()),
        s.opsForSet().members("people:address.city:london"));
    assertEquals(Set.of("people:firstname:ada", "people:lastname:lovelace",
        "people:address.city:london"), s.opsForSet().members("people:" + ada.getId() + ":idx"));

    Person found = people.findById(ada.getId()).orElseThrow();
    assertEquals("lovelace", found.getLastname());
    assertEquals(36, found.getAge());
    assertEquals("london", found.getAddress().getCity());
    assertEquals(Set.of(ada.getId(), adaB.getId()), ids(people.findByFirstname("ada")));
    assertEquals(Set.of(adaB.getId()), ids(people.findByFirstnameAndLastname("ada", "byron")));
    assertEquals(Set.of(), ids(people.findByFirstnameAndLastname("alan", "byron")));
    assertEquals(Set.of(adaB.getId(), alan.getId()),
        ids(people.findByFirstnameOrLastname("alan", "byron")));
    assertEquals(Set.of(ada.getId(), alan.getId()), ids(people.findByAddressCity("london")));
    assertEquals(3, ids(people.findAll()).size());

    // an update re-indexes
    found.setFirstname("augusta");
    people.save(found);
    assertEquals(Set.of(adaB.getId()), s.opsForSet().members("people:firstname:ada"));
    assertEquals(Set.of(ada.getId()), ids(people.findByFirstname("augusta")));
    assertTrue(
        s.opsForSet().isMember("people:" + ada.getId() + ":idx", "people:firstname:augusta"));
    assertFalse(s.opsForSet().isMember("people:" + ada.getId() + ":idx", "people:firstname:ada"));

    people.deleteById(alan.getId());
    assertEquals(2, people.count());
    assertFalse(s.hasKey("people:" + alan.getId()));
    assertFalse(s.hasKey("people:" + alan.getId() + ":idx"));
    assertEquals(Set.of(ada.getId()), s.opsForSet().members("people:address.city:london"));
    assertFalse(s.hasKey("people:firstname:alan"), "an emptied index set is gone");
    assertEquals(Optional.empty(), people.findById(alan.getId()));

    people.deleteAll();
    assertEquals(0, people.count());
    assertEquals(Set.of(), s.keys("people*"));
  }

  static Set<String> ids(Iterable<?> entities) {
    return StreamSupport.stream(entities.spliterator(), false)
        .map(e -> e instanceof Person p ? p.getId() : ((Token) e).getId())
        .collect(Collectors.toSet());
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Driver.class, names = "JEDIS_RESP3", mode = EnumSource.Mode.EXCLUDE)
  void timeToLiveEntitiesCleanedUpByKeyspaceEvents(Driver driver) throws Exception {
    // enableKeyspaceEvents = ON_STARTUP: the repositories turn on notify-keyspace-events (Ex) and
    // listen to __keyevent@*__:expired. A @TimeToLive entity gets EXPIRE on its hash and a
    // longer-lived phantom copy; when the server expires the hash, the listener reads the phantom
    // (published as RedisKeyExpiredEvent with the entity), deletes it and removes the id from the
    // keyspace set and the index sets, which no TTL would have cleaned.
    AnnotationConfigApplicationContext ctx = context(driver, ExpiringRepositoryConfig.class);
    // "Ex" as set, in the order CONFIG GET lists the flags
    assertEquals("xE", notifyKeyspaceEvents());
    TokenRepository tokens = ctx.getBean(TokenRepository.class);
    BlockingQueue<RedisKeyExpiredEvent<?>> expired = ctx.getBean(ExpiredEvents.class).events;
    StringRedisTemplate s = stringTemplate(ctx.getBean(RedisConnectionFactory.class));

    tokens.save(new Token("t-short", "bob", "read", 1L));
    tokens.save(new Token("t-long", "bob", "write", 600L));
    tokens.save(new Token("t-forever", "bob", "admin", null));
    long ttl = s.getExpire("tokens:t-long");
    assertTrue(ttl > 590 && ttl <= 600, "ttl " + ttl);
    long phantomTtl = s.getExpire("tokens:t-long:phantom");
    assertTrue(phantomTtl > 890 && phantomTtl <= 900, "phantom ttl " + phantomTtl);
    assertEquals(-1L, s.getExpire("tokens:t-forever"));
    assertFalse(s.hasKey("tokens:t-forever:phantom"), "no phantom without a TTL");
    assertEquals(Set.of("t-short", "t-long", "t-forever"),
        s.opsForSet().members("tokens:owner:bob"));

    RedisKeyExpiredEvent<?> event = expired.poll(10, TimeUnit.SECONDS);
    assertNotNull(event, "no RedisKeyExpiredEvent within 10 s");
    assertEquals("tokens", event.getKeyspace());
    assertEquals("t-short", new String(event.getId(), StandardCharsets.UTF_8));
    Token gone = assertInstanceOf(Token.class, event.getValue(), "the phantom copy");
    assertEquals("read", gone.getScope());
    assertEquals("bob", gone.getOwner());

    waitFor(Duration.ofSeconds(5), "the listener's SREM from the keyspace and index sets",
        () -> !s.opsForSet().isMember("tokens", "t-short")
            && !s.opsForSet().isMember("tokens:owner:bob", "t-short"));
    assertFalse(s.hasKey("tokens:t-short"));
    assertFalse(s.hasKey("tokens:t-short:phantom"), "the listener deleted the phantom");
    assertFalse(s.hasKey("tokens:t-short:idx"));
    assertEquals(Set.of("t-long", "t-forever"), ids(tokens.findByOwner("bob")));
    assertEquals(2, tokens.count());
    assertEquals(Optional.empty(), tokens.findById("t-short"));
    assertTrue(s.hasKey("tokens:t-long:phantom"));
    assertNull(expired.poll(), "one expiry, one event");
  }

  // ---------------------------------------------------------------------------------------------
  // Cache

  /** A service whose lookups Spring's cache abstraction intercepts. */
  public static class BookService {
    final AtomicInteger lookups = new AtomicInteger();
    final AtomicInteger quoteLookups = new AtomicInteger();

    @Cacheable("books")
    public Book find(String isbn) {
      lookups.incrementAndGet();
      return isbn.startsWith("none") ? null : new Book(isbn, "Title " + isbn, 2024);
    }

    @CachePut(cacheNames = "books", key = "#p0.isbn")
    public Book update(Book book) {
      return book;
    }

    @CacheEvict("books")
    public void evict(String isbn) {}

    public int lookups() {
      return lookups.get();
    }

    @Cacheable("quotes")
    public String quote(String symbol) {
      return symbol + "@" + quoteLookups.incrementAndGet();
    }
  }

  @Configuration
  @EnableCaching
  static class CacheConfig {
    @Bean
    RedisCacheManager cacheManager(RedisConnectionFactory f) {
      RedisCacheConfiguration base = RedisCacheConfiguration.defaultCacheConfig()
          .serializeValuesWith(SerializationPair.fromSerializer(json()));
      return RedisCacheManager.builder(f)
          .cacheDefaults(base.entryTtl(Duration.ofSeconds(100)))
          .withCacheConfiguration("quotes",
              base.entryTtl(Duration.ofSeconds(30)).enableTimeToIdle())
          .build();
    }

    @Bean
    BookService bookService() {
      return new BookService();
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Driver.class)
  void cacheableThroughRedisCacheManager(Driver driver) {
    // @Cacheable stores a method's result under cacheName::key with the cache's TTL (JSON with a
    // type hint), later calls are served from Redis, a null result is cached too, @CachePut
    // overwrites, @CacheEvict and Cache.clear (KEYS, DEL) delete; a time-to-idle cache (GETEX)
    // pushes the TTL back out on every hit. RedisCacheWriter's default writes asynchronously
    // where the driver can (Lettuce), so the test waits for each write to show before relying on
    // it.
    AnnotationConfigApplicationContext ctx = context(driver, CacheConfig.class);
    BookService books = ctx.getBean(BookService.class);
    StringRedisTemplate s = stringTemplate(ctx.getBean(RedisConnectionFactory.class));
    Duration write = Duration.ofSeconds(5);

    Book b = books.find("111");
    assertEquals(new Book("111", "Title 111", 2024), b);
    waitFor(write, "books::111 to be stored", () -> s.hasKey("books::111"));
    assertEquals(b, books.find("111"));
    assertEquals(1, books.lookups(), "the second call was a cache hit");
    String raw = s.opsForValue().get("books::111");
    assertTrue(raw.contains("\"title\":\"Title 111\""), raw);
    long ttl = s.getExpire("books::111");
    assertTrue(ttl > 95 && ttl <= 100, "ttl " + ttl);

    assertNull(books.find("none-1"));
    waitFor(write, "the cached null", () -> s.hasKey("books::none-1"));
    assertNull(books.find("none-1"));
    assertEquals(2, books.lookups(), "a cached null is a hit");

    books.update(new Book("111", "Second edition", 2025));
    waitFor(write, "the @CachePut", () -> s.opsForValue().get("books::111").contains("Second"));
    assertEquals(new Book("111", "Second edition", 2025), books.find("111"));
    assertEquals(2, books.lookups());

    books.evict("111");
    waitFor(write, "the @CacheEvict", () -> !s.hasKey("books::111"));
    assertEquals("Title 111", books.find("111").title());
    assertEquals(3, books.lookups());

    // time to idle: a hit is a GETEX that sets the TTL again
    assertEquals("ACME@1", books.quote("ACME"));
    waitFor(write, "quotes::ACME to be stored", () -> s.hasKey("quotes::ACME"));
    assertTrue(s.expire("quotes::ACME", Duration.ofSeconds(5)));
    assertEquals("ACME@1", books.quote("ACME"));
    long idle = s.getExpire("quotes::ACME");
    assertTrue(idle > 25 && idle <= 30, "ttl after a hit " + idle);

    s.opsForValue().set("unrelated", "stays");
    waitFor(write, "books::111 to be stored again", () -> s.hasKey("books::111"));
    ctx.getBean(RedisCacheManager.class).getCache("books").clear();
    waitFor(write, "Cache.clear", () -> s.keys("books::*").isEmpty());
    assertTrue(s.hasKey("quotes::ACME"));
    assertTrue(s.hasKey("unrelated"));
    books.find("111");
    assertEquals(4, books.lookups(), "a miss after clear");
  }

  // ---------------------------------------------------------------------------------------------
  // Spring Session

  /** Collects Spring Session's application events (created, deleted, expired). */
  public static final class SessionEvents implements ApplicationListener<AbstractSessionEvent> {
    final BlockingQueue<String> events = new LinkedBlockingQueue<>();

    @Override
    public void onApplicationEvent(AbstractSessionEvent event) {
      String kind = event instanceof SessionCreatedEvent ? "created"
          : event instanceof SessionExpiredEvent ? "expired"
          : event instanceof SessionDeletedEvent ? "deleted" : event.getClass().getSimpleName();
      events.add(kind + " " + event.getSessionId());
    }
  }

  @Configuration
  @EnableRedisIndexedHttpSession(maxInactiveIntervalInSeconds = 60, cleanupCron = "-")
  static class SessionConfig {
    @Bean
    SessionEvents sessionEvents() {
      return new SessionEvents();
    }
  }

  static final String PRINCIPAL = FindByIndexNameSessionRepository.PRINCIPAL_NAME_INDEX_NAME;

  @ParameterizedTest(name = "{0}")
  @EnumSource(value = Driver.class, names = "JEDIS_RESP3", mode = EnumSource.Mode.EXCLUDE)
  void springSessionIndexedRepository(Driver driver) {
    // RedisIndexedSessionRepository (what @EnableRedisIndexedHttpSession sets up): it turns on
    // notify-keyspace-events (E, g, x) at startup; a saved session is a hash plus an "expires" key
    // with the max-inactive TTL and an entry in the principal-name index set; its creation is
    // announced over pub/sub; a deleted session's DEL and an idle session's expiry come back as
    // keyspace notifications that become SessionDeletedEvent and SessionExpiredEvent and clean up
    // the principal index. The periodic cleanup job is off (cleanupCron "-"), so the expiry seen
    // here is the server's own.
    AnnotationConfigApplicationContext ctx = context(driver, SessionConfig.class);
    // "" + "E" + "g" + "x", in the order CONFIG GET lists the flags
    assertEquals("gxE", notifyKeyspaceEvents());
    RedisIndexedSessionRepository repo = ctx.getBean(RedisIndexedSessionRepository.class);
    BlockingQueue<String> events = ctx.getBean(SessionEvents.class).events;
    RedisConnectionFactory f = ctx.getBean(RedisConnectionFactory.class);
    StringRedisTemplate s = stringTemplate(f);
    // the repository's own serialization: string keys and hash keys, JDK-serialized values
    RedisTemplate<String, Object> jdk = new RedisTemplate<>();
    jdk.setConnectionFactory(f);
    jdk.setKeySerializer(RedisSerializer.string());
    jdk.afterPropertiesSet();
    try (Jedis j = Support.Proto.RESP2.jedis()) {
      waitFor(Duration.ofSeconds(10), "the session listener container's subscriptions",
          () -> j.pubsubNumPat() == 1
              && j.pubsubNumSub("__keyevent@0__:expired").get("__keyevent@0__:expired") == 1L);
    }

    RedisSession first = repo.createSession();
    first.setAttribute(PRINCIPAL, "alice");
    first.setAttribute("cart", new ArrayList<>(List.of("book", "pen")));
    repo.save(first);
    String id1 = first.getId();
    assertEquals("created " + id1, Support.next(events, "SessionCreatedEvent"));
    String key = "spring:session:sessions:" + id1;
    assertEquals(Set.of("creationTime", "lastAccessedTime", "maxInactiveInterval",
        "sessionAttr:" + PRINCIPAL, "sessionAttr:cart"), s.opsForHash().keys(key));
    long hashTtl = s.getExpire(key);
    assertTrue(hashTtl > 355 && hashTtl <= 360, "session hash ttl " + hashTtl);
    long expiresTtl = s.getExpire("spring:session:sessions:expires:" + id1);
    assertTrue(expiresTtl > 55 && expiresTtl <= 60, "expires key ttl " + expiresTtl);
    String index = "spring:session:index:" + PRINCIPAL + ":alice";
    assertEquals(Set.of(id1), jdk.opsForSet().members(index));

    RedisSession loaded = repo.findById(id1);
    assertNotNull(loaded);
    assertEquals(List.of("book", "pen"), loaded.getAttribute("cart"));
    assertEquals(Duration.ofSeconds(60), loaded.getMaxInactiveInterval());
    loaded.setAttribute("cart", new ArrayList<>(List.of("book", "pen", "lamp")));
    repo.save(loaded);
    assertEquals(List.of("book", "pen", "lamp"), repo.findById(id1).getAttribute("cart"));

    RedisSession second = repo.createSession();
    second.setAttribute(PRINCIPAL, "alice");
    repo.save(second);
    String id2 = second.getId();
    assertEquals("created " + id2, Support.next(events, "SessionCreatedEvent"));
    assertEquals(Set.of(id1, id2), repo.findByPrincipalName("alice").keySet());

    repo.deleteById(id2);
    assertEquals("deleted " + id2, Support.next(events, "SessionDeletedEvent"));
    assertNull(repo.findById(id2));
    assertEquals(Set.of(id1), repo.findByPrincipalName("alice").keySet());
    assertEquals(Set.of(id1), jdk.opsForSet().members(index));

    // bob has two sessions; the one with a 1 s max-inactive interval is left idle until the
    // server expires its "expires" key
    RedisSession bobs = repo.createSession();
    bobs.setAttribute(PRINCIPAL, "bob");
    repo.save(bobs);
    String bobId = bobs.getId();
    assertEquals("created " + bobId, Support.next(events, "SessionCreatedEvent"));
    RedisSession idle = repo.createSession();
    idle.setAttribute(PRINCIPAL, "bob");
    idle.setMaxInactiveInterval(Duration.ofSeconds(1));
    repo.save(idle);
    String idleId = idle.getId();
    assertEquals("created " + idleId, Support.next(events, "SessionCreatedEvent"));
    assertEquals("expired " + idleId, Support.next(events, "SessionExpiredEvent"));
    assertNull(repo.findById(idleId));
    assertEquals(Set.of(bobId), repo.findByPrincipalName("bob").keySet());
    assertEquals(Set.of(bobId),
        jdk.opsForSet().members("spring:session:index:" + PRINCIPAL + ":bob"),
        "the expired session left the principal index");
    assertNotNull(repo.findById(id1), "the other sessions live on");
    assertTrue(events.isEmpty(), "unexpected " + events);
  }
}
