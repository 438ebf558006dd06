// go-redis's typed commands on each data type, the way Go services call them: every reply goes
// through go-redis's own parsers (StatusCmd, DurationCmd, MapStringStringCmd, ZSliceCmd ...), so a
// reply shape go-redis cannot read fails here even when the raw bytes look plausible.
package goredis

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// deq fails the test unless got and want are deeply equal.
func deq(t testing.TB, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %#v\n want %#v", what, got, want)
	}
}

// isNil fails the test unless err is go-redis's "key does not exist" sentinel.
func isNil(t testing.TB, what string, err error) {
	t.Helper()
	if err != redis.Nil {
		t.Fatalf("%s: got error %v, want redis.Nil", what, err)
	}
}

// errText fails the test unless err is a server error with exactly this text.
func errText(t testing.TB, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %q", what, want)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("%s: %v (%T) is not a server error", what, err, err)
	}
	if err.Error() != want {
		t.Fatalf("%s: error %q, want %q", what, err.Error(), want)
	}
}

// within fails the test unless lo <= d <= hi.
func within(t testing.TB, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Fatalf("%s: %v, want between %v and %v", what, d, lo, hi)
	}
}

// atLeast checks that a wait lasted as long as the server had to make it. Only the lower bound:
// how much longer it took is the machine's business, not a result.
func atLeast(t testing.TB, what string, d, lo time.Duration) {
	t.Helper()
	if d < lo {
		t.Fatalf("%s: %v, want at least %v", what, d, lo)
	}
}

// --- strings ---------------------------------------------------------------------------------

func TestStringSetOptions(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "SET", c.Set(ctx, "s", "v1", 0).Val(), "OK")
		// SetNX / SetXX are the lock and update-only idioms: false, not an error, when skipped.
		ok, err := c.SetNX(ctx, "s", "v2", 0).Result()
		must(t, err, "SET NX")
		eq(t, "SET NX on an existing key", ok, false)
		eq(t, "value after SET NX", c.Get(ctx, "s").Val(), "v1")
		eq(t, "SET XX on an existing key", c.SetXX(ctx, "s", "v3", 0).Val(), true)
		eq(t, "SET XX on a missing key", c.SetXX(ctx, "missing", "v", 0).Val(), false)
		eq(t, "EXISTS after a skipped SET XX", c.Exists(ctx, "missing").Val(), int64(0))
		// SetArgs with Mode NX on an existing key: the server's nil reply is redis.Nil.
		isNil(t, "SetArgs NX on an existing key", c.SetArgs(ctx, "s", "v", redis.SetArgs{Mode: "NX"}).Err())

		// A whole-second TTL goes out as EX, a sub-second one as PX.
		eq(t, "SET EX", c.SetArgs(ctx, "s", "v4", redis.SetArgs{TTL: 100 * time.Second}).Val(), "OK")
		within(t, "TTL after SET EX 100", c.TTL(ctx, "s").Val(), 99*time.Second, 100*time.Second)
		must(t, c.Set(ctx, "s", "v5", 50*time.Second+500*time.Millisecond).Err(), "SET PX")
		within(t, "PTTL after SET PX 50500", c.PTTL(ctx, "s").Val(), 49*time.Second, 50500*time.Millisecond)
		// KEEPTTL keeps the expiry; a plain SET drops it.
		must(t, c.SetArgs(ctx, "s", "v6", redis.SetArgs{KeepTTL: true}).Err(), "SET KEEPTTL")
		within(t, "PTTL after SET KEEPTTL", c.PTTL(ctx, "s").Val(), 49*time.Second, 50500*time.Millisecond)
		eq(t, "value after SET KEEPTTL", c.Get(ctx, "s").Val(), "v6")

		// SET ... GET returns the previous value, and redis.Nil when there was none.
		old, err := c.SetArgs(ctx, "s", "v7", redis.SetArgs{Get: true}).Result()
		must(t, err, "SET GET")
		eq(t, "SET GET's old value", old, "v6")
		eq(t, "TTL after a plain SET GET", c.TTL(ctx, "s").Val(), time.Duration(-1))
		isNil(t, "SET GET on a missing key", c.SetArgs(ctx, "fresh", "x", redis.SetArgs{Get: true}).Err())
		eq(t, "value written by SET GET", c.Get(ctx, "fresh").Val(), "x")
		// NX and GET together (Redis 7.0): the old value comes back and nothing is written.
		old, err = c.SetArgs(ctx, "s", "v8", redis.SetArgs{Mode: "NX", Get: true}).Result()
		must(t, err, "SET NX GET")
		eq(t, "SET NX GET's old value", old, "v7")
		eq(t, "value after SET NX GET", c.Get(ctx, "s").Val(), "v7")

		// GETEX sets or (expiration 0) removes the TTL and returns the value.
		eq(t, "GETEX EX", c.GetEx(ctx, "s", 10*time.Second).Val(), "v7")
		within(t, "TTL after GETEX EX 10", c.TTL(ctx, "s").Val(), 9*time.Second, 10*time.Second)
		eq(t, "GETEX PERSIST", c.GetEx(ctx, "s", 0).Val(), "v7")
		eq(t, "TTL after GETEX PERSIST", c.TTL(ctx, "s").Val(), time.Duration(-1))
		isNil(t, "GETEX on a missing key", c.GetEx(ctx, "missing", time.Second).Err())

		eq(t, "GETDEL", c.GetDel(ctx, "s").Val(), "v7")
		isNil(t, "GET after GETDEL", c.Get(ctx, "s").Err())
		isNil(t, "GETDEL on a missing key", c.GetDel(ctx, "s").Err())
	})
}

func TestStringCountersAndMulti(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "INCR on a missing key", c.Incr(ctx, "n").Val(), int64(1))
		eq(t, "INCRBY", c.IncrBy(ctx, "n", 41).Val(), int64(42))
		eq(t, "DECRBY", c.DecrBy(ctx, "n", 50).Val(), int64(-8))
		eq(t, "GET of a counter", c.Get(ctx, "n").Val(), "-8")
		n, err := c.Get(ctx, "n").Int64()
		must(t, err, "GET as Int64")
		eq(t, "GET as Int64", n, int64(-8))

		eq(t, "INCRBYFLOAT", c.IncrByFloat(ctx, "f", 1.5).Val(), 1.5)
		eq(t, "INCRBYFLOAT again", c.IncrByFloat(ctx, "f", 0.1).Val(), 1.6)
		// The stored text is the shortest form, not a float64 dump.
		eq(t, "GET after INCRBYFLOAT", c.Get(ctx, "f").Val(), "1.6")
		must(t, c.Set(ctx, "e", "3.0e3", 0).Err(), "SET exponent")
		eq(t, "INCRBYFLOAT on an exponent", c.IncrByFloat(ctx, "e", 200).Val(), 3200.0)
		eq(t, "GET after INCRBYFLOAT on an exponent", c.Get(ctx, "e").Val(), "3200")

		must(t, c.Set(ctx, "word", "abc", 0).Err(), "SET word")
		errText(t, "INCR on a non-number", c.Incr(ctx, "word").Err(), "ERR value is not an integer or out of range")
		errText(t, "INCRBYFLOAT on a non-number", c.IncrByFloat(ctx, "word", 1).Err(), "ERR value is not a valid float")
		must(t, c.Set(ctx, "max", strconv.FormatInt(1<<63-1, 10), 0).Err(), "SET max int64")
		errText(t, "INCR past int64", c.Incr(ctx, "max").Err(), "ERR increment or decrement would overflow")

		// MSET takes pairs or a map; MGET answers nil for a missing key, in order.
		eq(t, "MSET pairs", c.MSet(ctx, "a", "1", "b", 2).Val(), "OK")
		eq(t, "MSET map", c.MSet(ctx, map[string]any{"c": "3"}).Val(), "OK")
		vals, err := c.MGet(ctx, "a", "missing", "b", "c").Result()
		must(t, err, "MGET")
		deq(t, "MGET", vals, []any{"1", nil, "2", "3"})
		eq(t, "MSETNX with one existing key", c.MSetNX(ctx, "a", "x", "d", "4").Val(), false)
		eq(t, "EXISTS after a refused MSETNX", c.Exists(ctx, "d").Val(), int64(0))
		eq(t, "MSETNX with new keys", c.MSetNX(ctx, "d", "4", "e2", "5").Val(), true)
		eq(t, "APPEND", c.Append(ctx, "a", "23").Val(), int64(3))
		eq(t, "STRLEN", c.StrLen(ctx, "a").Val(), int64(3))
		eq(t, "GETRANGE", c.GetRange(ctx, "a", 1, -1).Val(), "23")
	})
}

// --- keys and expiry -------------------------------------------------------------------------

func TestKeyExpiryAndTTLDurations(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		must(t, c.Set(ctx, "k", "v", 0).Err(), "SET")
		// go-redis hands back -1 and -2 as raw Durations, not as seconds.
		eq(t, "TTL without expiry", c.TTL(ctx, "k").Val(), time.Duration(-1))
		eq(t, "TTL of a missing key", c.TTL(ctx, "nope").Val(), time.Duration(-2))
		eq(t, "PTTL of a missing key", c.PTTL(ctx, "nope").Val(), time.Duration(-2))

		eq(t, "EXPIRE", c.Expire(ctx, "k", 100*time.Second).Val(), true)
		within(t, "TTL", c.TTL(ctx, "k").Val(), 99*time.Second, 100*time.Second)
		eq(t, "EXPIRE on a missing key", c.Expire(ctx, "nope", time.Second).Val(), false)
		// EXPIRE's NX/XX/GT/LT (Redis 7.0).
		eq(t, "EXPIRE NX on a key with a TTL", c.ExpireNX(ctx, "k", 10*time.Second).Val(), false)
		eq(t, "EXPIRE GT with a shorter TTL", c.ExpireGT(ctx, "k", 10*time.Second).Val(), false)
		eq(t, "EXPIRE LT with a shorter TTL", c.ExpireLT(ctx, "k", 10*time.Second).Val(), true)
		within(t, "TTL after EXPIRE LT", c.TTL(ctx, "k").Val(), 9*time.Second, 10*time.Second)
		eq(t, "PEXPIRE", c.PExpire(ctx, "k", 2500*time.Millisecond).Val(), true)
		within(t, "PTTL after PEXPIRE", c.PTTL(ctx, "k").Val(), 2*time.Second, 2500*time.Millisecond)
		eq(t, "PERSIST", c.Persist(ctx, "k").Val(), true)
		eq(t, "PERSIST without a TTL", c.Persist(ctx, "k").Val(), false)
		eq(t, "TTL after PERSIST", c.TTL(ctx, "k").Val(), time.Duration(-1))

		// EXPIREAT with a whole second; EXPIRETIME reads it back (Redis 7.0).
		at := time.Now().Add(time.Hour).Truncate(time.Second)
		eq(t, "EXPIREAT", c.ExpireAt(ctx, "k", at).Val(), true)
		eq(t, "EXPIRETIME", c.ExpireTime(ctx, "k").Val(), time.Duration(at.Unix())*time.Second)
		eq(t, "PEXPIRETIME", c.PExpireTime(ctx, "k").Val(), time.Duration(at.UnixMilli())*time.Millisecond)
		// A time in the past deletes the key at once.
		eq(t, "EXPIREAT in the past", c.ExpireAt(ctx, "k", time.Now().Add(-time.Minute)).Val(), true)
		eq(t, "EXISTS after EXPIREAT in the past", c.Exists(ctx, "k").Val(), int64(0))

		// A key set with PX 300 must be there until 300 ms after the SET was sent and gone
		// soon after: poll instead of sleeping, and check when it disappeared.
		start := time.Now()
		must(t, c.Set(ctx, "short", "x", 300*time.Millisecond).Err(), "SET PX 300")
		eq(t, "GET right after SET PX", c.Get(ctx, "short").Val(), "x")
		waitFor(t, 3*time.Second, "the key to expire", func() bool {
			return c.Exists(ctx, "short").Val() == 0
		})
		if gone := time.Since(start); gone < 300*time.Millisecond {
			t.Fatalf("key with PX 300 vanished after %v", gone)
		}
		isNil(t, "GET of an expired key", c.Get(ctx, "short").Err())
		eq(t, "TTL of an expired key", c.TTL(ctx, "short").Val(), time.Duration(-2))
	})
}

func TestKeyspaceCommands(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		must(t, c.Set(ctx, "str", "v", 0).Err(), "SET")
		must(t, c.RPush(ctx, "list", "a").Err(), "RPUSH")
		must(t, c.HSet(ctx, "hash", "f", "v").Err(), "HSET")
		eq(t, "TYPE string", c.Type(ctx, "str").Val(), "string")
		eq(t, "TYPE list", c.Type(ctx, "list").Val(), "list")
		eq(t, "TYPE hash", c.Type(ctx, "hash").Val(), "hash")
		eq(t, "TYPE missing", c.Type(ctx, "nope").Val(), "none")
		eq(t, "EXISTS counts repeats", c.Exists(ctx, "str", "str", "nope").Val(), int64(2))
		eq(t, "DBSIZE", c.DBSize(ctx).Val(), int64(3))
		eq(t, "RENAME", c.Rename(ctx, "str", "str2").Val(), "OK")
		errText(t, "RENAME of a missing key", c.Rename(ctx, "nope", "x").Err(), "ERR no such key")
		eq(t, "RENAMENX onto an existing key", c.RenameNX(ctx, "str2", "list").Val(), false)
		eq(t, "COPY", c.Copy(ctx, "str2", "copy", 0, false).Val(), int64(1))
		eq(t, "GET of a copy", c.Get(ctx, "copy").Val(), "v")
		eq(t, "DEL", c.Del(ctx, "str2", "copy", "nope").Val(), int64(2))
		eq(t, "UNLINK", c.Unlink(ctx, "list").Val(), int64(1))
		keys, err := c.Keys(ctx, "*").Result()
		must(t, err, "KEYS")
		deq(t, "KEYS", keys, []string{"hash"})
	})
}

// --- hashes ----------------------------------------------------------------------------------

// user is how Go services usually map a hash: struct tags read by HSet and by Scan.
type user struct {
	Name  string `redis:"name"`
	Age   int    `redis:"age"`
	Admin bool   `redis:"admin"`
}

func TestHashes(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "HSET map", c.HSet(ctx, "h", map[string]any{"name": "ann", "age": 30}).Val(), int64(2))
		eq(t, "HSET pairs, one new", c.HSet(ctx, "h", "name", "bob", "city", "oslo").Val(), int64(1))
		// HGETALL arrives as a map in RESP3 and as a flat list in RESP2; go-redis gives a map.
		all, err := c.HGetAll(ctx, "h").Result()
		must(t, err, "HGETALL")
		deq(t, "HGETALL", all, map[string]string{"name": "bob", "age": "30", "city": "oslo"})
		empty, err := c.HGetAll(ctx, "nope").Result()
		must(t, err, "HGETALL of a missing key")
		deq(t, "HGETALL of a missing key", empty, map[string]string{})
		eq(t, "HGET", c.HGet(ctx, "h", "name").Val(), "bob")
		isNil(t, "HGET of a missing field", c.HGet(ctx, "h", "zip").Err())
		vals, err := c.HMGet(ctx, "h", "age", "zip", "city").Result()
		must(t, err, "HMGET")
		deq(t, "HMGET", vals, []any{"30", nil, "oslo"})

		eq(t, "HINCRBY", c.HIncrBy(ctx, "h", "age", 5).Val(), int64(35))
		eq(t, "HINCRBY on a new field", c.HIncrBy(ctx, "h", "visits", -2).Val(), int64(-2))
		eq(t, "HINCRBYFLOAT", c.HIncrByFloat(ctx, "h", "score", 2.25).Val(), 2.25)
		errText(t, "HINCRBY on a non-number", c.HIncrBy(ctx, "h", "name", 1).Err(),
			"ERR hash value is not an integer")
		eq(t, "HEXISTS", c.HExists(ctx, "h", "city").Val(), true)
		eq(t, "HSETNX on an existing field", c.HSetNX(ctx, "h", "city", "rome").Val(), false)
		eq(t, "HDEL", c.HDel(ctx, "h", "city", "zip").Val(), int64(1))
		eq(t, "HLEN", c.HLen(ctx, "h").Val(), int64(4))
		keys := c.HKeys(ctx, "h").Val()
		slices.Sort(keys)
		deq(t, "HKEYS", keys, []string{"age", "name", "score", "visits"})

		// A struct in, a struct out: HSet reads the redis tags, Scan fills them from HGETALL.
		eq(t, "HSET struct", c.HSet(ctx, "user:1", user{Name: "cy", Age: 41, Admin: true}).Val(), int64(3))
		eq(t, "HGET of a bool field", c.HGet(ctx, "user:1", "admin").Val(), "1")
		var u user
		must(t, c.HGetAll(ctx, "user:1").Scan(&u), "HGETALL into a struct")
		eq(t, "HGETALL into a struct", u, user{Name: "cy", Age: 41, Admin: true})
	})
}

func TestHScanIterator(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		want := map[string]string{}
		args := []any{}
		for i := range 600 {
			f, v := fmt.Sprintf("f%d", i), fmt.Sprintf("v%d", i*i)
			want[f] = v
			args = append(args, f, v)
		}
		eq(t, "HSET 600 fields", c.HSet(ctx, "big", args...).Val(), int64(600))
		// The iterator yields field, value, field, value ... across as many cursors as needed.
		got := map[string]string{}
		it := c.HScan(ctx, "big", 0, "", 50).Iterator()
		for it.Next(ctx) {
			field := it.Val()
			if !it.Next(ctx) {
				t.Fatalf("HSCAN iterator ended after field %q without its value", field)
			}
			got[field] = it.Val()
		}
		must(t, it.Err(), "HSCAN iterator")
		deq(t, "HSCAN over 600 fields", got, want)

		// MATCH filters on the server: f1, f10..f19, f100..f199.
		matched := 0
		it = c.HScan(ctx, "big", 0, "f1*", 100).Iterator()
		for it.Next(ctx) {
			if !strings.HasPrefix(it.Val(), "f1") {
				t.Fatalf("HSCAN MATCH f1* returned field %q", it.Val())
			}
			it.Next(ctx)
			matched++
		}
		must(t, it.Err(), "HSCAN MATCH iterator")
		eq(t, "fields matching f1*", matched, 111)

		// A small hash comes back whole from one call, with cursor 0.
		must(t, c.HSet(ctx, "small", "a", "1", "b", "2").Err(), "HSET small")
		kv, cursor, err := c.HScan(ctx, "small", 0, "", 10).Result()
		must(t, err, "HSCAN small")
		eq(t, "cursor after a small hash", cursor, uint64(0))
		eq(t, "HSCAN small length", len(kv), 4)
	})
}

// --- lists -----------------------------------------------------------------------------------

func TestLists(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "RPUSH", c.RPush(ctx, "l", "a", "b", "c").Val(), int64(3))
		eq(t, "LPUSH", c.LPush(ctx, "l", "z", "y").Val(), int64(5))
		deq(t, "LRANGE", c.LRange(ctx, "l", 0, -1).Val(), []string{"y", "z", "a", "b", "c"})
		eq(t, "LINDEX -1", c.LIndex(ctx, "l", -1).Val(), "c")
		isNil(t, "LINDEX out of range", c.LIndex(ctx, "l", 10).Err())
		eq(t, "LPOS", c.LPos(ctx, "l", "a", redis.LPosArgs{}).Val(), int64(2))
		isNil(t, "LPOS of a missing element", c.LPos(ctx, "l", "q", redis.LPosArgs{}).Err())
		eq(t, "LPOP", c.LPop(ctx, "l").Val(), "y")
		deq(t, "LPOP count", c.LPopCount(ctx, "l", 2).Val(), []string{"z", "a"})
		eq(t, "LMOVE", c.LMove(ctx, "l", "other", "RIGHT", "LEFT").Val(), "c")
		deq(t, "LRANGE after LMOVE", c.LRange(ctx, "l", 0, -1).Val(), []string{"b"})
		eq(t, "RPOP of the last element", c.RPop(ctx, "l").Val(), "b")
		// Popping the last element deletes the key.
		eq(t, "EXISTS of an emptied list", c.Exists(ctx, "l").Val(), int64(0))
		isNil(t, "RPOP of a missing list", c.RPop(ctx, "l").Err())
		must(t, c.RPush(ctx, "t", 1, 2, 3, 2, 1).Err(), "RPUSH numbers")
		eq(t, "LREM", c.LRem(ctx, "t", 0, "2").Val(), int64(2))
		eq(t, "LTRIM", c.LTrim(ctx, "t", 0, 1).Val(), "OK")
		deq(t, "LRANGE after LTRIM", c.LRange(ctx, "t", 0, -1).Val(), []string{"1", "3"})
		eq(t, "LINSERT", c.LInsertBefore(ctx, "t", "3", "x").Val(), int64(3))
		eq(t, "LSET", c.LSet(ctx, "t", 0, "one").Val(), "OK")
		deq(t, "LRANGE after LINSERT, LSET", c.LRange(ctx, "t", 0, -1).Val(), []string{"one", "x", "3"})
		eq(t, "LLEN", c.LLen(ctx, "t").Val(), int64(3))
	})
}

// blockedClients reads INFO's blocked_clients, to know that a blocking call has reached the
// server before the element that wakes it is pushed.
func blockedClients(t testing.TB, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "clients").Result()
	must(t, err, "INFO clients")
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "blocked_clients:"); ok {
			n, err := strconv.Atoi(v)
			must(t, err, "blocked_clients")
			return n
		}
	}
	t.Fatalf("INFO clients has no blocked_clients: %q", info)
	return 0
}

func TestBLPopTimeoutAndWake(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		// Nothing to pop: after the 1 s timeout the server's nil reply is redis.Nil.
		start := time.Now()
		isNil(t, "BLPOP on empty lists", c.BLPop(ctx, time.Second, "q1", "q2").Err())
		atLeast(t, "BLPOP's wait", time.Since(start), 900*time.Millisecond)

		// An element already there comes back at once, with the key it came from.
		must(t, c.RPush(ctx, "q2", "ready").Err(), "RPUSH")
		deq(t, "BLPOP of a waiting element", c.BLPop(ctx, 5*time.Second, "q1", "q2").Val(), []string{"q2", "ready"})

		// A blocked BLPOP is woken by another client's push, long before its timeout.
		type result struct {
			val []string
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := c.BLPop(ctx, 10*time.Second, "q1", "q2").Result()
			done <- result{v, err}
		}()
		other := client(t, proto)
		waitFor(t, 5*time.Second, "BLPOP to block", func() bool { return blockedClients(t, other) == 1 })
		eq(t, "RPUSH to a blocked key", other.RPush(ctx, "q1", "x", "y").Val(), int64(2))
		select {
		case r := <-done:
			must(t, r.err, "woken BLPOP")
			deq(t, "woken BLPOP", r.val, []string{"q1", "x"})
		case <-time.After(5 * time.Second):
			t.Fatal("BLPOP was not woken by RPUSH within 5 s")
		}
		// Only the popped element left the list.
		deq(t, "list after the woken BLPOP", other.LRange(ctx, "q1", 0, -1).Val(), []string{"y"})
		eq(t, "blocked clients afterwards", blockedClients(t, other), 0)
	})
}

// --- sets ------------------------------------------------------------------------------------

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestSets(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "SADD", c.SAdd(ctx, "a", "x", "y", "z", "x").Val(), int64(3))
		eq(t, "SADD again", c.SAdd(ctx, "b", "y", "z", "w").Val(), int64(3))
		// SMEMBERS is a RESP3 set reply (~) under HELLO 3; go-redis gives a slice either way.
		deq(t, "SMEMBERS", sorted(c.SMembers(ctx, "a").Val()), []string{"x", "y", "z"})
		deq(t, "SMEMBERS map", c.SMembersMap(ctx, "a").Val(),
			map[string]struct{}{"x": {}, "y": {}, "z": {}})
		eq(t, "SISMEMBER", c.SIsMember(ctx, "a", "x").Val(), true)
		eq(t, "SISMEMBER of a non-member", c.SIsMember(ctx, "a", "w").Val(), false)
		deq(t, "SMISMEMBER", c.SMIsMember(ctx, "a", "x", "w", "z").Val(), []bool{true, false, true})
		eq(t, "SCARD", c.SCard(ctx, "a").Val(), int64(3))
		deq(t, "SINTER", sorted(c.SInter(ctx, "a", "b").Val()), []string{"y", "z"})
		deq(t, "SUNION", sorted(c.SUnion(ctx, "a", "b").Val()), []string{"w", "x", "y", "z"})
		deq(t, "SDIFF", c.SDiff(ctx, "a", "b").Val(), []string{"x"})
		eq(t, "SINTERSTORE", c.SInterStore(ctx, "both", "a", "b").Val(), int64(2))
		deq(t, "stored intersection", sorted(c.SMembers(ctx, "both").Val()), []string{"y", "z"})
		eq(t, "SINTERCARD", c.SInterCard(ctx, 0, "a", "b").Val(), int64(2))
		eq(t, "SREM", c.SRem(ctx, "a", "x", "nope").Val(), int64(1))
		eq(t, "SMOVE", c.SMove(ctx, "a", "b", "y").Val(), true)
		deq(t, "set after SREM, SMOVE", c.SMembers(ctx, "a").Val(), []string{"z"})
		popped := c.SPopN(ctx, "b", 10).Val()
		deq(t, "SPOP count", sorted(popped), []string{"w", "y", "z"})
		eq(t, "EXISTS of an emptied set", c.Exists(ctx, "b").Val(), int64(0))
		deq(t, "SMEMBERS of a missing key", c.SMembers(ctx, "b").Val(), []string{})
	})
}

// --- sorted sets -----------------------------------------------------------------------------

func TestSortedSets(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "ZADD", c.ZAdd(ctx, "z",
			redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}, redis.Z{Score: 3, Member: "c"},
			redis.Z{Score: 4, Member: "d"}, redis.Z{Score: 5.5, Member: "e"}).Val(), int64(5))
		// ZADD's options: NX only adds, GT only raises, CH counts changes.
		eq(t, "ZADD NX on an existing member", c.ZAddNX(ctx, "z", redis.Z{Score: 100, Member: "a"}).Val(), int64(0))
		eq(t, "ZADD GT CH lower", c.ZAddArgs(ctx, "z", redis.ZAddArgs{GT: true, Ch: true,
			Members: []redis.Z{{Score: 0, Member: "b"}}}).Val(), int64(0))
		eq(t, "ZADD GT CH higher", c.ZAddArgs(ctx, "z", redis.ZAddArgs{GT: true, Ch: true,
			Members: []redis.Z{{Score: 2.5, Member: "b"}}}).Val(), int64(1))

		deq(t, "ZRANGE by index", c.ZRange(ctx, "z", 0, 1).Val(), []string{"a", "b"})
		// ZRANGE BYSCORE with an exclusive bound.
		deq(t, "ZRANGE BYSCORE (2.5 +inf", c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z", Start: "(2.5", Stop: "+inf",
			ByScore: true}).Val(), []string{"c", "d", "e"})
		// REV takes the higher bound first.
		deq(t, "ZRANGE BYSCORE REV", c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z", Start: 4, Stop: 2,
			ByScore: true, Rev: true}).Val(), []string{"d", "c", "b"})
		// LIMIT is the pagination Go services use for leaderboards.
		deq(t, "ZRANGE BYSCORE REV LIMIT", c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z", Start: "+inf", Stop: "-inf",
			ByScore: true, Rev: true, Offset: 1, Count: 2}).Val(), []string{"d", "c"})
		deq(t, "ZRANGE BYSCORE LIMIT past the end", c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "z", Start: "-inf",
			Stop: "+inf", ByScore: true, Offset: 10, Count: 2}).Val(), []string{})
		deq(t, "ZRANGE BYLEX", c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: "lex", Start: "-", Stop: "+",
			ByLex: true}).Val(), []string{})

		// Scores: pairs in RESP3, a flat list in RESP2, the same []redis.Z from go-redis.
		deq(t, "ZRANGE WITHSCORES", c.ZRangeWithScores(ctx, "z", 0, 2).Val(), []redis.Z{
			{Score: 1, Member: "a"}, {Score: 2.5, Member: "b"}, {Score: 3, Member: "c"}})
		deq(t, "ZRANGE BYSCORE REV WITHSCORES", c.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: "z",
			Start: "+inf", Stop: 5, ByScore: true, Rev: true}).Val(), []redis.Z{{Score: 5.5, Member: "e"}})

		eq(t, "ZINCRBY", c.ZIncrBy(ctx, "z", 0.25, "a").Val(), 1.25)
		eq(t, "ZINCRBY on a new member", c.ZIncrBy(ctx, "z", -7, "neg").Val(), -7.0)
		eq(t, "ZSCORE", c.ZScore(ctx, "z", "e").Val(), 5.5)
		isNil(t, "ZSCORE of a missing member", c.ZScore(ctx, "z", "nope").Err())
		eq(t, "ZRANK", c.ZRank(ctx, "z", "a").Val(), int64(1))
		eq(t, "ZREVRANK", c.ZRevRank(ctx, "z", "a").Val(), int64(4))
		isNil(t, "ZRANK of a missing member", c.ZRank(ctx, "z", "nope").Err())
		eq(t, "ZCOUNT", c.ZCount(ctx, "z", "1", "(4").Val(), int64(3))
		eq(t, "ZCARD", c.ZCard(ctx, "z").Val(), int64(6))
		deq(t, "ZMSCORE", c.ZMScore(ctx, "z", "b", "d").Val(), []float64{2.5, 4})
		deq(t, "ZPOPMIN", c.ZPopMin(ctx, "z", 2).Val(), []redis.Z{{Score: -7, Member: "neg"}, {Score: 1.25, Member: "a"}})
		deq(t, "ZPOPMAX", c.ZPopMax(ctx, "z").Val(), []redis.Z{{Score: 5.5, Member: "e"}})
		eq(t, "ZREM", c.ZRem(ctx, "z", "b", "nope").Val(), int64(1))
		eq(t, "ZRANGESTORE", c.ZRangeStore(ctx, "copy", redis.ZRangeArgs{Key: "z", Start: 0, Stop: -1}).Val(), int64(2))
		deq(t, "stored range", c.ZRangeWithScores(ctx, "copy", 0, -1).Val(), []redis.Z{
			{Score: 3, Member: "c"}, {Score: 4, Member: "d"}})
	})
}

func TestZScanIterator(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		want := map[string]string{}
		members := []redis.Z{}
		for i := range 400 {
			m := fmt.Sprintf("m%03d", i)
			members = append(members, redis.Z{Score: float64(i) / 2, Member: m})
			want[m] = strconv.FormatFloat(float64(i)/2, 'f', -1, 64)
		}
		eq(t, "ZADD 400", c.ZAdd(ctx, "big", members...).Val(), int64(400))
		// ZSCAN yields member, score, member, score ...; scores are strings in both protocols.
		got := map[string]string{}
		it := c.ZScan(ctx, "big", 0, "", 40).Iterator()
		for it.Next(ctx) {
			m := it.Val()
			if !it.Next(ctx) {
				t.Fatalf("ZSCAN iterator ended after member %q without its score", m)
			}
			got[m] = it.Val()
		}
		must(t, it.Err(), "ZSCAN iterator")
		deq(t, "ZSCAN over 400 members", got, want)
	})
}

// --- SCAN ------------------------------------------------------------------------------------

func TestScanIterator(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		pipe := c.Pipeline()
		for i := range 2000 {
			pipe.Set(ctx, fmt.Sprintf("user:%d", i), i, 0)
		}
		for i := range 150 {
			pipe.HSet(ctx, fmt.Sprintf("session:%d", i), "u", i)
		}
		_, err := pipe.Exec(ctx)
		must(t, err, "pipelined SETs")

		// Every key that exists throughout the scan comes back; a set absorbs SCAN's
		// permitted duplicates, and the count must still be exact.
		seen := map[string]bool{}
		it := c.Scan(ctx, 0, "user:*", 100).Iterator()
		for it.Next(ctx) {
			if !strings.HasPrefix(it.Val(), "user:") {
				t.Fatalf("SCAN MATCH user:* returned %q", it.Val())
			}
			seen[it.Val()] = true
		}
		must(t, it.Err(), "SCAN iterator")
		eq(t, "keys matching user:*", len(seen), 2000)
		for i := range 2000 {
			if !seen[fmt.Sprintf("user:%d", i)] {
				t.Fatalf("SCAN missed user:%d", i)
			}
		}

		// SCAN ... TYPE hash (Redis 6.0) sees only the hashes.
		hashes := map[string]bool{}
		it = c.ScanType(ctx, 0, "", 200, "hash").Iterator()
		for it.Next(ctx) {
			hashes[it.Val()] = true
		}
		must(t, it.Err(), "SCAN TYPE iterator")
		eq(t, "keys of type hash", len(hashes), 150)
		if !hashes["session:149"] {
			t.Fatal("SCAN TYPE hash missed session:149")
		}

		// A raw SCAN call: the cursor ends at 0, and nothing matches a foreign pattern.
		keys, cursor := []string{}, uint64(0)
		for {
			var page []string
			page, cursor, err = c.Scan(ctx, cursor, "nothing:*", 500).Result()
			must(t, err, "SCAN page")
			keys = append(keys, page...)
			if cursor == 0 {
				break
			}
		}
		deq(t, "keys matching nothing:*", keys, []string{})
	})
}
