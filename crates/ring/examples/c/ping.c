/* A small C client of goblin-core's ring transport: PING, SET, GET, INCR and a timed loop.
 *   cc -O2 -Icrates/ring/include crates/ring/examples/c/ping.c \
 *      $CARGO_TARGET_DIR/debug/libgoblin_ring.a -lpthread -ldl -lm -o ping
 *   ./ping /tmp/goblin.ring
 * Prints each reply (CRLF shown as \r\n) and exits 0 only if every reply is the expected one. */
#include "goblin_ring.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int check(goblin_ring *r, int argc, const char **argv, const char *want) {
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    char *reply = NULL;
    ssize_t n = goblin_ring_query(r, argc, argv, lens, &reply);
    if (n < 0) {
        fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
        return 0;
    }
    printf("%s -> ", argv[0]);
    for (ssize_t i = 0; i < n; i++) {
        if (reply[i] == '\r') printf("\\r");
        else if (reply[i] == '\n') printf("\\n");
        else putchar(reply[i]);
    }
    putchar('\n');
    int ok = (size_t)n == strlen(want) && memcmp(reply, want, (size_t)n) == 0;
    if (!ok) fprintf(stderr, "expected %s\n", want);
    goblin_ring_free_reply(reply);
    return ok;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s RING_SOCKET_PATH\n", argv[0]);
        return 2;
    }
    goblin_ring *r = goblin_ring_connect(argv[1]);
    if (!r) {
        fprintf(stderr, "connect %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int ok = 1;
    const char *ping[] = {"PING"};
    const char *set[] = {"SET", "c:greeting", "hello from C"};
    const char *get[] = {"GET", "c:greeting"};
    const char *incr[] = {"INCR", "c:counter"};
    ok &= check(r, 1, ping, "+PONG\r\n");
    ok &= check(r, 3, set, "+OK\r\n");
    ok &= check(r, 2, get, "$12\r\nhello from C\r\n");
    ok &= check(r, 2, incr, ":1\r\n");

    /* A timed loop of round trips (the figure is informative, not checked). */
    struct timespec a, b;
    size_t lens[] = {4, 9};
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 10000 && ok; i++) {
        char *reply = NULL;
        ssize_t n = goblin_ring_query(r, 2, incr, lens, &reply);
        ok &= n > 0 && reply[0] == ':';
        goblin_ring_free_reply(reply);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double us = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / 10000;
    printf("10000 INCR round trips: %.2f us each\n", us);
    ok &= check(r, 2, get, "$12\r\nhello from C\r\n");
    goblin_ring_close(r);
    puts(ok ? "all replies as expected" : "UNEXPECTED REPLY");
    return ok ? 0 : 1;
}
