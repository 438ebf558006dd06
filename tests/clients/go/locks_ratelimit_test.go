// Distributed locks with redsync (github.com/go-redsync/redsync/v4: SET NX PX to take a lock,
// Lua scripts run EVALSHA-first to release and extend it) on its go-redis v9 pool, plus its
// rueidis pool sharing a lock; and GCRA rate limiting with redis_rate
// (github.com/go-redis/redis_rate/v10: one Lua script reading TIME and storing a float). Both
// versions are pinned in go.mod; every test runs for both go-redis protocols.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	redsyncrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
)

// isTaken fails unless err is redsync's "lock already taken" error.
func isTaken(t testing.TB, what string, err error) {
	t.Helper()
	var taken *redsync.ErrTaken
	if !errors.As(err, &taken) {
		t.Fatalf("%s: %v (%T), want *redsync.ErrTaken", what, err, err)
	}
}

func TestRedsyncMutex(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		rs := redsync.New(redsyncgoredis.NewPool(c))
		m := rs.NewMutex("lock:a", redsync.WithExpiry(5*time.Second), redsync.WithTries(1))
		must(t, m.Lock(), "Lock")
		// The lock is a key holding the mutex's random value, with the expiry as its TTL.
		eq(t, "lock key's value", c.Get(ctx, "lock:a").Val(), m.Value())
		within(t, "lock key's PTTL", c.PTTL(ctx, "lock:a").Val(), 4*time.Second, 5*time.Second)
		if time.Until(m.Until()) <= 0 || time.Until(m.Until()) > 5*time.Second {
			t.Fatalf("Until: %v from now", time.Until(m.Until()))
		}

		// Another mutex on the same name (another process's) cannot take it.
		m2 := rs.NewMutex("lock:a", redsync.WithTries(1))
		isTaken(t, "TryLock of a held lock", m2.TryLock())
		// Releasing someone else's lock is refused by the release script (value mismatch).
		ok, err := m2.Unlock()
		isTaken(t, "Unlock of a lock held by another value", err)
		eq(t, "Unlock of a lock held by another value", ok, false)
		eq(t, "lock key after a refused unlock", c.Get(ctx, "lock:a").Val(), m.Value())

		ok, err = m.Unlock()
		must(t, err, "Unlock")
		eq(t, "Unlock", ok, true)
		eq(t, "lock key after Unlock", c.Exists(ctx, "lock:a").Val(), int64(0))
		// A second unlock finds no key: ErrLockAlreadyExpired.
		ok, err = m.Unlock()
		if ok || !errors.Is(err, redsync.ErrLockAlreadyExpired) {
			t.Fatalf("second Unlock: %v, %v; want false, ErrLockAlreadyExpired", ok, err)
		}
		must(t, m2.TryLock(), "TryLock after Unlock")

		// The rueidis pool shares the lock: a rueidis client sees it taken, then takes it.
		rc := rueidisClient(t, rueidis.ClientOption{DisableCache: proto == 2, AlwaysRESP2: proto == 2})
		rrs := redsync.New(redsyncrueidis.NewPool(rueidiscompat.NewAdapter(rc)))
		rm := rrs.NewMutex("lock:a", redsync.WithTries(1))
		isTaken(t, "rueidis TryLock of a lock held through go-redis", rm.TryLock())
		ok, err = m2.Unlock()
		must(t, err, "Unlock")
		eq(t, "Unlock", ok, true)
		must(t, rm.TryLock(), "rueidis TryLock after the go-redis unlock")
		eq(t, "lock key taken through rueidis", c.Get(ctx, "lock:a").Val(), rm.Value())
		ok, err = rm.Unlock()
		must(t, err, "rueidis Unlock")
		eq(t, "rueidis Unlock", ok, true)

		// Separate names are separate locks.
		a, b := rs.NewMutex("lock:x", redsync.WithTries(1)), rs.NewMutex("lock:y", redsync.WithTries(1))
		must(t, a.Lock(), "Lock x")
		must(t, b.Lock(), "Lock y")
		for _, mu := range []*redsync.Mutex{a, b} {
			ok, err := mu.Unlock()
			must(t, err, "Unlock")
			eq(t, "Unlock "+mu.Name(), ok, true)
		}
	})
}

func TestRedsyncContention(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		rs := redsync.New(redsyncgoredis.NewPool(c))
		const workers, rounds = 10, 20
		var holders, maxHolders atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					m := rs.NewMutex("lock:counter", redsync.WithTries(2000), redsync.WithRetryDelay(2*time.Millisecond))
					if err := m.LockContext(ctx); err != nil {
						errs <- fmt.Errorf("worker %d round %d: Lock: %w", w, i, err)
						return
					}
					h := holders.Add(1)
					for {
						mx := maxHolders.Load()
						if h <= mx || maxHolders.CompareAndSwap(mx, h) {
							break
						}
					}
					// A read-modify-write that only the lock makes safe.
					n, err := c.Get(ctx, "counter").Int()
					if err != nil && err != redis.Nil {
						errs <- err
						return
					}
					if err := c.Set(ctx, "counter", n+1, 0).Err(); err != nil {
						errs <- err
						return
					}
					holders.Add(-1)
					if ok, err := m.UnlockContext(ctx); !ok || err != nil {
						errs <- fmt.Errorf("worker %d round %d: Unlock: %v, %w", w, i, ok, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eq(t, "most holders at once", maxHolders.Load(), int32(1))
		eq(t, "counter incremented under the lock", c.Get(ctx, "counter").Val(), fmt.Sprint(workers*rounds))
		eq(t, "lock key after the last Unlock", c.Exists(ctx, "lock:counter").Val(), int64(0))
	})
}

func TestRedsyncExtendAndExpiry(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		rs := redsync.New(redsyncgoredis.NewPool(c))
		// A generous timeout factor: short expiries would otherwise give each call a few ms.
		opts := []redsync.Option{redsync.WithTries(1), redsync.WithTimeoutFactor(0.5)}

		// Extend resets the key's TTL to the full expiry (the touch script's PEXPIRE).
		m := rs.NewMutex("lock:ext", append(opts, redsync.WithExpiry(3*time.Second))...)
		must(t, m.Lock(), "Lock")
		must(t, c.PExpire(ctx, "lock:ext", 500*time.Millisecond).Err(), "PEXPIRE (time passing)")
		ok, err := m.Extend()
		must(t, err, "Extend")
		eq(t, "Extend", ok, true)
		within(t, "PTTL after Extend", c.PTTL(ctx, "lock:ext").Val(), 2*time.Second, 3*time.Second)
		// Extend with another mutex's value does nothing.
		other := rs.NewMutex("lock:ext", opts...)
		ok, _ = other.Extend()
		eq(t, "Extend by a mutex that does not hold the lock", ok, false)
		eq(t, "value after a foreign Extend", c.Get(ctx, "lock:ext").Val(), m.Value())

		// WithSetNXOnExtend takes the lock again when it has gone.
		nx := rs.NewMutex("lock:nx", append(opts, redsync.WithExpiry(3*time.Second), redsync.WithSetNXOnExtend())...)
		must(t, nx.Lock(), "Lock")
		must(t, c.Del(ctx, "lock:nx").Err(), "DEL (the lock lost)")
		ok, err = nx.Extend()
		must(t, err, "Extend with SetNXOnExtend")
		eq(t, "Extend with SetNXOnExtend of a lost lock", ok, true)
		eq(t, "value re-set by Extend", c.Get(ctx, "lock:nx").Val(), nx.Value())
		within(t, "PTTL re-set by Extend", c.PTTL(ctx, "lock:nx").Val(), 2*time.Second, 3*time.Second)
		// Without it, extending a lost lock fails.
		must(t, c.Del(ctx, "lock:ext").Err(), "DEL")
		ok, _ = m.Extend()
		eq(t, "Extend of a lost lock", ok, false)
		eq(t, "key after a failed Extend", c.Exists(ctx, "lock:ext").Val(), int64(0))

		// A holder that never unlocks: the server expires the key and a waiter gets the lock,
		// not before the expiry.
		start := time.Now()
		dead := rs.NewMutex("lock:exp", append(opts, redsync.WithExpiry(time.Second))...)
		must(t, dead.Lock(), "Lock with a 1 s expiry")
		waiter := rs.NewMutex("lock:exp", redsync.WithExpiry(5*time.Second), redsync.WithTries(250),
			redsync.WithRetryDelay(20*time.Millisecond))
		isTaken(t, "TryLock right away", waiter.TryLock())
		must(t, waiter.LockContext(ctx), "Lock after the holder's expiry")
		atLeast(t, "wait for an expired lock", time.Since(start), 990*time.Millisecond)
		eq(t, "lock key held by the waiter", c.Get(ctx, "lock:exp").Val(), waiter.Value())
		// The expired holder can neither extend nor release the waiter's lock.
		ok, _ = dead.Extend()
		eq(t, "Extend by the expired holder", ok, false)
		ok, err = dead.Unlock()
		eq(t, "Unlock by the expired holder", ok, false)
		isTaken(t, "Unlock by the expired holder", err)
		ok, err = waiter.Unlock()
		must(t, err, "waiter Unlock")
		eq(t, "waiter Unlock", ok, true)
	})
}

// rateResult formats the integer part of a redis_rate result.
func rateResult(r *redis_rate.Result) string {
	return fmt.Sprintf("allowed=%d remaining=%d", r.Allowed, r.Remaining)
}

func TestRedisRate(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		limiter := redis_rate.NewLimiter(c)
		limit := redis_rate.PerMinute(10) // one slot every 6 s, a burst of 10
		for i := range 10 {
			res, err := limiter.Allow(ctx, "user:1", limit)
			must(t, err, "Allow")
			eq(t, fmt.Sprintf("Allow #%d", i+1), rateResult(res), fmt.Sprintf("allowed=1 remaining=%d", 9-i))
			eq(t, "RetryAfter while allowed", res.RetryAfter, time.Duration(-1))
			within(t, "ResetAfter", res.ResetAfter, time.Duration(6*(i+1)-2)*time.Second, time.Duration(6*(i+1))*time.Second)
		}
		res, err := limiter.Allow(ctx, "user:1", limit)
		must(t, err, "Allow")
		eq(t, "Allow over the limit", rateResult(res), "allowed=0 remaining=0")
		within(t, "RetryAfter when limited (the next slot)", res.RetryAfter, 4*time.Second, 6*time.Second)
		within(t, "ResetAfter when limited", res.ResetAfter, 58*time.Second, 60*time.Second)
		// The state is one key, "rate:" + the key, holding the float TAT, expiring with it.
		tat, err := c.Get(ctx, "rate:user:1").Float64()
		must(t, err, "GET rate:user:1")
		if tat < 2.5e8 { // seconds since 2017-01-01, with microseconds
			t.Fatalf("stored TAT %v", tat)
		}
		within(t, "TTL of the rate key", c.TTL(ctx, "rate:user:1").Val(), 58*time.Second, 60*time.Second)
		// Another key is limited separately.
		res, err = limiter.Allow(ctx, "user:2", limit)
		must(t, err, "Allow user:2")
		eq(t, "Allow of another key", rateResult(res), "allowed=1 remaining=9")
		// Reset deletes the state: the full burst again.
		must(t, limiter.Reset(ctx, "user:1"), "Reset")
		eq(t, "rate key after Reset", c.Exists(ctx, "rate:user:1").Val(), int64(0))
		res, err = limiter.Allow(ctx, "user:1", limit)
		must(t, err, "Allow after Reset")
		eq(t, "Allow after Reset", rateResult(res), "allowed=1 remaining=9")

		// AllowN: a cost of several slots, refused whole when it does not fit.
		res, err = limiter.AllowN(ctx, "n", limit, 3)
		must(t, err, "AllowN 3")
		eq(t, "AllowN 3", rateResult(res), "allowed=3 remaining=7")
		res, err = limiter.AllowN(ctx, "n", limit, 8)
		must(t, err, "AllowN 8")
		eq(t, "AllowN 8 with 7 left", rateResult(res), "allowed=0 remaining=0")
		within(t, "RetryAfter for one missing slot", res.RetryAfter, 4*time.Second, 6*time.Second)
		// AllowAtMost takes what is left.
		res, err = limiter.AllowAtMost(ctx, "n", limit, 8)
		must(t, err, "AllowAtMost 8")
		eq(t, "AllowAtMost 8 with 7 left", rateResult(res), "allowed=7 remaining=0")
		res, err = limiter.AllowAtMost(ctx, "n", limit, 1)
		must(t, err, "AllowAtMost 1")
		eq(t, "AllowAtMost with nothing left", rateResult(res), "allowed=0 remaining=0")
		within(t, "AllowAtMost RetryAfter", res.RetryAfter, 4*time.Second, 6*time.Second)

		// Slots come back with time (the script reads the server's TIME): 2 per second.
		fast := redis_rate.Limit{Rate: 2, Period: time.Second, Burst: 2}
		for i := range 2 {
			res, err = limiter.Allow(ctx, "fast", fast)
			must(t, err, "Allow fast")
			eq(t, fmt.Sprintf("fast #%d allowed", i+1), res.Allowed, 1)
		}
		res, err = limiter.Allow(ctx, "fast", fast)
		must(t, err, "Allow fast")
		eq(t, "fast: burst used up", res.Allowed, 0)
		within(t, "fast: RetryAfter", res.RetryAfter, time.Millisecond, 500*time.Millisecond)
		time.Sleep(res.RetryAfter + 20*time.Millisecond)
		res, err = limiter.Allow(ctx, "fast", fast)
		must(t, err, "Allow fast after RetryAfter")
		eq(t, "fast: allowed after waiting RetryAfter", res.Allowed, 1)

		// Concurrent callers: exactly the limit is allowed, however the calls interleave.
		var allowed atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				for range 5 {
					res, err := limiter.Allow(context.Background(), "shared", redis_rate.PerHour(50))
					if err != nil {
						errs <- err
						return
					}
					allowed.Add(int64(res.Allowed))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		eq(t, "allowed out of 100 concurrent calls with a limit of 50", allowed.Load(), int64(50))
	})
}
