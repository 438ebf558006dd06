// Pipelines, MULTI/EXEC transactions, WATCH with optimistic retries, the connection pool under
// concurrent goroutines, and context deadlines on blocking calls.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestPipelined(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		must(t, c.Set(ctx, "word", "abc", 0).Err(), "SET word")
		var set *redis.StatusCmd
		var incr, bad *redis.IntCmd
		var get, missing *redis.StringCmd
		var all *redis.MapStringStringCmd
		cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			set = pipe.Set(ctx, "k", "v", 0)
			incr = pipe.Incr(ctx, "n")
			bad = pipe.Incr(ctx, "word") // fails alone: the rest of the pipeline still runs
			get = pipe.Get(ctx, "k")
			missing = pipe.Get(ctx, "nope")
			pipe.HSet(ctx, "h", "a", "1", "b", "2")
			all = pipe.HGetAll(ctx, "h")
			return nil
		})
		// Exec reports the first failed command's error; each command keeps its own result.
		errText(t, "Pipelined's error", err, "ERR value is not an integer or out of range")
		eq(t, "commands in the pipeline", len(cmds), 7)
		eq(t, "SET in a pipeline", set.Val(), "OK")
		eq(t, "INCR in a pipeline", incr.Val(), int64(1))
		errText(t, "failing INCR in a pipeline", bad.Err(), "ERR value is not an integer or out of range")
		eq(t, "GET in a pipeline", get.Val(), "v")
		isNil(t, "GET of a missing key in a pipeline", missing.Err())
		deq(t, "HGETALL in a pipeline", all.Val(), map[string]string{"a": "1", "b": "2"})

		// A long pipeline: every reply matched to its command, in order.
		pipe := c.Pipeline()
		incrs := make([]*redis.IntCmd, 5000)
		for i := range incrs {
			incrs[i] = pipe.IncrBy(ctx, fmt.Sprintf("c%d", i%10), int64(i))
		}
		_, err = pipe.Exec(ctx)
		must(t, err, "5000-command pipeline")
		sums := make([]int64, 10)
		for i, cmd := range incrs {
			sums[i%10] += int64(i)
			eq(t, fmt.Sprintf("reply %d", i), cmd.Val(), sums[i%10])
		}
		eq(t, "c9 after the pipeline", c.Get(ctx, "c9").Val(), fmt.Sprint(sums[9]))
	})
}

func TestTxPipelined(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		var incr *redis.IntCmd
		var lrange *redis.StringSliceCmd
		_, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "balance", 100, 0)
			incr = pipe.DecrBy(ctx, "balance", 30)
			pipe.RPush(ctx, "log", "debit 30")
			lrange = pipe.LRange(ctx, "log", 0, -1)
			return nil
		})
		must(t, err, "TxPipelined")
		eq(t, "DECRBY inside MULTI", incr.Val(), int64(70))
		deq(t, "LRANGE inside MULTI", lrange.Val(), []string{"debit 30"})

		// A command that fails at run time does not roll back the others (no rollback in Redis).
		must(t, c.Set(ctx, "word", "abc", 0).Err(), "SET word")
		var bad *redis.IntCmd
		_, err = c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "a", "1", 0)
			bad = pipe.LPush(ctx, "word", "x")
			pipe.Set(ctx, "b", "2", 0)
			return nil
		})
		wrongType := "WRONGTYPE Operation against a key holding the wrong kind of value"
		errText(t, "TxPipelined with a failing command", err, wrongType)
		errText(t, "the failing command", bad.Err(), wrongType)
		deq(t, "keys set around the failure", c.MGet(ctx, "a", "b").Val(), []any{"1", "2"})

		// A command rejected while queueing (wrong arity) discards the whole transaction.
		_, err = c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			pipe.Set(ctx, "c", "3", 0)
			pipe.Do(ctx, "SET", "only-a-key")
			return nil
		})
		errText(t, "EXEC after a queueing error", err,
			"EXECABORT Transaction discarded because of previous errors.")
		eq(t, "EXISTS after EXECABORT", c.Exists(ctx, "c").Val(), int64(0))
	})
}

// incrWithWatch is the optimistic-locking loop from go-redis's documentation pattern: read under
// WATCH, write in MULTI/EXEC, retry when another client changed the key in between.
func incrWithWatch(ctx context.Context, c *redis.Client, key string) (retries int, err error) {
	for retries = 0; retries < 10000; retries++ {
		err = c.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, key).Int()
			if err != nil && err != redis.Nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, key, n+1, 0)
				return nil
			})
			return err
		}, key)
		if err != redis.TxFailedErr {
			return retries, err
		}
	}
	return retries, fmt.Errorf("gave up after %d retries", retries)
}

func TestWatchOptimisticRetry(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		// A write by another client between WATCH and EXEC fails the transaction with
		// TxFailedErr, and its queued write is not applied.
		other := client(t, proto)
		must(t, c.Set(ctx, "k", "1", 0).Err(), "SET")
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			must(t, tx.Get(ctx, "k").Err(), "GET under WATCH")
			must(t, other.Set(ctx, "k", "other", 0).Err(), "SET by another client")
			_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, "k", "mine", 0)
				return nil
			})
			return err
		}, "k")
		if err != redis.TxFailedErr {
			t.Fatalf("EXEC after a concurrent write: %v, want redis.TxFailedErr", err)
		}
		eq(t, "value after the failed transaction", c.Get(ctx, "k").Val(), "other")
		// Without interference the same transaction commits.
		err = c.Watch(ctx, func(tx *redis.Tx) error {
			_, err := tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, "k", "mine", 0)
				return nil
			})
			return err
		}, "k")
		must(t, err, "undisturbed WATCH transaction")
		eq(t, "value after the committed transaction", c.Get(ctx, "k").Val(), "mine")

		// Many goroutines incrementing one counter through WATCH: conflicts are retried, so the
		// total is exact.
		const workers, each = 16, 40
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		var mu sync.Mutex
		retries := 0
		for range workers {
			wg.Go(func() {
				for range each {
					r, err := incrWithWatch(ctx, c, "counter")
					mu.Lock()
					retries += r
					mu.Unlock()
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("WATCH increment: %v", err)
		}
		eq(t, "counter after concurrent WATCH increments", c.Get(ctx, "counter").Val(), fmt.Sprint(workers*each))
		t.Logf("%d optimistic retries", retries)
	})
}

func TestPoolConcurrentIncrs(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, _ *redis.Client) {
		ctx := t.Context()
		// 50 goroutines share a pool of 10 connections: every INCR must count exactly once.
		c := client(t, proto, func(o *redis.Options) { o.PoolSize = 10 })
		const goroutines, each = 50, 200
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					if err := c.Incr(ctx, "hits").Err(); err != nil {
						errs <- fmt.Errorf("goroutine %d, INCR %d: %w", g, i, err)
						return
					}
					if i%50 == 0 { // a per-goroutine key too, read back below
						if err := c.HIncrBy(ctx, "per", fmt.Sprint(g), 1).Err(); err != nil {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eq(t, "hits", c.Get(ctx, "hits").Val(), fmt.Sprint(goroutines*each))
		per := c.HGetAll(ctx, "per").Val()
		eq(t, "goroutines counted", len(per), goroutines)
		for g, n := range per {
			eq(t, "per-goroutine count of "+g, n, "4")
		}
		stats := c.PoolStats()
		if stats.TotalConns < 1 || stats.TotalConns > 10 {
			t.Fatalf("pool holds %d connections, want 1..10", stats.TotalConns)
		}
		eq(t, "pool timeouts", stats.Timeouts, uint32(0))
	})
}

func TestContextDeadlineAndCancel(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		// ContextTimeoutEnabled makes go-redis honour the context's deadline on the socket, as
		// services that pass request contexts rely on; BLPOP 0 would otherwise wait forever.
		bc := client(t, proto, func(o *redis.Options) { o.ContextTimeoutEnabled = true; o.PoolSize = 1 })
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := bc.BLPop(ctx, 0, "never").Err()
		var netErr net.Error
		if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
			t.Fatalf("BLPOP 0 under a 300 ms deadline: %v (%T), want a timeout", err, err)
		}
		within(t, "time to the deadline", time.Since(start), 250*time.Millisecond, 3*time.Second)

		// go-redis drops the timed-out connection; the server must forget the blocked client
		// (not hand it the next element) once it sees the close.
		waitFor(t, 5*time.Second, "the server to drop the blocked client", func() bool {
			return blockedClients(t, c) == 0
		})
		must(t, c.RPush(t.Context(), "never", "kept").Err(), "RPUSH after the timeout")
		deq(t, "list after the abandoned BLPOP", c.LRange(t.Context(), "never", 0, -1).Val(), []string{"kept"})
		// The client itself is still usable: a new connection replaces the dropped one.
		eq(t, "PING after the timeout", bc.Ping(t.Context()).Val(), "PONG")
		deq(t, "BLPOP after the timeout", bc.BLPop(t.Context(), time.Second, "never").Val(), []string{"never", "kept"})

		// Cancelling a call that waits for a pooled connection (the only one is held by a
		// blocked BLPOP) returns context.Canceled at once. go-redis v9 does not interrupt a read
		// already on the socket when a context is cancelled, only when its deadline passes.
		held := make(chan error, 1)
		go func() { held <- bc.BLPop(t.Context(), 10*time.Second, "wake").Err() }()
		waitFor(t, 5*time.Second, "BLPOP to hold the pool's connection", func() bool { return blockedClients(t, c) == 1 })
		cctx, ccancel := context.WithCancel(t.Context())
		stop := time.AfterFunc(100*time.Millisecond, ccancel)
		defer stop.Stop()
		start = time.Now()
		if err := bc.Get(cctx, "k").Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("GET waiting for the pool, cancelled: %v, want context.Canceled", err)
		}
		within(t, "time to the cancel", time.Since(start), 50*time.Millisecond, 3*time.Second)
		must(t, c.RPush(t.Context(), "wake", "up").Err(), "RPUSH to release the held connection")
		select {
		case err := <-held:
			must(t, err, "the BLPOP that held the connection")
		case <-time.After(5 * time.Second):
			t.Fatal("the held BLPOP was not woken by RPUSH")
		}
		// A context cancelled before the call fails it too.
		if err := bc.Get(cctx, "k").Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("GET with a cancelled context: %v, want context.Canceled", err)
		}
		eq(t, "PING after the cancelled calls", bc.Ping(t.Context()).Val(), "PONG")
	})
}
