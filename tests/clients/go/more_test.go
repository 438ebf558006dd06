// Further commands Go services lean on: blocking pops of every kind, Redis 7's multi-key pops,
// ZADD INCR and set algebra on sorted sets, bitmaps and HyperLogLogs as counters, GEO search,
// random sampling, a SET NX PX lock released by a script, EXAT/PXAT, and large values.
package goredis

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestBlockingPopVariants(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		other := client(t, proto)
		// BZPOPMIN: the key it popped from, member and score, once another client adds one.
		done := make(chan *redis.ZWithKey, 1)
		go func() {
			v, _ := c.BZPopMin(ctx, 10*time.Second, "z1", "z2").Result()
			done <- v
		}()
		waitFor(t, 5*time.Second, "BZPOPMIN to block", func() bool { return blockedClients(t, other) == 1 })
		must(t, other.ZAdd(ctx, "z2", redis.Z{Score: 2.5, Member: "b"}, redis.Z{Score: 1, Member: "a"}).Err(), "ZADD")
		select {
		case v := <-done:
			deq(t, "woken BZPOPMIN", v, &redis.ZWithKey{Key: "z2", Z: redis.Z{Score: 1, Member: "a"}})
		case <-time.After(5 * time.Second):
			t.Fatal("BZPOPMIN was not woken within 5 s")
		}
		isNil(t, "BZPOPMIN timeout", c.BZPopMin(ctx, time.Second, "empty").Err())

		// BLMOVE: the job-queue move from a pending list to a processing list.
		moved := make(chan string, 1)
		go func() { moved <- c.BLMove(ctx, "pending", "processing", "LEFT", "RIGHT", 10*time.Second).Val() }()
		waitFor(t, 5*time.Second, "BLMOVE to block", func() bool { return blockedClients(t, other) == 1 })
		must(t, other.RPush(ctx, "pending", "job1", "job2").Err(), "RPUSH")
		select {
		case v := <-moved:
			eq(t, "woken BLMOVE", v, "job1")
		case <-time.After(5 * time.Second):
			t.Fatal("BLMOVE was not woken within 5 s")
		}
		deq(t, "processing list", other.LRange(ctx, "processing", 0, -1).Val(), []string{"job1"})
		deq(t, "pending list", other.LRange(ctx, "pending", 0, -1).Val(), []string{"job2"})

		// LMPOP / BLMPOP / ZMPOP (Redis 7.0): the first non-empty key and up to count elements.
		must(t, c.RPush(ctx, "l2", "a", "b", "c").Err(), "RPUSH l2")
		key, vals, err := c.LMPop(ctx, "right", 2, "l1", "l2").Result()
		must(t, err, "LMPOP")
		eq(t, "LMPOP key", key, "l2")
		deq(t, "LMPOP values", vals, []string{"c", "b"})
		key, vals, err = c.BLMPop(ctx, time.Second, "left", 10, "l1", "l2").Result()
		must(t, err, "BLMPOP")
		eq(t, "BLMPOP key", key, "l2")
		deq(t, "BLMPOP values", vals, []string{"a"})
		isNil(t, "LMPOP on empty lists", c.LMPop(ctx, "left", 1, "l1", "l2").Err())
		must(t, c.ZAdd(ctx, "zz", redis.Z{Score: 3, Member: "c"}, redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"}).Err(), "ZADD zz")
		zkey, zs, err := c.ZMPop(ctx, "max", 2, "nothing", "zz").Result()
		must(t, err, "ZMPOP")
		eq(t, "ZMPOP key", zkey, "zz")
		deq(t, "ZMPOP members", zs, []redis.Z{{Score: 3, Member: "c"}, {Score: 2, Member: "b"}})
	})
}

func TestSortedSetAlgebra(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		// ZADD INCR answers the new score, and redis.Nil when NX skipped it.
		eq(t, "ZADD INCR", c.ZAddArgsIncr(ctx, "z", redis.ZAddArgs{Members: []redis.Z{{Score: 2, Member: "m"}}}).Val(), 2.0)
		eq(t, "ZADD INCR again", c.ZAddArgsIncr(ctx, "z", redis.ZAddArgs{Members: []redis.Z{{Score: 0.5, Member: "m"}}}).Val(), 2.5)
		isNil(t, "ZADD NX INCR on an existing member",
			c.ZAddArgsIncr(ctx, "z", redis.ZAddArgs{NX: true, Members: []redis.Z{{Score: 1, Member: "m"}}}).Err())

		must(t, c.ZAdd(ctx, "week1", redis.Z{Score: 10, Member: "ann"}, redis.Z{Score: 5, Member: "bob"}).Err(), "ZADD week1")
		must(t, c.ZAdd(ctx, "week2", redis.Z{Score: 7, Member: "bob"}, redis.Z{Score: 1, Member: "cy"}).Err(), "ZADD week2")
		eq(t, "ZUNIONSTORE WEIGHTS", c.ZUnionStore(ctx, "total", &redis.ZStore{Keys: []string{"week1", "week2"},
			Weights: []float64{1, 2}}).Val(), int64(3))
		deq(t, "union with weights", c.ZRangeWithScores(ctx, "total", 0, -1).Val(), []redis.Z{
			{Score: 2, Member: "cy"}, {Score: 10, Member: "ann"}, {Score: 19, Member: "bob"}})
		deq(t, "ZINTER AGGREGATE MAX WITHSCORES", c.ZInterWithScores(ctx, &redis.ZStore{Keys: []string{"week1", "week2"},
			Aggregate: "MAX"}).Val(), []redis.Z{{Score: 7, Member: "bob"}})
	})
}

func TestBitmapsAndHyperLogLog(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		// Daily-active bitmaps: one bit per user id.
		for _, id := range []int64{0, 7, 8, 100} {
			eq(t, fmt.Sprintf("SETBIT %d", id), c.SetBit(ctx, "active", id, 1).Val(), int64(0))
		}
		eq(t, "SETBIT on a set bit", c.SetBit(ctx, "active", 7, 1).Val(), int64(1))
		eq(t, "GETBIT", c.GetBit(ctx, "active", 8).Val(), int64(1))
		eq(t, "GETBIT past the end", c.GetBit(ctx, "active", 10_000).Val(), int64(0))
		eq(t, "BITCOUNT", c.BitCount(ctx, "active", nil).Val(), int64(4))
		eq(t, "BITCOUNT byte range", c.BitCount(ctx, "active", &redis.BitCount{Start: 0, End: 0}).Val(), int64(2))
		eq(t, "BITCOUNT bit range", c.BitCount(ctx, "active", &redis.BitCount{Start: 7, End: 8, Unit: redis.BitCountIndexBit}).Val(), int64(2))
		eq(t, "BITPOS of the first clear bit", c.BitPos(ctx, "active", 0).Val(), int64(1))
		eq(t, "STRLEN of the bitmap", c.StrLen(ctx, "active").Val(), int64(13))
		// BITFIELD counters, with saturation.
		deq(t, "BITFIELD", c.BitField(ctx, "bf", "INCRBY", "u8", 0, 200, "OVERFLOW", "SAT", "INCRBY", "u8", 0, 100, "GET", "u8", 0).Val(),
			[]int64{200, 255, 255})

		// HyperLogLog unique counters; small counts are exact.
		eq(t, "PFADD", c.PFAdd(ctx, "visitors:mon", "a", "b", "c", "a").Val(), int64(1))
		eq(t, "PFADD of known elements", c.PFAdd(ctx, "visitors:mon", "b").Val(), int64(0))
		eq(t, "PFADD tue", c.PFAdd(ctx, "visitors:tue", "c", "d").Val(), int64(1))
		eq(t, "PFCOUNT", c.PFCount(ctx, "visitors:mon").Val(), int64(3))
		eq(t, "PFCOUNT of a union", c.PFCount(ctx, "visitors:mon", "visitors:tue").Val(), int64(4))
		eq(t, "PFMERGE", c.PFMerge(ctx, "visitors:week", "visitors:mon", "visitors:tue").Val(), "OK")
		eq(t, "PFCOUNT of the merge", c.PFCount(ctx, "visitors:week").Val(), int64(4))
		errText(t, "PFCOUNT of a plain string", c.PFCount(ctx, "bf").Err(),
			"WRONGTYPE Key is not a valid HyperLogLog string value.")
	})
}

func TestGeoSearch(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "GEOADD", c.GeoAdd(ctx, "shops",
			&redis.GeoLocation{Name: "central", Longitude: 13.361389, Latitude: 38.115556},
			&redis.GeoLocation{Name: "harbour", Longitude: 15.087269, Latitude: 37.502669},
			&redis.GeoLocation{Name: "far", Longitude: -0.1276, Latitude: 51.5072}).Val(), int64(3))
		// Distances as Redis computes them (haversine on its 52-bit geohash cells), 4 decimals.
		eq(t, "GEODIST km", c.GeoDist(ctx, "shops", "central", "harbour", "km").Val(), 166.2742)
		isNil(t, "GEODIST with a missing member", c.GeoDist(ctx, "shops", "central", "nope", "km").Err())
		locs, err := c.GeoSearchLocation(ctx, "shops", &redis.GeoSearchLocationQuery{
			GeoSearchQuery: redis.GeoSearchQuery{Longitude: 15, Latitude: 37, Radius: 200, RadiusUnit: "km", Sort: "ASC"},
			WithDist:       true,
		}).Result()
		must(t, err, "GEOSEARCH")
		deq(t, "GEOSEARCH FROMLONLAT BYRADIUS ASC WITHDIST", locs, []redis.GeoLocation{
			{Name: "harbour", Dist: 56.4413}, {Name: "central", Dist: 190.4424}})
		names, err := c.GeoSearch(ctx, "shops", &redis.GeoSearchQuery{Member: "central", BoxWidth: 400, BoxHeight: 400,
			BoxUnit: "km", Sort: "DESC"}).Result()
		must(t, err, "GEOSEARCH BYBOX")
		deq(t, "GEOSEARCH FROMMEMBER BYBOX DESC", names, []string{"harbour", "central"})
		pos := c.GeoPos(ctx, "shops", "central", "nope").Val()
		if len(pos) != 2 || pos[1] != nil || pos[0] == nil ||
			fmt.Sprintf("%.5f,%.5f", pos[0].Longitude, pos[0].Latitude) != "13.36139,38.11556" {
			t.Fatalf("GEOPOS: %v", pos)
		}
	})
}

func TestRandomSampling(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		fields := map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}
		must(t, c.HSet(ctx, "h", fields).Err(), "HSET")
		// HRANDFIELD WITHVALUES: pairs in RESP3, a flat list in RESP2; each pair must belong.
		kvs, err := c.HRandFieldWithValues(ctx, "h", 3).Result()
		must(t, err, "HRANDFIELD WITHVALUES")
		eq(t, "HRANDFIELD count", len(kvs), 3)
		seen := map[string]bool{}
		for _, kv := range kvs {
			if fields[kv.Key] != kv.Value || seen[kv.Key] {
				t.Fatalf("HRANDFIELD pair %v (all: %v)", kv, kvs)
			}
			seen[kv.Key] = true
		}
		// A negative count may repeat and returns exactly that many.
		eq(t, "HRANDFIELD -10", len(c.HRandField(ctx, "h", -10).Val()), 10)
		must(t, c.SAdd(ctx, "s", "x", "y").Err(), "SADD")
		deq(t, "SRANDMEMBER more than the set", sorted(c.SRandMemberN(ctx, "s", 5).Val()), []string{"x", "y"})
		eq(t, "SRANDMEMBER -5", len(c.SRandMemberN(ctx, "s", -5).Val()), 5)
		if k := c.RandomKey(ctx).Val(); k != "h" && k != "s" {
			t.Fatalf("RANDOMKEY %q", k)
		}
	})
}

// unlock deletes the lock only when it still holds the caller's token.
var unlock = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

func TestLockPattern(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		other := client(t, proto)
		eq(t, "first acquire", c.SetNX(ctx, "lock:order:7", "token-a", 5*time.Second).Val(), true)
		eq(t, "second acquire while held", other.SetNX(ctx, "lock:order:7", "token-b", 5*time.Second).Val(), false)
		eq(t, "release with the wrong token", unlock.Run(ctx, other, []string{"lock:order:7"}, "token-b").Val(), any(int64(0)))
		eq(t, "holder after a wrong release", c.Get(ctx, "lock:order:7").Val(), "token-a")
		eq(t, "release by the holder", unlock.Run(ctx, c, []string{"lock:order:7"}, "token-a").Val(), any(int64(1)))
		eq(t, "acquire after release", other.SetNX(ctx, "lock:order:7", "token-b", 200*time.Millisecond).Val(), true)
		// A holder that dies: its lock expires and the next caller gets it.
		waitFor(t, 3*time.Second, "the lock to expire", func() bool {
			return c.SetNX(ctx, "lock:order:7", "token-c", 5*time.Second).Val()
		})
		eq(t, "holder after the expiry", c.Get(ctx, "lock:order:7").Val(), "token-c")

		// EXAT/PXAT: SetArgs with ExpireAt, whole seconds as EXAT, milliseconds as PXAT.
		at := time.Now().Add(time.Hour).Truncate(time.Second)
		must(t, c.SetArgs(ctx, "exat", "v", redis.SetArgs{ExpireAt: at}).Err(), "SET EXAT")
		eq(t, "EXPIRETIME after SET EXAT", c.ExpireTime(ctx, "exat").Val(), time.Duration(at.Unix())*time.Second)
		atMs := at.Add(123 * time.Millisecond)
		must(t, c.SetArgs(ctx, "pxat", "v", redis.SetArgs{ExpireAt: atMs}).Err(), "SET PXAT")
		eq(t, "PEXPIRETIME after SET PXAT", c.PExpireTime(ctx, "pxat").Val(), time.Duration(atMs.UnixMilli())*time.Millisecond)
	})
}

func TestLargeValuesAndBatches(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		// An 8 MiB binary value round-trips byte for byte.
		big := make([]byte, 8<<20)
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := range big {
			big[i] = byte(rnd.Uint32())
		}
		must(t, c.Set(ctx, "big", big, 0).Err(), "SET 8 MiB")
		got, err := c.Get(ctx, "big").Bytes()
		must(t, err, "GET 8 MiB")
		if !bytes.Equal(got, big) {
			t.Fatalf("8 MiB value came back different (%d bytes)", len(got))
		}
		eq(t, "STRLEN 8 MiB", c.StrLen(ctx, "big").Val(), int64(8<<20))

		// 200 pipelined SETs of 64 KiB, then one MGET of all of them.
		pipe := c.Pipeline()
		keys := make([]string, 200)
		for i := range keys {
			keys[i] = fmt.Sprintf("chunk:%03d", i)
			pipe.Set(ctx, keys[i], strings.Repeat(string(rune('a'+i%26)), 64<<10), 0)
		}
		_, err = pipe.Exec(ctx)
		must(t, err, "pipelined 64 KiB SETs")
		vals, err := c.MGet(ctx, keys...).Result()
		must(t, err, "MGET of 200 values")
		eq(t, "MGET count", len(vals), 200)
		for i, v := range vals {
			s, _ := v.(string)
			if len(s) != 64<<10 || s[0] != byte('a'+i%26) || s[len(s)-1] != byte('a'+i%26) {
				t.Fatalf("MGET value %d: %d bytes", i, len(s))
			}
		}
	})
}
