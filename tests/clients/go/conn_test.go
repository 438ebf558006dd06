// The connection itself: the handshake go-redis performs (HELLO with SETNAME, CLIENT SETINFO),
// the RESP3 reply types it reads through Do, INFO parsing, and the error values services check.
package goredis

import (
	"errors"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestHandshake(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, _ *redis.Client) {
		ctx := t.Context()
		c := client(t, proto, func(o *redis.Options) { o.ClientName = "billing-svc" })
		// go-redis falls back to RESP2 silently when HELLO 3 fails; the default run must
		// really speak RESP3.
		want := 3
		if proto == 2 {
			want = 2
		}
		info, err := c.ClientInfo(ctx).Result()
		must(t, err, "CLIENT INFO")
		eq(t, "CLIENT INFO resp", info.Resp, want)
		// The name travels in HELLO's SETNAME.
		eq(t, "CLIENT INFO name", info.Name, "billing-svc")
		eq(t, "CLIENT GETNAME", c.ClientGetName(ctx).Val(), "billing-svc")
		if !reference { // Debian's Redis 7.0 predates CLIENT SETINFO (7.2)
			eq(t, "CLIENT INFO lib-name", info.LibName, "go-redis(,"+runtime.Version()+")")
			eq(t, "CLIENT INFO lib-ver", info.LibVer, redis.Version())
		}
		hello, err := c.Do(ctx, "HELLO").Result()
		must(t, err, "HELLO")
		fields := map[any]any{}
		if m, ok := hello.(map[any]any); ok {
			fields = m
		} else if l, ok := hello.([]any); ok {
			for i := 0; i+1 < len(l); i += 2 {
				fields[l[i]] = l[i+1]
			}
		}
		eq(t, "HELLO proto", fields["proto"], any(int64(want)))
		eq(t, "HELLO role", fields["role"], any("master"))
	})
}

func TestRawReplyTypes(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		resp3 := proto != 2
		must(t, c.HSet(ctx, "h", "a", "1").Err(), "HSET")
		must(t, c.ZAdd(ctx, "z", redis.Z{Score: 1.5, Member: "m"}).Err(), "ZADD")
		must(t, c.SAdd(ctx, "s", "x").Err(), "SADD")
		// Do hands over what the wire said: maps, doubles and sets in RESP3, arrays and bulk
		// strings in RESP2. Services that use Do see the difference, so the server's types
		// must be RESP3's own.
		pick := func(r3, r2 any) any {
			if resp3 {
				return r3
			}
			return r2
		}
		deq(t, "HGETALL through Do", c.Do(ctx, "HGETALL", "h").Val(), pick(map[any]any{"a": "1"}, []any{"a", "1"}))
		deq(t, "ZSCORE through Do", c.Do(ctx, "ZSCORE", "z", "m").Val(), pick(1.5, "1.5"))
		deq(t, "ZRANGE WITHSCORES through Do", c.Do(ctx, "ZRANGE", "z", 0, -1, "WITHSCORES").Val(),
			pick([]any{[]any{"m", 1.5}}, []any{"m", "1.5"}))
		deq(t, "SMEMBERS through Do", c.Do(ctx, "SMEMBERS", "s").Val(), []any{"x"})
		deq(t, "CONFIG GET through Do", c.Do(ctx, "CONFIG", "GET", "maxmemory").Val(),
			pick(map[any]any{"maxmemory": "0"}, []any{"maxmemory", "0"}))
		isNil(t, "GET of a missing key through Do", c.Do(ctx, "GET", "missing").Err())
		// A script that switches to RESP3 returns a boolean to a RESP3 client, 1 to a RESP2 one.
		deq(t, "Lua true after setresp(3)", c.Do(ctx, "EVAL", "redis.setresp(3); return true", 0).Val(), pick(true, int64(1)))
		// INFO is a verbatim string in RESP3; go-redis strips the "txt:" prefix.
		info := c.Do(ctx, "INFO", "server").Val()
		s, ok := info.(string)
		if !ok || !strings.HasPrefix(s, "# Server\r\n") {
			t.Fatalf("INFO through Do: %T %.40q", info, info)
		}
	})
}

// infoFields parses INFO's text the way hand-written Go code does: "key:value" lines, "#"
// section headers skipped.
func infoFields(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

func TestInfo(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		all := infoFields(c.Info(ctx).Val())
		if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(all["redis_version"]) {
			t.Fatalf("redis_version %q is not x.y.z", all["redis_version"])
		}
		eq(t, "redis_mode", all["redis_mode"], "standalone")
		eq(t, "role", all["role"], "master")
		if _, err := strconv.Atoi(all["tcp_port"]); err != nil || ":"+all["tcp_port"] != srv.addr[strings.LastIndex(srv.addr, ":"):] {
			t.Fatalf("tcp_port %q, server on %s", all["tcp_port"], srv.addr)
		}

		usedMemory := func() int64 {
			t.Helper()
			m, err := c.InfoMap(ctx, "memory").Result()
			must(t, err, "INFO memory")
			n, err := strconv.ParseInt(m["Memory"]["used_memory"], 10, 64)
			must(t, err, "used_memory")
			return n
		}
		before := usedMemory()
		if before <= 0 {
			t.Fatalf("used_memory %d", before)
		}
		// A 1 MiB value shows up in used_memory, and leaves it again when deleted. The bounds
		// leave 1/8 for buffers of earlier connections that the server frees meanwhile.
		must(t, c.Set(ctx, "big", strings.Repeat("x", 1<<20), 0).Err(), "SET 1 MiB")
		with := usedMemory()
		if with-before < 7<<17 {
			t.Fatalf("used_memory grew by %d bytes for a 1 MiB value (%d -> %d)", with-before, before, with)
		}
		must(t, c.Del(ctx, "big").Err(), "DEL")
		if after := usedMemory(); with-after < 1<<19 {
			t.Fatalf("used_memory fell by %d bytes after deleting a 1 MiB value (%d -> %d)", with-after, with, after)
		}

		// The keyspace section, through go-redis's InfoMap and its Item accessor.
		must(t, c.MSet(ctx, "a", 1, "b", 2, "c", 3).Err(), "MSET")
		must(t, c.Expire(ctx, "a", 100e9).Err(), "EXPIRE")
		ks := c.InfoMap(ctx, "keyspace")
		must(t, ks.Err(), "INFO keyspace")
		db0 := ks.Item("Keyspace", "db0")
		if !strings.HasPrefix(db0, "keys=3,expires=1,") {
			t.Fatalf("db0 %q, want keys=3,expires=1,...", db0)
		}
		sections, err := c.InfoMap(ctx, "server", "clients").Result()
		must(t, err, "INFO server clients")
		eq(t, "sections", len(sections), 2)
		eq(t, "INFO server redis_version", sections["Server"]["redis_version"], all["redis_version"])
		if n, err := strconv.Atoi(sections["Clients"]["connected_clients"]); err != nil || n < 1 {
			t.Fatalf("connected_clients %q", sections["Clients"]["connected_clients"])
		}
	})
}

func TestErrorValues(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, _ *redis.Client) {
		ctx := t.Context()
		// One connection: errors must leave it usable, not force a reconnect.
		c := freshClient(t, proto, func(o *redis.Options) { o.PoolSize = 1 })

		err := c.Get(ctx, "missing").Err()
		if err != redis.Nil || !errors.Is(err, redis.Nil) || err.Error() != "redis: nil" {
			t.Fatalf("GET of a missing key: %v, want redis.Nil", err)
		}
		// Typed commands keep the zero value next to redis.Nil.
		eq(t, "GET of a missing key's value", c.Get(ctx, "missing").Val(), "")
		isNil(t, "HGET of a missing key", c.HGet(ctx, "missing", "f").Err())
		isNil(t, "LPOP of a missing key", c.LPop(ctx, "missing").Err())
		isNil(t, "ZSCORE of a missing key", c.ZScore(ctx, "missing", "m").Err())

		must(t, c.Set(ctx, "s", "v", 0).Err(), "SET")
		wrongType := "WRONGTYPE Operation against a key holding the wrong kind of value"
		err = c.LPush(ctx, "s", "x").Err()
		errText(t, "LPUSH on a string", err, wrongType)
		eq(t, "HasErrorPrefix WRONGTYPE", redis.HasErrorPrefix(err, "WRONGTYPE"), true)
		errText(t, "HGET on a string", c.HGet(ctx, "s", "f").Err(), wrongType)
		errText(t, "ZADD on a string", c.ZAdd(ctx, "s", redis.Z{Score: 1, Member: "m"}).Err(), wrongType)
		must(t, c.RPush(ctx, "l", "x").Err(), "RPUSH")
		errText(t, "GET on a list", c.Get(ctx, "l").Err(), wrongType)

		errText(t, "unknown command", c.Do(ctx, "NOSUCHCMD", "a", "b").Err(),
			"ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' ")
		errText(t, "wrong arity", c.Do(ctx, "GET").Err(), "ERR wrong number of arguments for 'get' command")
		errText(t, "SET NX XX", c.Do(ctx, "SET", "k", "v", "NX", "XX").Err(), "ERR syntax error")
		errText(t, "EXPIRE with a word", c.Do(ctx, "EXPIRE", "s", "soon").Err(), "ERR value is not an integer or out of range")
		errText(t, "LINDEX with a word", c.Do(ctx, "LINDEX", "l", "x").Err(), "ERR value is not an integer or out of range")
		errText(t, "ZADD with a bad score", c.Do(ctx, "ZADD", "z", "high", "m").Err(), "ERR value is not a valid float")

		eq(t, "value after the errors", c.Get(ctx, "s").Val(), "v")
		eq(t, "connections opened", c.PoolStats().TotalConns, uint32(1))
		eq(t, "connections found unusable", c.PoolStats().StaleConns, uint32(0))
	})
}
