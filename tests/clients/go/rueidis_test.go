// rueidis (github.com/redis/rueidis, pinned in go.mod), a RESP3-first client: its handshake
// (HELLO 3, CLIENT TRACKING ON OPTIN, CLIENT SETINFO), the command builder, DoMulti pipelines,
// auto-pipelining of concurrent calls onto shared connections, server-assisted client-side caching
// (DoCache/DoMultiCache, invalidated by CLIENT TRACKING pushes; OPTIN, OPTOUT and BCAST), Dedicated
// connections for WATCH/MULTI/EXEC, blocking commands on their own pool, pub/sub through Receive,
// Lua through NewLuaScript (EVALSHA, then EVAL after NOSCRIPT), and the rueidiscompat adapter.
//
// Every test runs twice, as the go-redis tests do: with rueidis's defaults (RESP3, the cache on)
// and with AlwaysRESP2 (which rueidis only allows with DisableCache: then DoCache goes to the
// server every time).
package goredis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
)

// rueidisModes are the two runs of every rueidis test.
var rueidisModes = []struct {
	name string
	resp int
	opt  rueidis.ClientOption
}{
	{"default-resp3", 3, rueidis.ClientOption{}},
	{"resp2", 2, rueidis.ClientOption{AlwaysRESP2: true, DisableCache: true}},
}

// rueidisClient connects a rueidis client to the test server with base's options, closed when
// the test ends.
func rueidisClient(t testing.TB, base rueidis.ClientOption, tweak ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt := base
	opt.InitAddress = []string{srv.addr}
	for _, f := range tweak {
		f(&opt)
	}
	c, err := rueidis.NewClient(opt)
	must(t, err, "rueidis.NewClient")
	t.Cleanup(c.Close)
	return c
}

// eachRueidisMode runs body once per mode on an empty keyspace, with a connected client.
func eachRueidisMode(t *testing.T, body func(t *testing.T, resp int, opt rueidis.ClientOption, c rueidis.Client)) {
	for _, m := range rueidisModes {
		t.Run(m.name, func(t *testing.T) {
			c := rueidisClient(t, m.opt)
			must(t, c.Do(t.Context(), c.B().Flushall().Build()).Error(), "FLUSHALL")
			body(t, m.resp, m.opt, c)
		})
	}
}

func rstr(t testing.TB, what string, r rueidis.RedisResult) string {
	t.Helper()
	v, err := r.ToString()
	must(t, err, what)
	return v
}

func rint(t testing.TB, what string, r rueidis.RedisResult) int64 {
	t.Helper()
	v, err := r.AsInt64()
	must(t, err, what)
	return v
}

func rstrs(t testing.TB, what string, r rueidis.RedisResult) []string {
	t.Helper()
	v, err := r.AsStrSlice()
	must(t, err, what)
	return v
}

// rnil fails unless the reply is a nil (rueidis reports it as an error, rueidis.Nil).
func rnil(t testing.TB, what string, r rueidis.RedisResult) {
	t.Helper()
	if err := r.Error(); !rueidis.IsRedisNil(err) {
		t.Fatalf("%s: got %v (error %v), want a nil reply", what, r, err)
	}
}

// rerr fails unless the reply is a server error with exactly this text.
func rerr(t testing.TB, what string, r rueidis.RedisResult, want string) {
	t.Helper()
	err := r.Error()
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		t.Fatalf("%s: got %v (error %v), want server error %q", what, r, err, want)
	}
	if re.Error() != want {
		t.Fatalf("%s: error %q, want %q", what, re.Error(), want)
	}
}

// commandCalls reads "calls" for one command from INFO commandstats (0 when never called).
func commandCalls(t testing.TB, c rueidis.Client, cmd string) int {
	t.Helper()
	info := rstr(t, "INFO commandstats", c.Do(context.Background(), c.B().Info().Section("commandstats").Build()))
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		must(t, err, "calls in "+line)
		return n
	}
	return 0
}

func TestRueidisHandshake(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, resp int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		info := rstr(t, "CLIENT INFO", c.Do(ctx, c.B().ClientInfo().Build()))
		fields := map[string]string{}
		for _, kv := range strings.Fields(info) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		eq(t, "resp in CLIENT INFO", fields["resp"], strconv.Itoa(resp))
		if !reference { // Debian's Redis 7.0 predates CLIENT SETINFO (7.2)
			eq(t, "lib-name in CLIENT INFO", fields["lib-name"], "rueidis")
			if !strings.HasPrefix(fields["lib-ver"], "1.0.") {
				t.Fatalf("lib-ver in CLIENT INFO: %q", fields["lib-ver"])
			}
		}
		// The default handshake turns tracking on in OPTIN mode; RESP2 (no cache) leaves it off.
		ti, err := c.Do(ctx, c.B().ClientTrackinginfo().Build()).AsMap()
		must(t, err, "CLIENT TRACKINGINFO")
		flagsMsg, redirectMsg := ti["flags"], ti["redirect"]
		flags, err := flagsMsg.AsStrSlice()
		must(t, err, "CLIENT TRACKINGINFO flags")
		if resp == 3 {
			deq(t, "tracking flags", sorted(flags), []string{"on", "optin"})
			redirect, err := redirectMsg.AsInt64()
			must(t, err, "CLIENT TRACKINGINFO redirect")
			eq(t, "tracking redirect (0: invalidations as pushes on the same connection)", redirect, int64(0))
		} else {
			deq(t, "tracking flags", flags, []string{"off"})
		}
		// Simple replies: status, bulk, double (RESP3) or bulk (RESP2), integer as bool.
		eq(t, "PING", rstr(t, "PING", c.Do(ctx, c.B().Ping().Build())), "PONG")
		eq(t, "ECHO", rstr(t, "ECHO", c.Do(ctx, c.B().Echo().Message("hi").Build())), "hi")
		must(t, c.Do(ctx, c.B().Set().Key("pi").Value("3.5").Build()).Error(), "SET pi")
		f, err := c.Do(ctx, c.B().Incrbyfloat().Key("pi").Increment(0.25).Build()).AsFloat64()
		must(t, err, "INCRBYFLOAT")
		eq(t, "INCRBYFLOAT", f, 3.75)
		ok, err := c.Do(ctx, c.B().Exists().Key("pi").Build()).AsBool()
		must(t, err, "EXISTS")
		eq(t, "EXISTS", ok, true)
	})
}

// TestRueidisHandshakeOptions: a client name rides on HELLO (SETNAME), CLIENT NO-TOUCH and
// CLIENT NO-EVICT (Redis 7.2) follow it.
func TestRueidisHandshakeOptions(t *testing.T) {
	for _, m := range rueidisModes {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			c := rueidisClient(t, m.opt, func(o *rueidis.ClientOption) {
				o.ClientName = "worker-7"
				o.ClientNoEvict = true
				o.ClientNoTouch = !reference // Debian's Redis 7.0 predates CLIENT NO-TOUCH (7.2)
			})
			info := rstr(t, "CLIENT INFO", c.Do(ctx, c.B().ClientInfo().Build()))
			fields := map[string]string{}
			for _, kv := range strings.Fields(info) {
				k, v, _ := strings.Cut(kv, "=")
				fields[k] = v
			}
			eq(t, "name in CLIENT INFO", fields["name"], "worker-7")
			eq(t, "CLIENT GETNAME", rstr(t, "CLIENT GETNAME", c.Do(ctx, c.B().ClientGetname().Build())), "worker-7")
			eq(t, "no-evict flag (e) in CLIENT INFO", strings.Contains(fields["flags"], "e"), true)
			if !reference {
				eq(t, "no-touch flag (T) in CLIENT INFO", strings.Contains(fields["flags"], "T"), true)
			}
		})
	}
}

func TestRueidisCommandBuilder(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		b := c.B
		// Strings: SET options, GET of a missing key, INCRBY, MGET, SET GET.
		eq(t, "SET NX", rstr(t, "SET NX", c.Do(ctx, b().Set().Key("s").Value("v1").Nx().ExSeconds(100).Build())), "OK")
		rnil(t, "SET NX on an existing key", c.Do(ctx, b().Set().Key("s").Value("v2").Nx().Build()))
		eq(t, "SET GET returns the old value", rstr(t, "SET GET", c.Do(ctx, b().Set().Key("s").Value("v3").Get().Build())), "v1")
		eq(t, "GET", rstr(t, "GET", c.Do(ctx, b().Get().Key("s").Build())), "v3")
		eq(t, "TTL after SET GET without KEEPTTL", rint(t, "TTL", c.Do(ctx, b().Ttl().Key("s").Build())), int64(-1))
		rnil(t, "GET of a missing key", c.Do(ctx, b().Get().Key("missing").Build()))
		eq(t, "INCRBY", rint(t, "INCRBY", c.Do(ctx, b().Incrby().Key("n").Increment(41).Build())), int64(41))
		eq(t, "INCR", rint(t, "INCR", c.Do(ctx, b().Incr().Key("n").Build())), int64(42))
		mget, err := c.Do(ctx, b().Mget().Key("s", "missing", "n").Build()).ToArray()
		must(t, err, "MGET")
		eq(t, "MGET length", len(mget), 3)
		eq(t, "MGET [0]", rstr(t, "MGET [0]", rueidisResult(mget[0])), "v3")
		eq(t, "MGET [1] is nil", mget[1].IsNil(), true)
		eq(t, "MGET [2]", rstr(t, "MGET [2]", rueidisResult(mget[2])), "42")
		// rueidis drops the generic "ERR " prefix from error texts; other codes stay.
		rerr(t, "INCR of a non-number", c.Do(ctx, b().Incr().Key("s").Build()), "value is not an integer or out of range")

		// Hashes.
		eq(t, "HSET", rint(t, "HSET", c.Do(ctx, b().Hset().Key("h").FieldValue().FieldValue("a", "1").FieldValue("b", "2").Build())), int64(2))
		eq(t, "HINCRBY", rint(t, "HINCRBY", c.Do(ctx, b().Hincrby().Key("h").Field("a").Increment(9).Build())), int64(10))
		hall, err := c.Do(ctx, b().Hgetall().Key("h").Build()).AsStrMap()
		must(t, err, "HGETALL")
		deq(t, "HGETALL", hall, map[string]string{"a": "10", "b": "2"})
		rnil(t, "HGET of a missing field", c.Do(ctx, b().Hget().Key("h").Field("zz").Build()))
		rerr(t, "LPUSH on a hash", c.Do(ctx, b().Lpush().Key("h").Element("x").Build()),
			"WRONGTYPE Operation against a key holding the wrong kind of value")

		// Lists.
		eq(t, "RPUSH", rint(t, "RPUSH", c.Do(ctx, b().Rpush().Key("l").Element("a", "b", "c", "d").Build())), int64(4))
		deq(t, "LRANGE", rstrs(t, "LRANGE", c.Do(ctx, b().Lrange().Key("l").Start(0).Stop(-1).Build())), []string{"a", "b", "c", "d"})
		deq(t, "LPOP with a count", rstrs(t, "LPOP", c.Do(ctx, b().Lpop().Key("l").Count(2).Build())), []string{"a", "b"})
		eq(t, "LMOVE", rstr(t, "LMOVE", c.Do(ctx, b().Lmove().Source("l").Destination("l2").Right().Left().Build())), "d")
		eq(t, "LLEN", rint(t, "LLEN", c.Do(ctx, b().Llen().Key("l").Build())), int64(1))

		// Sets.
		eq(t, "SADD", rint(t, "SADD", c.Do(ctx, b().Sadd().Key("s1").Member("a", "b", "c").Build())), int64(3))
		eq(t, "SADD s2", rint(t, "SADD", c.Do(ctx, b().Sadd().Key("s2").Member("b", "c", "d").Build())), int64(3))
		deq(t, "SMEMBERS", sorted(rstrs(t, "SMEMBERS", c.Do(ctx, b().Smembers().Key("s1").Build()))), []string{"a", "b", "c"})
		deq(t, "SINTER", sorted(rstrs(t, "SINTER", c.Do(ctx, b().Sinter().Key("s1", "s2").Build()))), []string{"b", "c"})
		isMember, err := c.Do(ctx, b().Sismember().Key("s1").Member("a").Build()).AsBool()
		must(t, err, "SISMEMBER")
		eq(t, "SISMEMBER", isMember, true)
		mis, err := c.Do(ctx, b().Smismember().Key("s1").Member("a", "d").Build()).AsIntSlice()
		must(t, err, "SMISMEMBER")
		deq(t, "SMISMEMBER", mis, []int64{1, 0})

		// Sorted sets: scores come back as float64 in both protocols.
		eq(t, "ZADD", rint(t, "ZADD", c.Do(ctx, b().Zadd().Key("z").ScoreMember().ScoreMember(1, "a").ScoreMember(2.5, "b").ScoreMember(3, "c").Build())), int64(3))
		score, err := c.Do(ctx, b().Zincrby().Key("z").Increment(5).Member("a").Build()).AsFloat64()
		must(t, err, "ZINCRBY")
		eq(t, "ZINCRBY", score, 6.0)
		zs, err := c.Do(ctx, b().Zrange().Key("z").Min("0").Max("-1").Withscores().Build()).AsZScores()
		must(t, err, "ZRANGE WITHSCORES")
		deq(t, "ZRANGE WITHSCORES", zs, []rueidis.ZScore{{Member: "b", Score: 2.5}, {Member: "c", Score: 3}, {Member: "a", Score: 6}})
		deq(t, "ZRANGE BYSCORE", rstrs(t, "ZRANGE BYSCORE", c.Do(ctx, b().Zrange().Key("z").Min("(2.5").Max("+inf").Byscore().Build())), []string{"c", "a"})
		eq(t, "ZRANK", rint(t, "ZRANK", c.Do(ctx, b().Zrank().Key("z").Member("a").Build())), int64(2))
		zsc, err := c.Do(ctx, b().Zscore().Key("z").Member("b").Build()).AsFloat64()
		must(t, err, "ZSCORE")
		eq(t, "ZSCORE", zsc, 2.5)
		rnil(t, "ZSCORE of a missing member", c.Do(ctx, b().Zscore().Key("z").Member("nope").Build()))
		popped, err := c.Do(ctx, b().Zpopmin().Key("z").Build()).AsZScores()
		must(t, err, "ZPOPMIN")
		deq(t, "ZPOPMIN", popped, []rueidis.ZScore{{Member: "b", Score: 2.5}})

		// Streams with a consumer group.
		id1 := rstr(t, "XADD", c.Do(ctx, b().Xadd().Key("st").Id("*").FieldValue().FieldValue("f", "1").FieldValue("g", "x").Build()))
		id2 := rstr(t, "XADD", c.Do(ctx, b().Xadd().Key("st").Id("*").FieldValue().FieldValue("f", "2").Build()))
		xr, err := c.Do(ctx, b().Xrange().Key("st").Start("-").End("+").Build()).AsXRange()
		must(t, err, "XRANGE")
		deq(t, "XRANGE", xr, []rueidis.XRangeEntry{
			{ID: id1, FieldValues: map[string]string{"f": "1", "g": "x"}},
			{ID: id2, FieldValues: map[string]string{"f": "2"}},
		})
		eq(t, "XGROUP CREATE", rstr(t, "XGROUP CREATE", c.Do(ctx, b().XgroupCreate().Key("st").Group("g").Id("0").Build())), "OK")
		rg, err := c.Do(ctx, b().Xreadgroup().Group("g", "c1").Count(10).Streams().Key("st").Id(">").Build()).AsXRead()
		must(t, err, "XREADGROUP")
		eq(t, "XREADGROUP entries", len(rg["st"]), 2)
		eq(t, "XREADGROUP first id", rg["st"][0].ID, id1)
		eq(t, "XACK", rint(t, "XACK", c.Do(ctx, b().Xack().Key("st").Group("g").Id(id1).Build())), int64(1))
		pending, err := c.Do(ctx, b().Xpending().Key("st").Group("g").Build()).ToArray()
		must(t, err, "XPENDING")
		eq(t, "XPENDING count", rint(t, "XPENDING count", rueidisResult(pending[0])), int64(1))
		rerr(t, "XGROUP CREATE twice", c.Do(ctx, b().XgroupCreate().Key("st").Group("g").Id("0").Build()),
			"BUSYGROUP Consumer Group name already exists")

		// A command the builder cannot express goes through Arbitrary.
		eq(t, "Arbitrary OBJECT ENCODING", rstr(t, "OBJECT ENCODING", c.Do(ctx, b().Arbitrary("OBJECT", "ENCODING").Keys("n").Build())), "int")
	})
}

// rueidisResult wraps one element of an array reply back into a RedisResult.
func rueidisResult(m rueidis.RedisMessage) rueidis.RedisResult {
	return rueidis.NewResult(m, nil)
}

func TestRueidisDoMulti(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		b := c.B
		must(t, c.Do(ctx, b().Set().Key("word").Value("abc").Build()).Error(), "SET word")
		res := c.DoMulti(ctx,
			b().Set().Key("k").Value("v").Build(),
			b().Incr().Key("n").Build(),
			b().Incr().Key("word").Build(), // fails alone: the rest still runs
			b().Get().Key("k").Build(),
			b().Get().Key("nope").Build(),
			b().Hset().Key("h").FieldValue().FieldValue("a", "1").Build(),
			b().Hgetall().Key("h").Build(),
		)
		eq(t, "replies", len(res), 7)
		eq(t, "SET", rstr(t, "SET", res[0]), "OK")
		eq(t, "INCR", rint(t, "INCR", res[1]), int64(1))
		rerr(t, "failing INCR", res[2], "value is not an integer or out of range")
		eq(t, "GET", rstr(t, "GET", res[3]), "v")
		rnil(t, "GET missing", res[4])
		eq(t, "HSET", rint(t, "HSET", res[5]), int64(1))
		m, err := res[6].AsStrMap()
		must(t, err, "HGETALL")
		deq(t, "HGETALL", m, map[string]string{"a": "1"})

		// A long pipeline: 3000 INCRBYs, each reply matched to its command.
		cmds := make(rueidis.Commands, 0, 3000)
		for i := range 3000 {
			cmds = append(cmds, b().Incrby().Key(fmt.Sprintf("c%d", i%10)).Increment(int64(i)).Build())
		}
		sums := make([]int64, 10)
		for i, r := range c.DoMulti(ctx, cmds...) {
			sums[i%10] += int64(i)
			if got := rint(t, "INCRBY", r); got != sums[i%10] {
				t.Fatalf("reply %d: %d, want %d", i, got, sums[i%10])
			}
		}
		eq(t, "c9 after the pipeline", rstr(t, "GET c9", c.Do(ctx, b().Get().Key("c9").Build())), fmt.Sprint(sums[9]))

		// MULTI/EXEC inside one DoMulti (on a shared connection: nothing else is interleaved).
		tx := c.DoMulti(ctx,
			b().Multi().Build(),
			b().Incr().Key("tx").Build(),
			b().Rpush().Key("txl").Element("x").Build(),
			b().Exec().Build(),
		)
		eq(t, "MULTI", rstr(t, "MULTI", tx[0]), "OK")
		eq(t, "queued INCR", rstr(t, "queued", tx[1]), "QUEUED")
		exec, err := tx[3].ToArray()
		must(t, err, "EXEC")
		eq(t, "INCR in EXEC", rint(t, "EXEC[0]", rueidisResult(exec[0])), int64(1))
		eq(t, "RPUSH in EXEC", rint(t, "EXEC[1]", rueidisResult(exec[1])), int64(1))
	})
}

func TestRueidisAutoPipelining(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		const goroutines, perG = 50, 200
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				key := fmt.Sprintf("g%d", g)
				for i := 1; i <= perG; i++ {
					// Each goroutine's own counter sees its INCRs in order, interleaved with the
					// other goroutines' commands on the same connections.
					n, err := c.Do(ctx, c.B().Incr().Key(key).Build()).AsInt64()
					if err != nil || n != int64(i) {
						errs <- fmt.Errorf("goroutine %d: INCR %d = %d, %v", g, i, n, err)
						return
					}
					if err := c.Do(ctx, c.B().Incr().Key("shared").Build()).Error(); err != nil {
						errs <- err
						return
					}
					val := fmt.Sprintf("%d:%d", g, i)
					if err := c.Do(ctx, c.B().Set().Key(key+":last").Value(val).Build()).Error(); err != nil {
						errs <- err
						return
					}
					got, err := c.Do(ctx, c.B().Get().Key(key+":last").Build()).ToString()
					if err != nil || got != val {
						errs <- fmt.Errorf("goroutine %d: GET after SET %q = %q, %v", g, val, got, err)
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
		eq(t, "shared counter", rstr(t, "GET shared", c.Do(ctx, c.B().Get().Key("shared").Build())), strconv.Itoa(goroutines*perG))
		for g := range goroutines {
			eq(t, "per-goroutine counter", rstr(t, "GET", c.Do(ctx, c.B().Get().Key(fmt.Sprintf("g%d", g)).Build())), strconv.Itoa(perG))
		}
	})
}

// cachedValue reads one DoCache result as text, "<nil>" for a nil reply.
func cachedValue(t testing.TB, what string, r rueidis.RedisResult) string {
	t.Helper()
	if rueidis.IsRedisNil(r.Error()) {
		return "<nil>"
	}
	if re, ok := rueidis.IsRedisErr(r.Error()); ok {
		return "<error: " + re.Error() + ">"
	}
	if m, err := r.ToMessage(); err == nil && (m.IsArray() || m.IsMap()) {
		// Arrays (SMEMBERS, MGET) as "a,b" text; a RESP3 map as sorted "k=v,k=v".
		if m.IsMap() {
			return hashValue(t, what, r)
		}
		vals, err := m.ToArray()
		must(t, err, what)
		var out []string
		for _, v := range vals {
			if v.IsNil() {
				out = append(out, "<nil>")
				continue
			}
			s, err := v.ToString()
			must(t, err, what)
			out = append(out, s)
		}
		return strings.Join(out, ",")
	}
	return rstr(t, what, r)
}

// hashValue reads an HGETALL reply (a map in RESP3, a flat array in RESP2) as sorted "k=v,k=v".
func hashValue(t testing.TB, what string, r rueidis.RedisResult) string {
	t.Helper()
	mm, err := r.AsStrMap()
	must(t, err, what)
	var kv []string
	for k, v := range mm {
		kv = append(kv, k+"="+v)
	}
	return strings.Join(sorted(kv), ",")
}

// awaitFresh polls read until it returns want, after another client changed the data. Until the
// invalidation arrives, a read may be served stale from the client-side cache, but only as a
// cache hit; the first read that returns want must come from the server, not the cache.
func awaitFresh(t testing.TB, what string, want string, read func() rueidis.RedisResult) {
	t.Helper()
	awaitFreshWith(t, what, want, cachedValue, read)
}

func awaitFreshWith(t testing.TB, what string, want string, decode func(testing.TB, string, rueidis.RedisResult) string,
	read func() rueidis.RedisResult) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := read()
		got := decode(t, what, r)
		if got == want {
			if r.IsCacheHit() {
				t.Fatalf("%s: the first read of the new value %q was a cache hit", what, want)
			}
			return
		}
		if !r.IsCacheHit() {
			t.Fatalf("%s: the server answered %q, want %q", what, got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %q from the client-side cache after 5 s (no invalidation), want %q", what, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// expectRead checks one cached read's value and whether the client-side cache served it.
func expectRead(t testing.TB, what string, r rueidis.RedisResult, want string, hit bool) {
	t.Helper()
	eq(t, what, cachedValue(t, what, r), want)
	eq(t, what+": IsCacheHit", r.IsCacheHit(), hit)
}

func TestRueidisClientSideCache(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, resp int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		cached := resp == 3 // RESP2 runs with DisableCache: every DoCache goes to the server
		writer := rueidisClient(t, rueidis.ClientOption{DisableCache: true})
		set := func(k, v string) {
			t.Helper()
			must(t, writer.Do(ctx, writer.B().Set().Key(k).Value(v).Build()).Error(), "SET by another client")
		}
		get := func(k string) func() rueidis.RedisResult {
			return func() rueidis.RedisResult { return c.DoCache(ctx, c.B().Get().Key(k).Cache(), time.Minute) }
		}

		// A first read goes to the server, the next one is served locally with the entry's TTL.
		set("k", "v1")
		expectRead(t, "first cached GET", get("k")(), "v1", false)
		r := get("k")()
		expectRead(t, "second cached GET", r, "v1", cached)
		if cached {
			within(t, "CachePTTL of an entry cached for a minute", time.Duration(r.CachePTTL())*time.Millisecond, 50*time.Second, time.Minute)
		}
		// Another connection's write invalidates the entry (CLIENT TRACKING push).
		set("k", "v2")
		awaitFresh(t, "GET k after another client's SET", "v2", get("k"))
		expectRead(t, "GET k cached again", get("k")(), "v2", cached)
		// So does this client's own write, and a DEL, an INCR, an APPEND.
		must(t, c.Do(ctx, c.B().Set().Key("k").Value("v3").Build()).Error(), "SET by the caching client")
		awaitFresh(t, "GET k after the client's own SET", "v3", get("k"))
		must(t, writer.Do(ctx, writer.B().Append().Key("k").Value("+").Build()).Error(), "APPEND")
		awaitFresh(t, "GET k after APPEND", "v3+", get("k"))
		must(t, writer.Do(ctx, writer.B().Del().Key("k").Build()).Error(), "DEL")
		awaitFresh(t, "GET k after DEL", "<nil>", get("k"))
		expectRead(t, "a nil reply cached", get("k")(), "<nil>", cached)
		set("k", "back")
		awaitFresh(t, "GET k after SET of a cached nil", "back", get("k"))

		// Other types: HGETALL, SMEMBERS and ZRANGE through DoMultiCache, one round trip for the
		// misses; a write to one key invalidates only that entry.
		must(t, writer.Do(ctx, writer.B().Hset().Key("h").FieldValue().FieldValue("a", "1").Build()).Error(), "HSET")
		must(t, writer.Do(ctx, writer.B().Sadd().Key("s").Member("x", "y").Build()).Error(), "SADD")
		must(t, writer.Do(ctx, writer.B().Zadd().Key("z").ScoreMember().ScoreMember(1, "m1").ScoreMember(2, "m2").Build()).Error(), "ZADD")
		multi := func() []rueidis.RedisResult {
			return c.DoMultiCache(ctx,
				rueidis.CT(c.B().Get().Key("k").Cache(), time.Minute),
				rueidis.CT(c.B().Hgetall().Key("h").Cache(), time.Minute),
				rueidis.CT(c.B().Smembers().Key("s").Cache(), time.Minute),
				rueidis.CT(c.B().Zrange().Key("z").Min("0").Max("-1").Cache(), time.Minute),
			)
		}
		wantMulti := []string{"back", "a=1", "x,y", "m1,m2"}
		for i, r := range multi() {
			got := cachedValue(t, "DoMultiCache", r)
			if i == 1 {
				got = hashValue(t, "DoMultiCache HGETALL", r)
			}
			if i == 2 {
				got = strings.Join(sorted(strings.Split(got, ",")), ",")
			}
			eq(t, fmt.Sprintf("DoMultiCache [%d]", i), got, wantMulti[i])
			if i > 0 { // GET k was cached above already
				eq(t, fmt.Sprintf("DoMultiCache [%d] first read: IsCacheHit", i), r.IsCacheHit(), false)
			}
		}
		for i, r := range multi() {
			eq(t, fmt.Sprintf("DoMultiCache [%d] again: IsCacheHit", i), r.IsCacheHit(), cached)
		}
		must(t, writer.Do(ctx, writer.B().Hset().Key("h").FieldValue().FieldValue("b", "2").Build()).Error(), "HSET b")
		awaitFreshWith(t, "HGETALL after HSET", "a=1,b=2", hashValue, func() rueidis.RedisResult { return multi()[1] })
		for i, r := range multi() {
			eq(t, fmt.Sprintf("DoMultiCache [%d] after the HSET refetch: IsCacheHit", i), r.IsCacheHit(), cached)
		}
		must(t, writer.Do(ctx, writer.B().Zadd().Key("z").ScoreMember().ScoreMember(0, "m0").Build()).Error(), "ZADD m0")
		awaitFresh(t, "ZRANGE after ZADD", "m0,m1,m2", func() rueidis.RedisResult { return multi()[3] })

		// MGET is cached per key: a write to one of its keys refetches that key.
		set("m1", "a")
		set("m2", "b")
		mget := func() rueidis.RedisResult {
			return c.DoCache(ctx, c.B().Mget().Key("m1", "m2", "m3").Cache(), time.Minute)
		}
		eq(t, "cached MGET", cachedValue(t, "MGET", mget()), "a,b,<nil>")
		set("m3", "c")
		waitFor(t, 5*time.Second, "cached MGET to see m3", func() bool {
			return cachedValue(t, "MGET", mget()) == "a,b,c"
		})

		// Writes from a Lua script, from MULTI/EXEC and by RENAME (both keys) invalidate too.
		expectRead(t, "GET k before the script", get("k")(), "back", cached)
		must(t, writer.Do(ctx, writer.B().Eval().Script("return redis.call('SET', KEYS[1], ARGV[1])").Numkeys(1).Key("k").Arg("lua").Build()).Error(), "EVAL SET")
		awaitFresh(t, "GET k after a script's SET", "lua", get("k"))
		tx := writer.DoMulti(ctx, writer.B().Multi().Build(), writer.B().Set().Key("k").Value("tx").Build(), writer.B().Exec().Build())
		must(t, tx[2].Error(), "MULTI SET EXEC")
		awaitFresh(t, "GET k after MULTI/EXEC", "tx", get("k"))
		set("src", "moved")
		expectRead(t, "GET src", get("src")(), "moved", false)
		expectRead(t, "GET dst (missing)", get("dst")(), "<nil>", false)
		expectRead(t, "GET dst cached", get("dst")(), "<nil>", cached)
		must(t, writer.Do(ctx, writer.B().Rename().Key("src").Newkey("dst").Build()).Error(), "RENAME")
		awaitFresh(t, "GET src after RENAME", "<nil>", get("src"))
		awaitFresh(t, "GET dst after RENAME", "moved", get("dst"))

		// A read that fails is cached as its error, until the key changes.
		wrongType := "WRONGTYPE Operation against a key holding the wrong kind of value"
		must(t, writer.Do(ctx, writer.B().Rpush().Key("wrong").Element("x").Build()).Error(), "RPUSH")
		for i := range 2 {
			r := get("wrong")()
			rerr(t, "cached GET of a list", r, wrongType)
			eq(t, "cached GET of a list: IsCacheHit", r.IsCacheHit(), cached && i == 1)
		}
		set("wrong", "now a string")
		awaitFresh(t, "GET of the list replaced by a string", "now a string", get("wrong"))

		// FLUSHALL invalidates every entry (a null invalidation message).
		expectRead(t, "GET k cached", get("k")(), "tx", cached)
		must(t, writer.Do(ctx, writer.B().Flushall().Build()).Error(), "FLUSHALL by another client")
		awaitFresh(t, "GET k after FLUSHALL", "<nil>", get("k"))
		awaitFreshWith(t, "HGETALL after FLUSHALL", "", hashValue, func() rueidis.RedisResult { return multi()[1] })

		// TTLs of entries: the server's TTL when shorter than the one asked for.
		must(t, writer.Do(ctx, writer.B().Set().Key("ttl").Value("x").ExSeconds(100).Build()).Error(), "SET EX 100")
		c.DoCache(ctx, c.B().Get().Key("ttl").Cache(), time.Hour)
		r = c.DoCache(ctx, c.B().Get().Key("ttl").Cache(), time.Hour)
		expectRead(t, "GET of a key with a TTL", r, "x", cached)
		if cached {
			within(t, "CachePTTL bounded by the key's TTL", time.Duration(r.CachePTTL())*time.Millisecond, 90*time.Second, 100*time.Second)
			eq(t, "CacheTTL", r.CacheTTL() <= 100 && r.CacheTTL() > 90, true)
		}
		// A key that expires on the server is read again (nil) once the entry's TTL is over.
		start := time.Now()
		must(t, writer.Do(ctx, writer.B().Set().Key("short").Value("x").PxMilliseconds(800).Build()).Error(), "SET PX 800")
		expectRead(t, "GET of a key with 800 ms to live", get("short")(), "x", false)
		// (rueidis times the entry from PTTL read in the same MULTI; at the boundary a read may
		// reach the server a moment before the key expires there, and still get "x".)
		waitFor(t, 5*time.Second, "GET of an expired key to read nil", func() bool {
			return cachedValue(t, "GET short", get("short")()) == "<nil>"
		})
		atLeast(t, "time until an expired key read nil", time.Since(start), 790*time.Millisecond)
		// An entry cached for 300 ms is fetched again after that.
		set("brief", "x")
		start = time.Now()
		expectRead(t, "GET cached for 300 ms", c.DoCache(ctx, c.B().Get().Key("brief").Cache(), 300*time.Millisecond), "x", false)
		if cached {
			waitFor(t, 5*time.Second, "the 300 ms entry to expire", func() bool {
				return !c.DoCache(ctx, c.B().Get().Key("brief").Cache(), 300*time.Millisecond).IsCacheHit()
			})
			atLeast(t, "life of a 300 ms cache entry", time.Since(start), 290*time.Millisecond)
		}
	})
}

// TestRueidisCacheConsistency: readers going through the client-side cache while another client
// keeps writing never see a value go backwards, and all see the last write once it is done.
func TestRueidisCacheConsistency(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, opt rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		writer := rueidisClient(t, rueidis.ClientOption{DisableCache: true})
		const writes, readers = 300, 8
		keys := []string{"ctr:a", "ctr:b", "ctr:c"}
		for _, k := range keys {
			must(t, writer.Do(ctx, writer.B().Set().Key(k).Value("0").Build()).Error(), "SET")
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, readers)
		for r := range readers {
			wg.Go(func() {
				last := map[string]int64{}
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					k := keys[(r+i)%len(keys)]
					n, err := c.DoCache(ctx, c.B().Get().Key(k).Cache(), time.Minute).AsInt64()
					if err != nil {
						errs <- fmt.Errorf("reader %d: %v", r, err)
						return
					}
					if n < last[k] {
						errs <- fmt.Errorf("reader %d: %s went back from %d to %d", r, k, last[k], n)
						return
					}
					last[k] = n
				}
			})
		}
		for i := 1; i <= writes; i++ {
			for _, k := range keys {
				must(t, writer.Do(ctx, writer.B().Set().Key(k).Value(strconv.Itoa(i)).Build()).Error(), "SET")
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, k := range keys {
			waitFor(t, 5*time.Second, "cached "+k+" to reach the last write", func() bool {
				return cachedValue(t, "GET "+k, c.DoCache(ctx, c.B().Get().Key(k).Cache(), time.Minute)) == strconv.Itoa(writes)
			})
		}
	})
}

// TestRueidisCacheInvalidations watches the invalidation messages themselves through
// OnInvalidations, in the default OPTIN mode, in OPTOUT mode and in BCAST mode with a prefix
// (ClientTrackingOptions).
func TestRueidisCacheInvalidations(t *testing.T) {
	for _, mode := range []struct {
		name     string
		tracking []string
	}{{"optin", nil}, {"optout", []string{"OPTOUT"}}, {"bcast", []string{"PREFIX", "bc:", "BCAST"}}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx := t.Context()
			inval := make(chan []string, 100)
			c := rueidisClient(t, rueidis.ClientOption{}, func(o *rueidis.ClientOption) {
				o.ClientTrackingOptions = mode.tracking
				// One connection (rueidis multiplexes over several by default): in BCAST mode each
				// of them would receive every announcement.
				o.PipelineMultiplex = -1
				o.OnInvalidations = func(msgs []rueidis.RedisMessage) {
					var keys []string
					for _, m := range msgs {
						s, _ := m.ToString()
						keys = append(keys, s)
					}
					if msgs == nil {
						keys = []string{"<all>"}
					}
					inval <- keys
				}
			})
			writer := rueidisClient(t, rueidis.ClientOption{DisableCache: true})
			must(t, writer.Do(ctx, writer.B().Flushall().Build()).Error(), "FLUSHALL")
			// Invalidations that FLUSHALL may have sent to c are not this test's.
			must(t, c.Do(ctx, c.B().Ping().Build()).Error(), "PING")
			drain := func() {
				for {
					select {
					case <-inval:
					default:
						return
					}
				}
			}
			drain()
			// nextInval returns the keys of the next invalidation message. The server may batch
			// several keys into one message (BCAST does, per event-loop iteration), so pending
			// holds the rest of a message for the next call: each call returns one key.
			var pending []string
			nextKey := func(what string) string {
				t.Helper()
				for len(pending) == 0 {
					select {
					case pending = <-inval:
					case <-time.After(5 * time.Second):
						t.Fatalf("no invalidation within 5 s: %s", what)
					}
				}
				k := pending[0]
				pending = pending[1:]
				return k
			}
			nextInval := func(what string) []string { t.Helper(); return []string{nextKey(what)} }
			ti, err := c.Do(ctx, c.B().ClientTrackinginfo().Build()).AsMap()
			must(t, err, "CLIENT TRACKINGINFO")
			flagsMsg, prefixesMsg := ti["flags"], ti["prefixes"]
			flags, err := flagsMsg.AsStrSlice()
			must(t, err, "flags")
			prefixes, err := prefixesMsg.AsStrSlice()
			must(t, err, "prefixes")
			key := "bc:k"
			bcast := mode.name == "bcast"
			if bcast {
				deq(t, "tracking flags", sorted(flags), []string{"bcast", "on"})
				deq(t, "tracking prefixes", prefixes, []string{"bc:"})
			} else {
				deq(t, "tracking flags", sorted(flags), []string{"on", mode.name})
				deq(t, "tracking prefixes", prefixes, []string{})
			}
			must(t, writer.Do(ctx, writer.B().Set().Key(key).Value("1").Build()).Error(), "SET")
			if bcast {
				// BCAST: every write under the prefix is announced, read or not.
				deq(t, "invalidation for a key never read (BCAST)", nextInval("BCAST write"), []string{key})
			}
			expectRead(t, "cached GET", c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute), "1", false)
			expectRead(t, "cached GET again", c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute), "1", true)
			// OPTIN: a plain GET (no CLIENT CACHING YES before it) is not tracked; OPTOUT: it is,
			// even of a missing key. Writes to an untracked key (outside the prefix, or never
			// read) send nothing, so the next invalidation names the cached key.
			rnil(t, "plain GET", c.Do(ctx, c.B().Get().Key("bc:plain").Build()))
			must(t, writer.Do(ctx, writer.B().Set().Key("zz:other").Value("1").Build()).Error(), "SET outside the prefix")
			if !bcast {
				must(t, writer.Do(ctx, writer.B().Set().Key("bc:plain").Value("1").Build()).Error(), "SET of a key read with a plain GET")
			}
			if mode.name == "optout" {
				deq(t, "OPTOUT: invalidation for a key read with a plain GET", nextInval("plain GET"), []string{"bc:plain"})
			}
			must(t, writer.Do(ctx, writer.B().Set().Key(key).Value("2").Build()).Error(), "SET of the cached key")
			deq(t, "invalidation for the cached key", nextInval("write to the cached key"), []string{key})
			awaitFresh(t, "GET after the invalidation", "2", func() rueidis.RedisResult {
				return c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute)
			})
			// A key read once is tracked once: after its invalidation (and no new read) a second
			// write sends nothing in OPTIN and OPTOUT modes; BCAST announces it again.
			must(t, writer.Do(ctx, writer.B().Set().Key(key).Value("3").Build()).Error(), "SET again")
			deq(t, "invalidation after re-reading", nextInval("write after re-read"), []string{key})
			must(t, writer.Do(ctx, writer.B().Set().Key(key).Value("4").Build()).Error(), "SET without a read in between")
			must(t, writer.Do(ctx, writer.B().Set().Key("bc:marker").Value("1").Build()).Error(), "SET marker")
			if bcast {
				deq(t, "BCAST: the second write", nextInval("second write"), []string{key})
				deq(t, "BCAST: the marker", nextInval("marker"), []string{"bc:marker"})
			} else {
				// Nothing is pending: read the marker with caching, write it, and its invalidation
				// must be the next message.
				c.DoCache(ctx, c.B().Get().Key("bc:marker").Cache(), time.Minute)
				must(t, writer.Do(ctx, writer.B().Set().Key("bc:marker").Value("2").Build()).Error(), "SET marker again")
				deq(t, "no invalidation for an untracked write", nextInval("marker"), []string{"bc:marker"})
			}
			// A key expiring on the server is invalidated without any write: read (tracked) with
			// 800 ms to live, then no command touches it.
			must(t, writer.Do(ctx, writer.B().Set().Key("bc:exp").Value("x").PxMilliseconds(800).Build()).Error(), "SET PX 800")
			if bcast {
				deq(t, "BCAST: the SET PX", nextInval("SET PX"), []string{"bc:exp"})
			}
			expectRead(t, "GET of a key with 800 ms to live", c.DoCache(ctx, c.B().Get().Key("bc:exp").Cache(), time.Minute), "x", false)
			deq(t, "invalidation when the server expires a key", nextInval("expiry"), []string{"bc:exp"})

			// FLUSHALL: a null invalidation (all keys).
			must(t, writer.Do(ctx, writer.B().Flushall().Build()).Error(), "FLUSHALL")
			deq(t, "invalidation on FLUSHALL", nextInval("FLUSHALL"), []string{"<all>"})
		})
	}
}

// incrWatched adds one to key with WATCH/GET/MULTI/SET/EXEC on a dedicated connection, retrying
// while another client's write aborts the EXEC (a nil reply).
func incrWatched(ctx context.Context, c rueidis.Client, key string) (retries int, err error) {
	for ; retries < 10000; retries++ {
		committed := false
		err = c.Dedicated(func(d rueidis.DedicatedClient) error {
			if err := d.Do(ctx, d.B().Watch().Key(key).Build()).Error(); err != nil {
				return err
			}
			n, err := d.Do(ctx, d.B().Get().Key(key).Build()).AsInt64()
			if err != nil && !rueidis.IsRedisNil(err) {
				return err
			}
			res := d.DoMulti(ctx,
				d.B().Multi().Build(),
				d.B().Set().Key(key).Value(strconv.FormatInt(n+1, 10)).Build(),
				d.B().Exec().Build())
			if err := res[2].Error(); rueidis.IsRedisNil(err) {
				return nil // aborted by a concurrent write: retry
			} else if err != nil {
				return err
			}
			committed = true
			return nil
		})
		if err != nil || committed {
			return retries, err
		}
	}
	return retries, errors.New("gave up after 10000 retries")
}

func TestRueidisDedicatedWatch(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, opt rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		other := rueidisClient(t, opt)
		must(t, c.Do(ctx, c.B().Set().Key("k").Value("1").Build()).Error(), "SET")
		// A write by another client between WATCH and EXEC aborts the transaction.
		err := c.Dedicated(func(d rueidis.DedicatedClient) error {
			must(t, d.Do(ctx, d.B().Watch().Key("k").Build()).Error(), "WATCH")
			eq(t, "GET under WATCH", rstr(t, "GET", d.Do(ctx, d.B().Get().Key("k").Build())), "1")
			must(t, other.Do(ctx, other.B().Set().Key("k").Value("other").Build()).Error(), "SET by another client")
			res := d.DoMulti(ctx, d.B().Multi().Build(), d.B().Set().Key("k").Value("mine").Build(), d.B().Exec().Build())
			eq(t, "MULTI", rstr(t, "MULTI", res[0]), "OK")
			eq(t, "queued SET", rstr(t, "queued SET", res[1]), "QUEUED")
			rnil(t, "EXEC after a concurrent write", res[2])
			return nil
		})
		must(t, err, "Dedicated")
		eq(t, "value after the aborted transaction", rstr(t, "GET", c.Do(ctx, c.B().Get().Key("k").Build())), "other")

		// Undisturbed, the same transaction commits; Dedicate hands the connection out until
		// cancel is called.
		d, cancel := c.Dedicate()
		must(t, d.Do(ctx, d.B().Watch().Key("k").Build()).Error(), "WATCH")
		res := d.DoMulti(ctx, d.B().Multi().Build(), d.B().Set().Key("k").Value("mine").Build(),
			d.B().Incr().Key("n").Build(), d.B().Exec().Build())
		exec, err := res[3].ToArray()
		must(t, err, "EXEC")
		eq(t, "EXEC replies", len(exec), 2)
		eq(t, "SET in EXEC", rstr(t, "EXEC[0]", rueidisResult(exec[0])), "OK")
		eq(t, "INCR in EXEC", rint(t, "EXEC[1]", rueidisResult(exec[1])), int64(1))
		// UNWATCH clears the watch: a later write by another client does not abort.
		must(t, d.Do(ctx, d.B().Watch().Key("k").Build()).Error(), "WATCH")
		must(t, d.Do(ctx, d.B().Unwatch().Build()).Error(), "UNWATCH")
		must(t, other.Do(ctx, other.B().Set().Key("k").Value("x").Build()).Error(), "SET by another client")
		res = d.DoMulti(ctx, d.B().Multi().Build(), d.B().Set().Key("k").Value("after-unwatch").Build(), d.B().Exec().Build())
		must(t, res[2].Error(), "EXEC after UNWATCH")
		// DISCARD drops what was queued.
		res = d.DoMulti(ctx, d.B().Multi().Build(), d.B().Set().Key("k").Value("discarded").Build(), d.B().Discard().Build())
		eq(t, "DISCARD", rstr(t, "DISCARD", res[2]), "OK")
		cancel()
		eq(t, "value after EXEC and DISCARD", rstr(t, "GET", c.Do(ctx, c.B().Get().Key("k").Build())), "after-unwatch")

		// Optimistic increments from 8 goroutines, each retrying its aborted transactions: no
		// increment is lost or doubled.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() {
				for range 25 {
					if _, err := incrWatched(ctx, c, "counter"); err != nil {
						errs <- err
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
		eq(t, "counter after 8 x 25 watched increments", rstr(t, "GET counter", c.Do(ctx, c.B().Get().Key("counter").Build())), "200")
	})
}

func TestRueidisBlocking(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, opt rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		gr := client(t, 0) // reads INFO's blocked_clients
		pusher := rueidisClient(t, opt)
		async := func(cmd rueidis.Completed) <-chan rueidis.RedisResult {
			ch := make(chan rueidis.RedisResult, 1)
			go func() { ch <- c.Do(ctx, cmd) }()
			return ch
		}
		wait := func(ch <-chan rueidis.RedisResult, what string) rueidis.RedisResult {
			t.Helper()
			select {
			case r := <-ch:
				return r
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no reply within 10 s", what)
			}
			return rueidis.RedisResult{}
		}
		blocked := func(what string) {
			t.Helper()
			waitFor(t, 5*time.Second, what+" to block", func() bool { return blockedClients(t, gr) == 1 })
		}

		// BLPOP on two lists, woken by another client's RPUSH to the second.
		blpop := async(c.B().Blpop().Key("q1", "q2").Timeout(10).Build())
		blocked("BLPOP")
		// While one connection is blocked, the client goes on answering (blocking commands take
		// their own connection).
		eq(t, "PING while BLPOP is blocked", rstr(t, "PING", c.Do(ctx, c.B().Ping().Build())), "PONG")
		eq(t, "RPUSH", rint(t, "RPUSH", pusher.Do(ctx, pusher.B().Rpush().Key("q2").Element("hello", "world").Build())), int64(2))
		deq(t, "BLPOP", rstrs(t, "BLPOP", wait(blpop, "BLPOP")), []string{"q2", "hello"})
		deq(t, "what BLPOP left", rstrs(t, "LRANGE", c.Do(ctx, c.B().Lrange().Key("q2").Start(0).Stop(-1).Build())), []string{"world"})

		// A timeout is a nil reply.
		start := time.Now()
		rnil(t, "BLPOP timing out", c.Do(ctx, c.B().Blpop().Key("empty").Timeout(0.2).Build()))
		atLeast(t, "BLPOP with a 0.2 s timeout", time.Since(start), 190*time.Millisecond)

		// BLMOVE, BZPOPMIN and XREAD BLOCK, each woken by another client.
		blmove := async(c.B().Blmove().Source("src").Destination("dst").Left().Right().Timeout(10).Build())
		blocked("BLMOVE")
		must(t, pusher.Do(ctx, pusher.B().Lpush().Key("src").Element("item").Build()).Error(), "LPUSH")
		eq(t, "BLMOVE", rstr(t, "BLMOVE", wait(blmove, "BLMOVE")), "item")
		deq(t, "dst after BLMOVE", rstrs(t, "LRANGE dst", c.Do(ctx, c.B().Lrange().Key("dst").Start(0).Stop(-1).Build())), []string{"item"})

		bz := async(c.B().Bzpopmin().Key("zq").Timeout(10).Build())
		blocked("BZPOPMIN")
		must(t, pusher.Do(ctx, pusher.B().Zadd().Key("zq").ScoreMember().ScoreMember(2, "b").ScoreMember(1, "a").Build()).Error(), "ZADD")
		zr, err := wait(bz, "BZPOPMIN").ToArray()
		must(t, err, "BZPOPMIN")
		eq(t, "BZPOPMIN key", rstr(t, "key", rueidisResult(zr[0])), "zq")
		eq(t, "BZPOPMIN member", rstr(t, "member", rueidisResult(zr[1])), "a")
		zscore, err := zr[2].AsFloat64()
		must(t, err, "BZPOPMIN score")
		eq(t, "BZPOPMIN score", zscore, 1.0)

		xread := async(c.B().Xread().Count(5).Block(10000).Streams().Key("xs").Id("$").Build())
		blocked("XREAD BLOCK")
		id := rstr(t, "XADD", pusher.Do(ctx, pusher.B().Xadd().Key("xs").Id("*").FieldValue().FieldValue("f", "v").Build()))
		xr, err := wait(xread, "XREAD").AsXRead()
		must(t, err, "XREAD BLOCK")
		deq(t, "XREAD BLOCK", xr, map[string][]rueidis.XRangeEntry{"xs": {{ID: id, FieldValues: map[string]string{"f": "v"}}}})

		// Cancelling the context of a blocked call gives the caller ctx.Err() at once and leaves
		// the client usable; rueidis closes that connection, which ends the BLPOP on the server:
		// an element pushed later stays in the list.
		cctx, cancel := context.WithCancel(ctx)
		ch := make(chan rueidis.RedisResult, 1)
		go func() { ch <- c.Do(cctx, c.B().Blpop().Key("never").Timeout(0).Build()) }()
		blocked("BLPOP 0")
		cancel()
		if err := wait(ch, "cancelled BLPOP").Error(); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled BLPOP: %v, want context.Canceled", err)
		}
		eq(t, "PING after a cancelled BLPOP", rstr(t, "PING", c.Do(ctx, c.B().Ping().Build())), "PONG")
		waitFor(t, 5*time.Second, "the cancelled BLPOP's connection to close", func() bool { return blockedClients(t, gr) == 0 })
		must(t, pusher.Do(ctx, pusher.B().Rpush().Key("never").Element("late").Build()).Error(), "RPUSH")
		eq(t, "LLEN after the cancelled BLPOP", rint(t, "LLEN", c.Do(ctx, c.B().Llen().Key("never").Build())), int64(1))

		// UnblockOnCancel with a deadline: rueidis ends the blocked command with CLIENT UNBLOCK
		// (by the connection's id from HELLO) and keeps the connection.
		must(t, c.Do(ctx, c.B().ConfigResetstat().Build()).Error(), "CONFIG RESETSTAT")
		dctx, dcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer dcancel()
		start = time.Now()
		err = c.Do(dctx, c.B().Blpop().Key("none").Timeout(0).Build().UnblockOnCancel()).Error()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("BLPOP past its deadline: %v, want context.DeadlineExceeded", err)
		}
		atLeast(t, "BLPOP with a 300 ms deadline", time.Since(start), 290*time.Millisecond)
		waitFor(t, 5*time.Second, "CLIENT UNBLOCK to end the BLPOP", func() bool { return blockedClients(t, gr) == 0 })
		waitFor(t, 5*time.Second, "CLIENT UNBLOCK in commandstats", func() bool { return commandCalls(t, c, "client|unblock") == 1 })
		must(t, pusher.Do(ctx, pusher.B().Rpush().Key("none").Element("late").Build()).Error(), "RPUSH")
		eq(t, "LLEN after the unblocked BLPOP", rint(t, "LLEN", c.Do(ctx, c.B().Llen().Key("none").Build())), int64(1))
	})
}

func TestRueidisPubSub(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, opt rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		pub := rueidisClient(t, opt)
		numsub := func(channel string) int64 {
			t.Helper()
			m, err := pub.Do(ctx, pub.B().PubsubNumsub().Channel(channel).Build()).AsIntMap()
			must(t, err, "PUBSUB NUMSUB")
			return m[channel]
		}
		numpat := func() int64 { return rint(t, "PUBSUB NUMPAT", pub.Do(ctx, pub.B().PubsubNumpat().Build())) }
		// receive runs Receive in a goroutine, handing messages to msgs; done gets its return.
		receive := func(cmd rueidis.Completed) (msgs chan rueidis.PubSubMessage, done chan error) {
			msgs, done = make(chan rueidis.PubSubMessage, 100), make(chan error, 1)
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			go func() {
				defer cancel()
				done <- c.Receive(rctx, cmd, func(m rueidis.PubSubMessage) { msgs <- m })
			}()
			return msgs, done
		}
		next := func(msgs chan rueidis.PubSubMessage, want rueidis.PubSubMessage) {
			t.Helper()
			select {
			case m := <-msgs:
				deq(t, "message", m, want)
			case <-time.After(5 * time.Second):
				t.Fatalf("no message within 5 s, want %+v", want)
			}
		}
		ended := func(done chan error, what string) {
			t.Helper()
			select {
			case err := <-done:
				must(t, err, what+": Receive's return")
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: Receive still running 5 s after unsubscribing", what)
			}
		}
		publish := func(channel, msg string, receivers int64) {
			t.Helper()
			eq(t, "PUBLISH receivers", rint(t, "PUBLISH", pub.Do(ctx, pub.B().Publish().Channel(channel).Message(msg).Build())), receivers)
		}

		// Channels: messages in publish order, on the channel they were sent to.
		msgs, done := receive(c.B().Subscribe().Channel("news", "sport").Build())
		waitFor(t, 5*time.Second, "SUBSCRIBE to reach the server", func() bool { return numsub("news") == 1 && numsub("sport") == 1 })
		// The client answers ordinary commands while a subscription is running.
		must(t, c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(), "SET while subscribed")
		eq(t, "GET while subscribed", rstr(t, "GET", c.Do(ctx, c.B().Get().Key("k").Build())), "v")
		for i := range 3 {
			publish("news", fmt.Sprintf("n%d", i), 1)
		}
		publish("sport", "goal", 1)
		publish("weather", "rain", 0)
		for i := range 3 {
			next(msgs, rueidis.PubSubMessage{Channel: "news", Message: fmt.Sprintf("n%d", i)})
		}
		next(msgs, rueidis.PubSubMessage{Channel: "sport", Message: "goal"})
		// Unsubscribing ends Receive with nil.
		must(t, c.Do(ctx, c.B().Unsubscribe().Channel("news", "sport").Build()).Error(), "UNSUBSCRIBE")
		ended(done, "SUBSCRIBE")
		waitFor(t, 5*time.Second, "UNSUBSCRIBE to reach the server", func() bool { return numsub("news") == 0 })
		select {
		case m := <-msgs:
			t.Fatalf("unexpected message %+v", m)
		default:
		}

		// Patterns: the message carries the pattern that matched.
		pmsgs, pdone := receive(c.B().Psubscribe().Pattern("user.*").Build())
		waitFor(t, 5*time.Second, "PSUBSCRIBE to reach the server", func() bool { return numpat() == 1 })
		publish("user.42", "hello", 1)
		publish("users", "no match", 0)
		next(pmsgs, rueidis.PubSubMessage{Pattern: "user.*", Channel: "user.42", Message: "hello"})
		must(t, c.Do(ctx, c.B().Punsubscribe().Pattern("user.*").Build()).Error(), "PUNSUBSCRIBE")
		ended(pdone, "PSUBSCRIBE")

		// Shard channels (SSUBSCRIBE/SPUBLISH, Redis 7.0).
		smsgs, sdone := receive(c.B().Ssubscribe().Channel("shard").Build())
		waitFor(t, 5*time.Second, "SSUBSCRIBE to reach the server", func() bool {
			m, err := pub.Do(ctx, pub.B().PubsubShardnumsub().Channel("shard").Build()).AsIntMap()
			return err == nil && m["shard"] == 1
		})
		eq(t, "SPUBLISH receivers", rint(t, "SPUBLISH", pub.Do(ctx, pub.B().Spublish().Channel("shard").Message("s1").Build())), int64(1))
		next(smsgs, rueidis.PubSubMessage{Channel: "shard", Message: "s1"})
		must(t, c.Do(ctx, c.B().Sunsubscribe().Channel("shard").Build()).Error(), "SUNSUBSCRIBE")
		ended(sdone, "SSUBSCRIBE")

		// A dedicated connection with hooks: subscribe later, messages to OnMessage, and the
		// error channel closed once the connection goes back to the pool.
		d, cancel := c.Dedicate()
		hooked := make(chan rueidis.PubSubMessage, 10)
		subs := make(chan rueidis.PubSubSubscription, 10)
		wait := d.SetPubSubHooks(rueidis.PubSubHooks{
			OnMessage:      func(m rueidis.PubSubMessage) { hooked <- m },
			OnSubscription: func(s rueidis.PubSubSubscription) { subs <- s },
		})
		must(t, d.Do(ctx, d.B().Subscribe().Channel("hooked").Build()).Error(), "SUBSCRIBE on a dedicated connection")
		select {
		case s := <-subs:
			deq(t, "subscription event", s, rueidis.PubSubSubscription{Kind: "subscribe", Channel: "hooked", Count: 1})
		case <-time.After(5 * time.Second):
			t.Fatal("no subscription event within 5 s")
		}
		publish("hooked", "via hooks", 1)
		next(hooked, rueidis.PubSubMessage{Channel: "hooked", Message: "via hooks"})
		must(t, d.Do(ctx, d.B().Unsubscribe().Channel("hooked").Build()).Error(), "UNSUBSCRIBE on a dedicated connection")
		select {
		case s := <-subs:
			deq(t, "unsubscription event", s, rueidis.PubSubSubscription{Kind: "unsubscribe", Channel: "hooked", Count: 0})
		case <-time.After(5 * time.Second):
			t.Fatal("no unsubscription event within 5 s")
		}
		eq(t, "NUMSUB after UNSUBSCRIBE", numsub("hooked"), int64(0))
		// Zero hooks remove the handlers and close the error channel.
		d.SetPubSubHooks(rueidis.PubSubHooks{})
		select {
		case err, open := <-wait:
			if open {
				t.Fatalf("hooks' error channel gave %v, want it closed", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("hooks' error channel still open 5 s after removing the hooks")
		}
		cancel()
	})
}

func TestRueidisLua(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, _ int, _ rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		must(t, c.Do(ctx, c.B().ScriptFlush().Build()).Error(), "SCRIPT FLUSH")
		must(t, c.Do(ctx, c.B().ConfigResetstat().Build()).Error(), "CONFIG RESETSTAT")
		script := rueidis.NewLuaScript(`
			redis.call('INCRBY', KEYS[1], ARGV[1])
			return {KEYS[1], redis.call('GET', KEYS[1]), tonumber(ARGV[1]) * 2, 3.99, true, false}`)
		run := func(want []string) {
			t.Helper()
			vals, err := script.Exec(ctx, c, []string{"lk"}, []string{"5"}).ToArray()
			must(t, err, "script Exec")
			var got []string
			for _, v := range vals {
				if v.IsNil() {
					got = append(got, "<nil>")
					continue
				}
				s, err := v.ToAny()
				must(t, err, "script reply element")
				got = append(got, fmt.Sprint(s))
			}
			// Lua numbers become integers (3.99 truncated), true is 1, false is a nil reply.
			deq(t, "script reply", got, want)
		}
		// Not cached on the server yet: EVALSHA answers NOSCRIPT, then rueidis sends EVAL.
		run([]string{"lk", "5", "10", "3", "1", "<nil>"})
		eq(t, "EVALSHA calls after the first Exec", commandCalls(t, c, "evalsha"), 1)
		eq(t, "EVAL calls after the first Exec", commandCalls(t, c, "eval"), 1)
		// EVAL cached it: from now on EVALSHA alone.
		run([]string{"lk", "10", "10", "3", "1", "<nil>"})
		eq(t, "EVALSHA calls after the second Exec", commandCalls(t, c, "evalsha"), 2)
		eq(t, "EVAL calls after the second Exec", commandCalls(t, c, "eval"), 1)

		// ExecMulti loads the script (SCRIPT LOAD) and runs EVALSHAs in one pipeline.
		must(t, c.Do(ctx, c.B().ScriptFlush().Build()).Error(), "SCRIPT FLUSH")
		res := script.ExecMulti(ctx, c,
			rueidis.LuaExec{Keys: []string{"a"}, Args: []string{"1"}},
			rueidis.LuaExec{Keys: []string{"b"}, Args: []string{"2"}},
			rueidis.LuaExec{Keys: []string{"a"}, Args: []string{"3"}})
		for i, want := range []string{"1", "2", "4"} {
			vals, err := res[i].ToArray()
			must(t, err, "ExecMulti")
			eq(t, fmt.Sprintf("ExecMulti [%d]", i), rstr(t, "value", rueidisResult(vals[1])), want)
		}
		eq(t, "SCRIPT LOAD calls", commandCalls(t, c, "script|load"), 1)
		eq(t, "EVALSHA calls after ExecMulti", commandCalls(t, c, "evalsha"), 5)
		eq(t, "EVAL calls after ExecMulti", commandCalls(t, c, "eval"), 1)

		// Read-only scripts go through EVALSHA_RO / EVAL_RO and may not write.
		ro := rueidis.NewLuaScriptReadOnly(`return redis.call('GET', KEYS[1])`)
		eq(t, "read-only script", rstr(t, "EVAL_RO", ro.Exec(ctx, c, []string{"a"}, nil)), "4")
		eq(t, "EVAL_RO calls", commandCalls(t, c, "eval_ro"), 1)
		roWrite := rueidis.NewLuaScriptReadOnly(`return redis.call('SET', KEYS[1], 'x')`)
		if err := roWrite.Exec(ctx, c, []string{"a"}, nil).Error(); err == nil ||
			!strings.Contains(err.Error(), "Write commands are not allowed from read-only scripts") {
			t.Fatalf("write from a read-only script: %v", err)
		}

		// Errors: redis.error_reply verbatim, a failing redis.call with its error code first, and a
		// status reply as a simple string.
		rerr(t, "error_reply", rueidis.NewLuaScript(`return redis.error_reply('MYERR boom')`).Exec(ctx, c, nil, nil), "MYERR boom")
		must(t, c.Do(ctx, c.B().Set().Key("str").Value("x").Build()).Error(), "SET str")
		err := rueidis.NewLuaScript(`return redis.call('LPUSH', KEYS[1], 'y')`).Exec(ctx, c, []string{"str"}, nil).Error()
		if re, ok := rueidis.IsRedisErr(err); !ok || !strings.HasPrefix(re.Error(), "WRONGTYPE Operation against a key holding the wrong kind of value") {
			t.Fatalf("LPUSH on a string from Lua: %v", err)
		}
		eq(t, "status_reply", rstr(t, "status_reply", rueidis.NewLuaScript(`return redis.status_reply('FINE')`).Exec(ctx, c, nil, nil)), "FINE")
	})
}

func TestRueidisCompat(t *testing.T) {
	eachRueidisMode(t, func(t *testing.T, resp int, opt rueidis.ClientOption, c rueidis.Client) {
		ctx := t.Context()
		a := rueidiscompat.NewAdapter(c)
		must(t, a.Set(ctx, "k", "v", time.Minute).Err(), "Set")
		eq(t, "Get", a.Get(ctx, "k").Val(), "v")
		ttl := a.TTL(ctx, "k").Val()
		within(t, "TTL", ttl, 50*time.Second, time.Minute)
		if err := a.Get(ctx, "missing").Err(); err != rueidiscompat.Nil {
			t.Fatalf("Get of a missing key: %v, want rueidiscompat.Nil", err)
		}
		eq(t, "Incr", a.Incr(ctx, "n").Val(), int64(1))
		must(t, a.HSet(ctx, "h", "a", "1", "b", "2").Err(), "HSet")
		deq(t, "HGetAll", a.HGetAll(ctx, "h").Val(), map[string]string{"a": "1", "b": "2"})
		must(t, a.ZAdd(ctx, "z", rueidiscompat.Z{Score: 2, Member: "b"}, rueidiscompat.Z{Score: 1, Member: "a"}).Err(), "ZAdd")
		deq(t, "ZRangeWithScores", a.ZRangeWithScores(ctx, "z", 0, -1).Val(),
			[]rueidiscompat.Z{{Score: 1, Member: "a"}, {Score: 2, Member: "b"}})

		// Pipelined and TxPipelined.
		var incr *rueidiscompat.IntCmd
		_, err := a.Pipelined(ctx, func(p rueidiscompat.Pipeliner) error {
			p.Set(ctx, "p1", "x", 0)
			incr = p.IncrBy(ctx, "n", 10)
			return nil
		})
		must(t, err, "Pipelined")
		eq(t, "IncrBy in a pipeline", incr.Val(), int64(11))
		var lr *rueidiscompat.StringSliceCmd
		_, err = a.TxPipelined(ctx, func(p rueidiscompat.Pipeliner) error {
			p.RPush(ctx, "l", "a", "b")
			lr = p.LRange(ctx, "l", 0, -1)
			return nil
		})
		must(t, err, "TxPipelined")
		deq(t, "LRange in MULTI", lr.Val(), []string{"a", "b"})

		// Watch: TxFailedErr after another client's write.
		other := rueidisClient(t, opt)
		err = a.Watch(ctx, func(tx rueidiscompat.Tx) error {
			must(t, tx.Get(ctx, "k").Err(), "Get under Watch")
			must(t, other.Do(ctx, other.B().Set().Key("k").Value("other").Build()).Error(), "SET by another client")
			_, err := tx.TxPipelined(ctx, func(p rueidiscompat.Pipeliner) error {
				p.Set(ctx, "k", "mine", 0)
				return nil
			})
			return err
		}, "k")
		if err != rueidiscompat.TxFailedErr {
			t.Fatalf("Watch after a concurrent write: %v, want TxFailedErr", err)
		}
		eq(t, "value after the failed transaction", a.Get(ctx, "k").Val(), "other")

		// Cache(ttl): reads through DoCache.
		eq(t, "Cache().Get", a.Cache(time.Minute).Get(ctx, "k").Val(), "other")
		eq(t, "Cache().Get from the cache", c.DoCache(ctx, c.B().Get().Key("k").Cache(), time.Minute).IsCacheHit(), resp == 3)
		must(t, other.Do(ctx, other.B().Set().Key("k").Value("new").Build()).Error(), "SET by another client")
		waitFor(t, 5*time.Second, "Cache().Get to see another client's write", func() bool {
			return a.Cache(time.Minute).Get(ctx, "k").Val() == "new"
		})
	})
}
