// Streams as Go job queues use them: XADD, XRANGE, XREAD (plain and blocking), consumer groups
// with XREADGROUP, XPENDING and XACK. Note go-redis's Block field: 0 means BLOCK 0 (wait
// forever), so non-blocking reads pass Block: -1.
package goredis

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestStreams(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		// Explicit IDs keep every reply exact; Values as pairs keep the field order.
		eq(t, "XADD 1-1", c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-1", Values: []any{"n", 1, "kind", "a"}}).Val(), "1-1")
		eq(t, "XADD 1-2", c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-2", Values: map[string]any{"n": 2}}).Val(), "1-2")
		eq(t, "XADD 2-*", c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "2-*", Values: []any{"n", 3}}).Val(), "2-0")
		errText(t, "XADD with an old ID",
			c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "1-1", Values: []any{"n", 0}}).Err(),
			"ERR The ID specified in XADD is equal or smaller than the target stream top item")
		eq(t, "XLEN", c.XLen(ctx, "s").Val(), int64(3))
		// An auto ID is <ms>-<seq>, with the ms of the server's clock.
		before := time.Now().UnixMilli()
		auto := c.XAdd(ctx, &redis.XAddArgs{Stream: "auto", Values: []any{"k", "v"}}).Val()
		var ms, seq int64
		if _, err := fmt.Sscanf(auto, "%d-%d", &ms, &seq); err != nil || ms < before-1000 || ms > time.Now().UnixMilli()+1000 {
			t.Fatalf("auto stream ID %q (%v)", auto, err)
		}

		all := []redis.XMessage{
			{ID: "1-1", Values: map[string]any{"n": "1", "kind": "a"}},
			{ID: "1-2", Values: map[string]any{"n": "2"}},
			{ID: "2-0", Values: map[string]any{"n": "3"}},
		}
		deq(t, "XRANGE - +", c.XRange(ctx, "s", "-", "+").Val(), all)
		deq(t, "XRANGE exclusive start", c.XRange(ctx, "s", "(1-1", "+").Val(), all[1:])
		deq(t, "XREVRANGE COUNT", c.XRevRangeN(ctx, "s", "+", "-", 1).Val(), all[2:])

		deq(t, "XREAD COUNT 2 from 0", c.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "0"}, Count: 2, Block: -1}).Val(),
			[]redis.XStream{{Stream: "s", Messages: all[:2]}})
		isNil(t, "XREAD past the end", c.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "2-0"}, Block: -1}).Err())
		// A blocking XREAD times out with redis.Nil ...
		start := time.Now()
		isNil(t, "XREAD BLOCK 200 on nothing", c.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: 200 * time.Millisecond}).Err())
		atLeast(t, "XREAD BLOCK 200's wait", time.Since(start), 150*time.Millisecond)
		// ... and is woken by another client's XADD.
		type result struct {
			val []redis.XStream
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{"s", "$"}, Block: 10 * time.Second}).Result()
			done <- result{v, err}
		}()
		other := client(t, proto)
		waitFor(t, 5*time.Second, "XREAD to block", func() bool { return blockedClients(t, other) == 1 })
		must(t, other.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "3-0", Values: []any{"n", 4}}).Err(), "XADD by another client")
		select {
		case r := <-done:
			must(t, r.err, "woken XREAD")
			deq(t, "woken XREAD", r.val, []redis.XStream{{Stream: "s", Messages: []redis.XMessage{{ID: "3-0", Values: map[string]any{"n": "4"}}}}})
		case <-time.After(5 * time.Second):
			t.Fatal("XREAD was not woken by XADD within 5 s")
		}

		// XADD MAXLEN trims the oldest entries.
		must(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "s", ID: "4-0", MaxLen: 2, Values: []any{"n", 5}}).Err(), "XADD MAXLEN")
		deq(t, "IDs after MAXLEN 2", ids(c.XRange(ctx, "s", "-", "+").Val()), []string{"3-0", "4-0"})
		eq(t, "XDEL", c.XDel(ctx, "s", "3-0", "9-9").Val(), int64(1))
		eq(t, "XLEN after XDEL", c.XLen(ctx, "s").Val(), int64(1))
	})
}

func ids(msgs []redis.XMessage) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func TestStreamConsumerGroups(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, c *redis.Client) {
		ctx := t.Context()
		// MKSTREAM creates the stream; "$" means only entries added from now on.
		eq(t, "XGROUP CREATE MKSTREAM", c.XGroupCreateMkStream(ctx, "jobs", "workers", "$").Val(), "OK")
		eq(t, "XLEN of the created stream", c.XLen(ctx, "jobs").Val(), int64(0))
		errText(t, "XGROUP CREATE twice", c.XGroupCreateMkStream(ctx, "jobs", "workers", "$").Err(),
			"BUSYGROUP Consumer Group name already exists")
		errText(t, "XGROUP CREATE on a missing stream", c.XGroupCreate(ctx, "nostream", "g", "$").Err(),
			"ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
		for i, id := range []string{"1-0", "2-0", "3-0"} {
			must(t, c.XAdd(ctx, &redis.XAddArgs{Stream: "jobs", ID: id, Values: []any{"job", i}}).Err(), "XADD job")
		}

		read := func(consumer, id string, count int64) []redis.XStream {
			t.Helper()
			v, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: consumer,
				Streams: []string{"jobs", id}, Count: count, Block: -1}).Result()
			if err == redis.Nil {
				return nil
			}
			must(t, err, "XREADGROUP")
			return v
		}
		job := func(id, n string) redis.XMessage { return redis.XMessage{ID: id, Values: map[string]any{"job": n}} }
		// ">" hands out entries nobody in the group has seen, each to one consumer.
		deq(t, "c1 reads two", read("c1", ">", 2), []redis.XStream{{Stream: "jobs", Messages: []redis.XMessage{job("1-0", "0"), job("2-0", "1")}}})
		deq(t, "c2 reads the rest", read("c2", ">", 10), []redis.XStream{{Stream: "jobs", Messages: []redis.XMessage{job("3-0", "2")}}})
		if got := read("c3", ">", 10); got != nil {
			t.Fatalf("c3 got %v from a drained group", got)
		}

		p, err := c.XPending(ctx, "jobs", "workers").Result()
		must(t, err, "XPENDING")
		deq(t, "XPENDING", p, &redis.XPending{Count: 3, Lower: "1-0", Higher: "3-0", Consumers: map[string]int64{"c1": 2, "c2": 1}})
		ext, err := c.XPendingExt(ctx, &redis.XPendingExtArgs{Stream: "jobs", Group: "workers", Start: "-", End: "+", Count: 10, Consumer: "c1"}).Result()
		must(t, err, "XPENDING extended")
		eq(t, "c1's pending entries", len(ext), 2)
		eq(t, "first pending ID", ext[0].ID, "1-0")
		eq(t, "first pending consumer", ext[0].Consumer, "c1")
		eq(t, "first pending delivery count", ext[0].RetryCount, int64(1))

		// XACK removes entries from the pending list, once.
		eq(t, "XACK", c.XAck(ctx, "jobs", "workers", "1-0", "2-0").Val(), int64(2))
		eq(t, "XACK again", c.XAck(ctx, "jobs", "workers", "1-0").Val(), int64(0))
		// Reading from "0" replays the consumer's own pending history: c1 has none left.
		deq(t, "c1's history after XACK", read("c1", "0", 10), []redis.XStream{{Stream: "jobs", Messages: []redis.XMessage{}}})
		deq(t, "c2's history", read("c2", "0", 10), []redis.XStream{{Stream: "jobs", Messages: []redis.XMessage{job("3-0", "2")}}})
		eq(t, "pending after XACK", c.XPending(ctx, "jobs", "workers").Val().Count, int64(1))

		// XAUTOCLAIM moves c2's entry to c3 (min idle 0), the usual dead-consumer recovery.
		claimed, next, err := c.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: "jobs", Group: "workers", Consumer: "c3",
			MinIdle: 0, Start: "0", Count: 10}).Result()
		must(t, err, "XAUTOCLAIM")
		deq(t, "XAUTOCLAIM entries", claimed, []redis.XMessage{job("3-0", "2")})
		eq(t, "XAUTOCLAIM next cursor", next, "0-0")
		deq(t, "XPENDING after XAUTOCLAIM", c.XPending(ctx, "jobs", "workers").Val().Consumers, map[string]int64{"c3": 1})

		// A blocked XREADGROUP is woken by a new entry.
		done := make(chan []redis.XStream, 1)
		go func() {
			v, _ := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "c1",
				Streams: []string{"jobs", ">"}, Block: 10 * time.Second}).Result()
			done <- v
		}()
		other := client(t, proto)
		waitFor(t, 5*time.Second, "XREADGROUP to block", func() bool { return blockedClients(t, other) == 1 })
		must(t, other.XAdd(ctx, &redis.XAddArgs{Stream: "jobs", ID: "4-0", Values: []any{"job", 3}}).Err(), "XADD")
		select {
		case v := <-done:
			deq(t, "woken XREADGROUP", v, []redis.XStream{{Stream: "jobs", Messages: []redis.XMessage{job("4-0", "3")}}})
		case <-time.After(5 * time.Second):
			t.Fatal("XREADGROUP was not woken by XADD within 5 s")
		}

		groups, err := c.XInfoGroups(ctx, "jobs").Result()
		must(t, err, "XINFO GROUPS")
		eq(t, "groups", len(groups), 1)
		eq(t, "group name", groups[0].Name, "workers")
		eq(t, "group consumers", groups[0].Consumers, int64(3))
		eq(t, "group pending", groups[0].Pending, int64(2))
		eq(t, "group last delivered ID", groups[0].LastDeliveredID, "4-0")
	})
}
