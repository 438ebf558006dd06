// go-redis's ClusterClient against goblin-core in cluster mode (`--cluster-enabled yes`, one node
// owning every slot): it discovers the node, routes by slot, runs hash-tagged multi-key
// commands and transactions, and gets CROSSSLOT from the server for keys in two slots. With
// CLIENTS_REFERENCE=redis the same test runs against redis-server in cluster mode.
package goredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestClusterClient(t *testing.T) {
	ctx := context.Background()
	s, err := startServer("--cluster-enabled", "yes")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	}()
	if reference {
		plain := redis.NewClient(&redis.Options{Addr: s.addr})
		// A lone redis-server names itself with an empty address until told one.
		plain.ConfigSet(ctx, "cluster-announce-ip", "127.0.0.1")
		if err := plain.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(plain.ClusterInfo(ctx).Val(), "cluster_state:ok") {
			if time.Now().After(deadline) {
				t.Fatal("redis-server's cluster never became ok")
			}
			time.Sleep(100 * time.Millisecond)
		}
		plain.Close()
	}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.addr}, Protocol: p.proto})
			defer c.Close()
			if err := c.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			slots, err := c.ClusterSlots(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(slots) != 1 || slots[0].Start != 0 || slots[0].End != 16383 || slots[0].Nodes[0].Addr != s.addr {
				t.Fatalf("CLUSTER SLOTS: %+v", slots)
			}
			if got := c.ClusterKeySlot(ctx, "foo").Val(); got != 12182 {
				t.Fatalf("CLUSTER KEYSLOT foo: %d", got)
			}
			for i := 0; i < 100; i++ {
				key := "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
				if err := c.Set(ctx, key, i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if n := c.DBSize(ctx).Val(); n != 100 {
				t.Fatalf("DBSIZE: %d", n)
			}
			if err := c.MSet(ctx, "{acct:1}:balance", 10, "{acct:1}:owner", "ann").Err(); err != nil {
				t.Fatal(err)
			}
			cmds, err := c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.IncrBy(ctx, "{acct:1}:balance", 5)
				pipe.Get(ctx, "{acct:1}:owner")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if cmds[0].(*redis.IntCmd).Val() != 15 || cmds[1].(*redis.StringCmd).Val() != "ann" {
				t.Fatalf("transaction: %v", cmds)
			}
			err = c.Do(ctx, "MSET", "a", "1", "b", "2").Err()
			if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
				t.Fatalf("MSET across slots: %v", err)
			}
		})
	}
}
