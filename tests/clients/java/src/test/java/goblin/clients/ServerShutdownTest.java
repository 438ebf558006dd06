package goblin.clients;

import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;

/**
 * Runs last (junit-platform.properties orders classes by @Order): the server must have survived
 * every test above and must stop cleanly on SIGTERM. A crash mid-run fails here even when the
 * tests that saw it were retried or tolerated it.
 */
@Order(Integer.MAX_VALUE)
class ServerShutdownTest {
  @Test
  void serverSurvivedTheRunAndStopsOnSigterm() throws Exception {
    GoblinServer.get().stopAndCheck();
  }
}
