package goblin.clients;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The one server of a test run, started on first use on a free loopback port and stopped by
 * {@link ServerShutdownTest}, which runs last. The binary is $GOBLIN_CORE_BIN, else
 * $CARGO_TARGET_DIR/debug/goblin-core, else ~/.cache/goblin-target/debug/goblin-core.
 * CLIENTS_REFERENCE=redis starts Debian's redis-server instead, to tell a wrong test from a
 * goblin-core bug. (The counterpart of tests/clients/go/server_test.go.)
 */
final class GoblinServer {
  static final boolean REFERENCE = "redis".equals(System.getenv("CLIENTS_REFERENCE"));
  static final String HOST = "127.0.0.1";

  private static GoblinServer instance;
  private static RuntimeException startFailure;

  final int port;
  private final Process proc;
  private final Path dir;
  private final Path log;

  private GoblinServer(int port, Process proc, Path dir, Path log) {
    this.port = port;
    this.proc = proc;
    this.dir = dir;
    this.log = log;
  }

  /** The running server; a failed start fails every test with the same message. */
  static synchronized GoblinServer get() {
    if (startFailure != null) {
      throw startFailure;
    }
    if (instance == null) {
      try {
        instance = start();
      } catch (Exception e) {
        startFailure = e instanceof RuntimeException r ? r : new IllegalStateException(e);
        throw startFailure;
      }
    }
    return instance;
  }

  static String binary() {
    String bin = System.getenv("GOBLIN_CORE_BIN");
    if (bin != null && !bin.isEmpty()) {
      return bin;
    }
    String target = System.getenv("CARGO_TARGET_DIR");
    if (target == null || target.isEmpty()) {
      target = Path.of(System.getProperty("user.home"), ".cache", "goblin-target").toString();
    }
    return Path.of(target, "debug", "goblin-core").toString();
  }

  /**
   * goblin-core treats --port 0 as "no TCP" (like Redis) and cannot report a port it chose, so
   * we take one the OS hands out and give it over.
   */
  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(HOST))) {
      return s.getLocalPort();
    }
  }

  /** Raw RESP, so that readiness does not depend on the clients under test. */
  private static boolean pingOnce(int port) {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(HOST, port), 1000);
      s.setSoTimeout(1000);
      OutputStream out = s.getOutputStream();
      out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      String line =
          new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII))
              .readLine();
      return "+PONG".equals(line);
    } catch (IOException e) {
      return false;
    }
  }

  private static GoblinServer start() throws IOException, InterruptedException {
    String bin = REFERENCE ? "redis-server" : binary();
    if (!REFERENCE && !Files.isExecutable(Path.of(bin))) {
      throw new IllegalStateException(
          "goblin-core not found at " + bin + "; run cargo build -p goblin-core");
    }
    int port = freePort();
    Path dir = Files.createTempDirectory("goblin-java-");
    Path log = dir.resolve("server.log");
    List<String> cmd = new ArrayList<>(List.of(bin, "--port", String.valueOf(port), "--bind", HOST));
    if (REFERENCE) {
      cmd.addAll(List.of("--loglevel", "warning", "--save", "", "--appendonly", "no",
          "--dir", dir.toString()));
    } else {
      cmd.addAll(List.of("--loglevel", "warn", "--save", ""));
    }
    Process proc = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
        .redirectOutput(log.toFile()).start();
    GoblinServer srv = new GoblinServer(port, proc, dir, log);
    // A run cut short (a single class with -Dtest, a killed JVM) must not leave it behind.
    Runtime.getRuntime().addShutdownHook(new Thread(proc::destroyForcibly));
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
    while (!pingOnce(port)) {
      if (!proc.isAlive()) {
        throw new IllegalStateException(
            bin + " exited early (" + proc.exitValue() + "): " + srv.logTail());
      }
      if (System.nanoTime() > deadline) {
        proc.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
        throw new IllegalStateException(bin + " did not answer PING within 15 s: " + srv.logTail());
      }
      Thread.sleep(50);
    }
    System.err.println("java clients: " + bin + " on " + HOST + ":" + port);
    return srv;
  }

  String logTail() {
    try {
      String s = Files.readString(log);
      return s.length() > 4000 ? s.substring(s.length() - 4000) : s;
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  /**
   * SIGTERM, then the verdict: a server that died during the run, or that does not exit cleanly
   * (status 0, or killed by that SIGTERM: 128 + 15) within 10 s, is a failure even when every
   * test passed.
   */
  void stopAndCheck() throws InterruptedException, IOException {
    try {
      if (!proc.isAlive()) {
        throw new AssertionError(
            "server exited during the tests (status " + proc.exitValue() + "): " + logTail());
      }
      proc.destroy(); // SIGTERM
      if (!proc.waitFor(10, TimeUnit.SECONDS)) {
        proc.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
        throw new AssertionError("server did not stop within 10 s of SIGTERM: " + logTail());
      }
      int status = proc.exitValue();
      if (status != 0 && status != 128 + 15) {
        throw new AssertionError("server exited with status " + status + " after SIGTERM: "
            + logTail());
      }
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}
