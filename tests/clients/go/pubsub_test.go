// go-redis's PubSub: subscription confirmations through Receive, messages through Channel() in
// publish order, patterns, PING while subscribed, and the PUBSUB introspection commands. Under
// RESP3 the messages are push frames, under RESP2 plain arrays; go-redis must read both.
package goredis

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// receive reads the next non-message reply of a subscriber (a confirmation or a pong).
func receive(t *testing.T, sub *redis.PubSub) any {
	t.Helper()
	msg, err := sub.ReceiveTimeout(t.Context(), 5*time.Second)
	must(t, err, "Receive")
	return msg
}

// next takes one message from a subscriber's channel, with a deadline.
func next(t *testing.T, ch <-chan *redis.Message) *redis.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("subscriber channel closed")
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message within 5 s")
	}
	return nil
}

func expectMessage(t *testing.T, m *redis.Message, channel, pattern, payload string) {
	t.Helper()
	if m.Channel != channel || m.Pattern != pattern || m.Payload != payload {
		t.Fatalf("got message %q/%q/%q, want %q/%q/%q", m.Channel, m.Pattern, m.Payload, channel, pattern, payload)
	}
}

func TestPubSubChannels(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, pub *redis.Client) {
		ctx := t.Context()
		sub := client(t, proto).Subscribe(ctx, "news", "sport")
		defer sub.Close()
		// One confirmation per channel, counting this connection's subscriptions.
		deq(t, "first confirmation", receive(t, sub), &redis.Subscription{Kind: "subscribe", Channel: "news", Count: 1})
		deq(t, "second confirmation", receive(t, sub), &redis.Subscription{Kind: "subscribe", Channel: "sport", Count: 2})
		// PING on a subscribed connection answers with a pong carrying the payload.
		must(t, sub.Ping(ctx, "still-there"), "PING while subscribed")
		deq(t, "PING while subscribed", receive(t, sub), &redis.Pong{Payload: "still-there"})

		deq(t, "PUBSUB NUMSUB", pub.PubSubNumSub(ctx, "news", "sport", "none").Val(),
			map[string]int64{"news": 1, "sport": 1, "none": 0})
		deq(t, "PUBSUB CHANNELS", sorted(pub.PubSubChannels(ctx, "*").Val()), []string{"news", "sport"})
		deq(t, "PUBSUB CHANNELS with a pattern", pub.PubSubChannels(ctx, "sp*").Val(), []string{"sport"})

		// Messages arrive in publish order across both channels; PUBLISH counts receivers.
		ch := sub.Channel()
		names := []string{"news", "sport"}
		for i := range 300 {
			eq(t, "PUBLISH's receiver count", pub.Publish(ctx, names[i%2], i).Val(), int64(1))
		}
		eq(t, "PUBLISH to a channel nobody hears", pub.Publish(ctx, "nobody", "x").Val(), int64(0))
		for i := range 300 {
			expectMessage(t, next(t, ch), names[i%2], "", strconv.Itoa(i))
		}

		// After UNSUBSCRIBE only the other channel is heard.
		must(t, sub.Unsubscribe(ctx, "sport"), "UNSUBSCRIBE")
		waitFor(t, 5*time.Second, "the server to drop the sport subscription", func() bool {
			return pub.PubSubNumSub(ctx, "sport").Val()["sport"] == 0
		})
		eq(t, "PUBLISH to the unsubscribed channel", pub.Publish(ctx, "sport", "lost").Val(), int64(0))
		eq(t, "PUBLISH to the kept channel", pub.Publish(ctx, "news", "kept").Val(), int64(1))
		expectMessage(t, next(t, ch), "news", "", "kept")

		// Closing the subscriber ends its subscriptions on the server.
		must(t, sub.Close(), "closing the subscriber")
		waitFor(t, 5*time.Second, "the server to drop the closed subscriber", func() bool {
			return pub.PubSubNumSub(ctx, "news").Val()["news"] == 0
		})
		deq(t, "PUBSUB CHANNELS after close", pub.PubSubChannels(ctx, "*").Val(), []string{})
	})
}

func TestPubSubPatterns(t *testing.T) {
	eachProtocol(t, func(t *testing.T, proto int, pub *redis.Client) {
		ctx := t.Context()
		sub := client(t, proto).PSubscribe(ctx, "user.*")
		defer sub.Close()
		deq(t, "PSUBSCRIBE confirmation", receive(t, sub), &redis.Subscription{Kind: "psubscribe", Channel: "user.*", Count: 1})
		eq(t, "PUBSUB NUMPAT", pub.PubSubNumPat(ctx).Val(), int64(1))
		// A channel subscription on the same connection counts on top of the pattern.
		must(t, sub.Subscribe(ctx, "user.1"), "SUBSCRIBE on a pattern subscriber")
		deq(t, "SUBSCRIBE confirmation", receive(t, sub), &redis.Subscription{Kind: "subscribe", Channel: "user.1", Count: 2})

		ch := sub.Channel()
		eq(t, "PUBLISH matching the pattern", pub.Publish(ctx, "user.42", "a").Val(), int64(1))
		eq(t, "PUBLISH not matching", pub.Publish(ctx, "users.42", "b").Val(), int64(0))
		eq(t, "PUBLISH matching * with nothing", pub.Publish(ctx, "user.", "c").Val(), int64(1))
		// Heard twice: once for the channel, then once for the pattern.
		eq(t, "PUBLISH to channel and pattern", pub.Publish(ctx, "user.1", "d").Val(), int64(2))
		expectMessage(t, next(t, ch), "user.42", "user.*", "a")
		expectMessage(t, next(t, ch), "user.", "user.*", "c")
		expectMessage(t, next(t, ch), "user.1", "", "d")
		expectMessage(t, next(t, ch), "user.1", "user.*", "d")

		must(t, sub.PUnsubscribe(ctx, "user.*"), "PUNSUBSCRIBE")
		waitFor(t, 5*time.Second, "the server to drop the pattern", func() bool {
			return pub.PubSubNumPat(ctx).Val() == 0
		})
		eq(t, "PUBLISH after PUNSUBSCRIBE", pub.Publish(ctx, "user.1", "e").Val(), int64(1))
		expectMessage(t, next(t, ch), "user.1", "", "e")
		// Nothing else was queued: the next message is one published now.
		pub.Publish(ctx, "user.1", "last")
		expectMessage(t, next(t, ch), "user.1", "", "last")
		if got := pub.PubSubChannels(ctx, "user.*").Val(); !slices.Equal(got, []string{"user.1"}) {
			t.Fatalf("PUBSUB CHANNELS user.*: %q", got)
		}
	})
}
