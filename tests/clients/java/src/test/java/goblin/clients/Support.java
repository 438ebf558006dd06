package goblin.clients;

import static org.junit.jupiter.api.Assertions.fail;

import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.protocol.ProtocolVersion;
import io.lettuce.core.resource.ClientResources;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.RedisProtocol;

/** Shared helpers: the two protocols, client factories, polling with deadlines. */
final class Support {
  private Support() {}

  /** The two runs of every protocol-sensitive test. */
  enum Proto {
    /**
     * HELLO 3: the default of Lettuce and of Jedis 8's RedisClient; the legacy Jedis class and
     * JedisPool stay on RESP2 (no HELLO) unless asked, so the Jedis side asks explicitly.
     */
    RESP3,
    /** HELLO 2, chosen explicitly. */
    RESP2;

    JedisClientConfig jedisConfig() {
      return DefaultJedisClientConfig.builder()
          .protocol(this == RESP3 ? RedisProtocol.RESP3 : RedisProtocol.RESP2)
          .timeoutMillis(10_000)
          .build();
    }

    /** A new Jedis connection; the caller closes it. */
    Jedis jedis() {
      return new Jedis(hostAndPort(), jedisConfig());
    }

    /**
     * A Lettuce client: RESP3 is Lettuce's default (HELLO 3 on connect), RESP2 is set through
     * ClientOptions.
     */
    RedisClient lettuce(ClientResources resources) {
      RedisURI uri = RedisURI.Builder.redis(GoblinServer.HOST, GoblinServer.get().port)
          .withTimeout(Duration.ofSeconds(10)).build();
      RedisClient client = RedisClient.create(resources, uri);
      if (this == RESP2) {
        client.setOptions(ClientOptions.builder().protocolVersion(ProtocolVersion.RESP2).build());
      }
      return client;
    }

    /** The resp= field that CLIENT INFO shows for a connection of this protocol. */
    String clientInfoResp() {
      return this == RESP3 ? "resp=3" : "resp=2";
    }
  }

  static HostAndPort hostAndPort() {
    return new HostAndPort(GoblinServer.HOST, GoblinServer.get().port);
  }

  /** An empty keyspace, so tests do not depend on one another's data. */
  static void flushAll() {
    try (Jedis j = Proto.RESP2.jedis()) {
      j.flushAll();
    }
  }

  /**
   * Polls cond until it holds, failing at the deadline: no fixed sleeps, the test goes on as
   * soon as the condition is met, and a condition never met fails loudly.
   */
  static void waitFor(Duration timeout, String what, BooleanSupplier cond) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("timed out after " + timeout + " waiting for " + what);
      }
      try {
        Thread.sleep(10);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fail("interrupted waiting for " + what);
      }
    }
  }

  /** The next event from a listener's queue, or a failure after 5 s. */
  static String next(BlockingQueue<String> events, String what) {
    try {
      String e = events.poll(5, TimeUnit.SECONDS);
      if (e == null) {
        fail("no event within 5 s: expected " + what);
      }
      return e;
    } catch (InterruptedException ex) {
      Thread.currentThread().interrupt();
      throw new AssertionError(ex);
    }
  }

  /** INFO text ("key:value" lines, "# Section" headers) as a map. */
  static Map<String, String> parseInfo(String info) {
    Map<String, String> m = new HashMap<>();
    for (String line : info.split("\r?\n")) {
      int colon = line.indexOf(':');
      if (!line.startsWith("#") && colon > 0) {
        m.put(line.substring(0, colon), line.substring(colon + 1));
      }
    }
    return m;
  }

  /** "keys=3,expires=1,avg_ttl=0" as a map. */
  static Map<String, String> parseFields(String value) {
    Map<String, String> m = new HashMap<>();
    for (String kv : value.split(",")) {
      String[] p = kv.split("=", 2);
      m.put(p[0], p.length > 1 ? p[1] : "");
    }
    return m;
  }

  /** Whether a CLIENT INFO / CLIENT LIST line has this exact name=value field. */
  static boolean hasField(String clientInfo, String field) {
    return java.util.Arrays.asList(clientInfo.trim().split("\\s+")).contains(field);
  }

  /** blocked_clients from INFO clients: how a test knows another client is parked in BLPOP. */
  static int blockedClients(Jedis j) {
    return Integer.parseInt(parseInfo(j.info("clients")).get("blocked_clients"));
  }

  /** The lowercase hex SHA-1 that SCRIPT LOAD and EVALSHA use. */
  static String sha1Hex(String script) {
    try {
      return HexFormat.of().formatHex(
          MessageDigest.getInstance("SHA-1").digest(script.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
