/*
 * goblin_ring.h: the C API of goblin-ring, a client for goblin-core's shared-memory ring
 * transport (goblin-core --ring PATH). Link with libgoblin_ring.a (plus -lpthread -ldl -lm)
 * or libgoblin_ring.so, both built by `cargo build -p goblin-ring`.
 *
 * A connection is not thread-safe: use one per thread. Every call blocks until it is done.
 * Replies are raw RESP bytes (e.g. "+OK\r\n", "$3\r\nbar\r\n"), NUL-terminated for convenience
 * (a bulk reply may itself contain NUL bytes: use the returned length).
 */
#ifndef GOBLIN_RING_H
#define GOBLIN_RING_H

#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct GoblinRing goblin_ring;

/* Connects to the rendezvous socket at `path` and maps the connection's rings.
 * Returns NULL on failure, with errno set (e.g. ENOENT, ECONNREFUSED). */
goblin_ring *goblin_ring_connect(const char *path);

/* Sends one command of `argc` binary-safe arguments (`argv[i]` is `argvlen[i]` bytes) and
 * waits for its whole reply. On success stores a malloc'd copy of the reply in `*reply` (free
 * it with goblin_ring_free_reply) and returns its length; on failure returns -1 with errno set
 * (EPIPE or EIO once the server is gone). An error *reply* ("-ERR ...") is a success here. */
ssize_t goblin_ring_query(goblin_ring *ring, int argc, const char **argv, const size_t *argvlen,
                          char **reply);

/* Frees a reply from goblin_ring_query (NULL is ignored). */
void goblin_ring_free_reply(char *reply);

/* Closes the connection (the server frees its rings) and frees `ring` (NULL is ignored). */
void goblin_ring_close(goblin_ring *ring);

#ifdef __cplusplus
}
#endif

#endif
