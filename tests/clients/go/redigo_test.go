// redigo (github.com/gomodule/redigo, pinned in go.mod), the older Go client many services
// still run: RESP2 only, no HELLO, a Conn per goroutine from a redis.Pool. Driven the way those
// services use it: the Pool (MaxActive with Wait, TestOnBorrow, MaxIdle, a killed connection
// replaced, the UNWATCH/DISCARD/UNSUBSCRIBE a pooled connection's Close sends), Dial options
// (DialDatabase, DialUsername/DialPassword against an ACL user, DialClientName), the reply
// helpers (String, Int64, Float64, Strings, StringMap, Int64Map, Values, ScanStruct, AddFlat,
// ScanSlice, ErrNil, redis.Error), pipelining with Send/Flush/Receive, MULTI/EXEC through
// Send+Do("EXEC") with WATCH, NewScript's EVALSHA-then-EVAL, PubSubConn, BLPOP woken by another
// connection, SCAN to completion, DoWithTimeout/ReceiveWithTimeout, and binary-safe values.
//
// This file imports redigo as "redis" (imports are per file; the package's other files mean
// go-redis by that name). The server is the package's shared one (server_test.go); every test
// keeps its keys under its own prefix and deletes them when it ends.
package goredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// redigoDial opens a redigo connection to the test server, closed when the test ends.
func redigoDial(t testing.TB, opts ...redis.DialOption) redis.Conn {
	t.Helper()
	opts = append([]redis.DialOption{redis.DialConnectTimeout(5 * time.Second)}, opts...)
	c, err := redis.Dial("tcp", srv.addr, opts...)
	must(t, err, "redis.Dial")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// redigoPool is a pool on the test server with the given settings, closed when the test ends.
func redigoPool(t testing.TB, p *redis.Pool) *redis.Pool {
	t.Helper()
	if p.Dial == nil {
		p.Dial = func() (redis.Conn, error) {
			return redis.Dial("tcp", srv.addr, redis.DialConnectTimeout(5*time.Second))
		}
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

var redigoSeq atomic.Int64

// redigoName is a client or user name no other test uses.
func redigoName(what string) string {
	return fmt.Sprintf("redigo-%s-%d", what, redigoSeq.Add(1))
}

// redigoPrefix returns a key prefix of this test's own, and deletes every key under it (in
// database 0 and in the other databases named) when the test ends.
func redigoPrefix(t *testing.T, otherDBs ...int) string {
	t.Helper()
	prefix := "redigo:" + t.Name() + ":"
	t.Cleanup(func() {
		for _, db := range append([]int{0}, otherDBs...) {
			c, err := redis.Dial("tcp", srv.addr, redis.DialDatabase(db), redis.DialConnectTimeout(5*time.Second))
			if err != nil {
				t.Errorf("cleanup: dial db %d: %v", db, err)
				return
			}
			keys := redigoScanAll(t, c, prefix+"*")
			if len(keys) > 0 {
				if _, err := c.Do("DEL", redis.Args{}.AddFlat(keys)...); err != nil {
					t.Errorf("cleanup: DEL in db %d: %v", db, err)
				}
			}
			if left := redigoScanAll(t, c, prefix+"*"); len(left) > 0 {
				t.Errorf("cleanup: %d keys left under %q in db %d", len(left), prefix, db)
			}
			c.Close()
		}
	})
	return prefix
}

// redigoScanAll runs SCAN MATCH to completion and returns the keys it found, once each.
func redigoScanAll(t testing.TB, c redis.Conn, match string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	cursor := 0
	for range 100000 {
		vals, err := redis.Values(c.Do("SCAN", cursor, "MATCH", match, "COUNT", 100))
		if err != nil {
			t.Fatalf("SCAN %d MATCH %q: %v", cursor, match, err)
		}
		var keys []string
		if _, err := redis.Scan(vals, &cursor, &keys); err != nil {
			t.Fatalf("SCAN reply %#v: %v", vals, err)
		}
		for _, k := range keys {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
		if cursor == 0 {
			return out
		}
	}
	t.Fatalf("SCAN MATCH %q did not finish", match)
	return nil
}

// redigoErr fails unless err is a server error (redis.Error) with exactly this text.
func redigoErr(t testing.TB, what string, err error, want string) {
	t.Helper()
	var re redis.Error
	if !errors.As(err, &re) {
		t.Fatalf("%s: %v (%T), want server error %q", what, err, err, want)
	}
	if string(re) != want {
		t.Fatalf("%s: error %q, want %q", what, string(re), want)
	}
}

// redigoClients parses CLIENT LIST into one field map per connection.
func redigoClients(t testing.TB, c redis.Conn) []map[string]string {
	t.Helper()
	text, err := redis.String(c.Do("CLIENT", "LIST"))
	must(t, err, "CLIENT LIST")
	var out []map[string]string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		fields := map[string]string{}
		for _, kv := range strings.Fields(line) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		out = append(out, fields)
	}
	return out
}

// redigoNamed counts the server's connections with this client name.
func redigoNamed(t testing.TB, c redis.Conn, name string) int {
	t.Helper()
	n := 0
	for _, f := range redigoClients(t, c) {
		if f["name"] == name {
			n++
		}
	}
	return n
}

// redigoBlocked reports whether the connection with this name is blocked in cmd.
func redigoBlocked(t testing.TB, c redis.Conn, name, cmd string) bool {
	t.Helper()
	for _, f := range redigoClients(t, c) {
		if f["name"] == name && f["cmd"] == cmd && strings.Contains(f["flags"], "b") {
			return true
		}
	}
	return false
}

// redigoCalls reads "calls" for one command from INFO commandstats (0 when never called).
func redigoCalls(t testing.TB, c redis.Conn, cmd string) int {
	t.Helper()
	info, err := redis.String(c.Do("INFO", "commandstats"))
	must(t, err, "INFO commandstats")
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			must(t, err, "calls in "+line)
			return n
		}
	}
	return 0
}

// isTimeout fails unless err is a network timeout (a read deadline that passed).
func isTimeout(t testing.TB, what string, err error) {
	t.Helper()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("%s: %v (%T), want a network timeout", what, err, err)
	}
}

// TestRedigoPool: MaxActive with Wait under 50 goroutines, the limit holding a waiter until a
// connection comes back, MaxIdle trimming what stays open, TestOnBorrow's PING on every reuse.
func TestRedigoPool(t *testing.T) {
	prefix := redigoPrefix(t)
	name := redigoName("pool")
	var dials, borrows atomic.Int32
	pool := redigoPool(t, &redis.Pool{
		MaxIdle:   4,
		MaxActive: 8,
		Wait:      true,
		Dial: func() (redis.Conn, error) {
			dials.Add(1)
			return redis.Dial("tcp", srv.addr, redis.DialClientName(name), redis.DialConnectTimeout(5*time.Second))
		},
		TestOnBorrow: func(c redis.Conn, _ time.Time) error {
			borrows.Add(1)
			_, err := c.Do("PING")
			return err
		},
	})
	admin := redigoDial(t)

	// 50 goroutines x 20 rounds, each round a Get, two commands and a Close.
	const workers, rounds = 50, 20
	var wg sync.WaitGroup
	var maxActive atomic.Int32
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				c := pool.Get()
				if n := int32(pool.ActiveCount()); n > maxActive.Load() {
					maxActive.Store(n) // racy maximum; only ever compared with the limit
				}
				if _, err := c.Do("INCR", prefix+"counter"); err != nil {
					errs <- fmt.Errorf("worker %d round %d: INCR: %w", w, i, err)
					c.Close()
					return
				}
				if _, err := c.Do("HINCRBY", prefix+"per-worker", w, 1); err != nil {
					errs <- fmt.Errorf("worker %d round %d: HINCRBY: %w", w, i, err)
					c.Close()
					return
				}
				if err := c.Close(); err != nil {
					errs <- fmt.Errorf("worker %d round %d: Close: %w", w, i, err)
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
	n, err := redis.Int(admin.Do("GET", prefix+"counter"))
	must(t, err, "GET counter")
	eq(t, "counter after 50 x 20 INCR", n, workers*rounds)
	per, err := redis.Int64Map(admin.Do("HGETALL", prefix+"per-worker"))
	must(t, err, "HGETALL per-worker")
	eq(t, "workers counted", len(per), workers)
	for w, got := range per {
		eq(t, "rounds of worker "+w, got, int64(rounds))
	}
	if m := maxActive.Load(); m > 8 {
		t.Fatalf("pool had %d connections open, MaxActive is 8", m)
	}
	// Every Get that did not dial reused an idle connection, checked by TestOnBorrow's PING.
	eq(t, "Gets: dialled + borrowed", int(dials.Load()+borrows.Load()), workers*rounds)
	// Back in the pool: MaxIdle connections stay open, the rest were closed.
	eq(t, "IdleCount after the run", pool.IdleCount(), 4)
	eq(t, "ActiveCount after the run", pool.ActiveCount(), 4)
	waitFor(t, 5*time.Second, "the server to see 4 pooled connections", func() bool {
		return redigoNamed(t, admin, name) == 4
	})

	// At the limit, Get waits: with all 8 held, a Get with a deadline gives up.
	var held []redis.Conn
	var ids []int64
	for i := range 8 {
		c := pool.Get()
		id, err := redis.Int64(c.Do("CLIENT", "ID"))
		must(t, err, fmt.Sprintf("CLIENT ID of held connection %d", i))
		held = append(held, c)
		ids = append(ids, id)
	}
	eq(t, "ActiveCount with 8 held", pool.ActiveCount(), 8)
	eq(t, "server connections with 8 held", redigoNamed(t, admin, name), 8)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, err = pool.GetContext(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetContext on an exhausted pool with Wait: %v, want context.DeadlineExceeded", err)
	}
	// A waiting Get is handed the connection released next.
	got := make(chan int64, 1)
	go func() {
		c := pool.Get()
		defer c.Close()
		id, err := redis.Int64(c.Do("CLIENT", "ID"))
		if err != nil {
			id = -1
		}
		got <- id
	}()
	must(t, held[3].Close(), "releasing one held connection")
	select {
	case id := <-got:
		eq(t, "CLIENT ID the waiter got", id, ids[3])
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Get did not get the released connection")
	}
	for i, c := range held {
		if i != 3 {
			must(t, c.Close(), "Close")
		}
	}
	eq(t, "IdleCount after releasing all", pool.IdleCount(), 4)
	eq(t, "ActiveCount after releasing all", pool.ActiveCount(), 4)
	must(t, pool.Close(), "pool.Close")
	eq(t, "ActiveCount after pool.Close", pool.ActiveCount(), 0)
	waitFor(t, 5*time.Second, "the server to drop the closed pool's connections", func() bool {
		return redigoNamed(t, admin, name) == 0
	})
}

// TestRedigoPoolKilledConnection: an idle pooled connection killed by CLIENT KILL is caught by
// TestOnBorrow's PING and replaced; without TestOnBorrow the application sees the error once and
// the pool drops the broken connection instead of handing it out again.
func TestRedigoPoolKilledConnection(t *testing.T) {
	prefix := redigoPrefix(t)
	admin := redigoDial(t)
	gone := func(id int64) func() bool {
		return func() bool {
			for _, f := range redigoClients(t, admin) {
				if f["id"] == strconv.FormatInt(id, 10) {
					return false
				}
			}
			return true
		}
	}
	kill := func(id int64) {
		t.Helper()
		n, err := redis.Int(admin.Do("CLIENT", "KILL", "ID", id))
		must(t, err, "CLIENT KILL ID")
		eq(t, "clients killed", n, 1)
		waitFor(t, 5*time.Second, "the killed client to leave CLIENT LIST", gone(id))
	}
	clientID := func(c redis.Conn) int64 {
		t.Helper()
		id, err := redis.Int64(c.Do("CLIENT", "ID"))
		must(t, err, "CLIENT ID")
		return id
	}

	var testErrs atomic.Int32
	pool := redigoPool(t, &redis.Pool{
		MaxIdle: 2,
		TestOnBorrow: func(c redis.Conn, _ time.Time) error {
			_, err := c.Do("PING")
			if err != nil {
				testErrs.Add(1)
			}
			return err
		},
	})
	c := pool.Get()
	id1 := clientID(c)
	must(t, c.Close(), "Close")
	eq(t, "IdleCount", pool.IdleCount(), 1)
	kill(id1)
	c = pool.Get()
	id2 := clientID(c)
	if id2 == id1 {
		t.Fatalf("the pool handed out the killed connection %d again", id1)
	}
	eq(t, "TestOnBorrow failures", testErrs.Load(), int32(1))
	_, err := c.Do("SET", prefix+"k", "after-kill")
	must(t, err, "SET on the replacement")
	v, err := redis.String(c.Do("GET", prefix+"k"))
	must(t, err, "GET on the replacement")
	eq(t, "GET on the replacement", v, "after-kill")
	must(t, c.Close(), "Close")
	eq(t, "ActiveCount", pool.ActiveCount(), 1)

	// No TestOnBorrow: the first command on the dead connection fails, and Close drops it.
	bare := redigoPool(t, &redis.Pool{MaxIdle: 2})
	c = bare.Get()
	id3 := clientID(c)
	must(t, c.Close(), "Close")
	kill(id3)
	c = bare.Get()
	if _, err := c.Do("PING"); err == nil {
		t.Fatal("PING on a killed connection succeeded")
	} else {
		var re redis.Error
		if errors.As(err, &re) {
			t.Fatalf("PING on a killed connection: server error %q, want a connection error", re)
		}
	}
	if c.Err() == nil {
		t.Fatal("Err() of a killed connection is nil")
	}
	_ = c.Close()
	eq(t, "IdleCount after closing the broken connection", bare.IdleCount(), 0)
	eq(t, "ActiveCount after closing the broken connection", bare.ActiveCount(), 0)
	c = bare.Get()
	defer c.Close()
	pong, err := redis.String(c.Do("PING"))
	must(t, err, "PING on a fresh connection")
	eq(t, "PING", pong, "PONG")
	if clientID(c) == id3 {
		t.Fatal("the killed connection came back")
	}
}

// TestRedigoDialOptions: DialDatabase (SELECT on connect), DialUsername/DialPassword (AUTH with
// an ACL user), DialClientName (CLIENT SETNAME), and the errors Dial returns when one fails.
func TestRedigoDialOptions(t *testing.T) {
	prefix := redigoPrefix(t, 1)
	admin := redigoDial(t)
	clientInfo := func(c redis.Conn) map[string]string {
		t.Helper()
		text, err := redis.String(c.Do("CLIENT", "INFO"))
		must(t, err, "CLIENT INFO")
		fields := map[string]string{}
		for _, kv := range strings.Fields(text) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}
		return fields
	}

	// DialDatabase: the connection starts in database 1, whose keys are its own.
	db1 := redigoDial(t, redis.DialDatabase(1))
	eq(t, "db in CLIENT INFO", clientInfo(db1)["db"], "1")
	_, err := db1.Do("SET", prefix+"k", "one")
	must(t, err, "SET in db 1")
	_, err = redis.String(admin.Do("GET", prefix+"k"))
	eq(t, "GET in db 0 of a db-1 key", err, redis.ErrNil)
	_, err = admin.Do("SET", prefix+"k", "zero")
	must(t, err, "SET in db 0")
	v, err := redis.String(db1.Do("GET", prefix+"k"))
	must(t, err, "GET in db 1")
	eq(t, "GET in db 1", v, "one")
	other := redigoDial(t)
	ok, err := redis.String(other.Do("SELECT", 1))
	must(t, err, "SELECT 1")
	eq(t, "SELECT 1", ok, "OK")
	v, err = redis.String(other.Do("GET", prefix+"k"))
	must(t, err, "GET after SELECT 1")
	eq(t, "GET after SELECT 1", v, "one")
	_, err = redis.Dial("tcp", srv.addr, redis.DialDatabase(16))
	redigoErr(t, "Dial with DialDatabase(16)", err, "ERR DB index is out of range")

	// DialClientName: CLIENT SETNAME on connect.
	name := redigoName("named")
	named := redigoDial(t, redis.DialClientName(name))
	got, err := redis.String(named.Do("CLIENT", "GETNAME"))
	must(t, err, "CLIENT GETNAME")
	eq(t, "CLIENT GETNAME", got, name)
	eq(t, "connections with the name in CLIENT LIST", redigoNamed(t, admin, name), 1)
	_, err = redis.Dial("tcp", srv.addr, redis.DialClientName("has space"))
	redigoErr(t, "Dial with a client name with a space", err,
		"ERR Client names cannot contain spaces, newlines or special characters.")

	// DialPassword alone on a server without requirepass: AUTH <password> is refused.
	_, err = redis.Dial("tcp", srv.addr, redis.DialPassword("nope"))
	redigoErr(t, "Dial with DialPassword and no requirepass", err,
		"ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")

	// DialUsername + DialPassword: AUTH <user> <password> with an ACL user limited to the prefix,
	// together with the other options (AUTH, then SETNAME, then SELECT).
	user, pass := redigoName("user"), "s3cret-pass"
	ok, err = redis.String(admin.Do("ACL", "SETUSER", user, "reset", "on", ">"+pass, "~"+prefix+"*", "+@all"))
	must(t, err, "ACL SETUSER")
	eq(t, "ACL SETUSER", ok, "OK")
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_, _ = admin.Do("ACL", "DELUSER", user)
		}
	})
	uname := redigoName("acl-client")
	u := redigoDial(t, redis.DialUsername(user), redis.DialPassword(pass), redis.DialClientName(uname), redis.DialDatabase(1))
	who, err := redis.String(u.Do("ACL", "WHOAMI"))
	must(t, err, "ACL WHOAMI")
	eq(t, "ACL WHOAMI", who, user)
	info := clientInfo(u)
	eq(t, "user in CLIENT INFO", info["user"], user)
	eq(t, "name in CLIENT INFO", info["name"], uname)
	eq(t, "db in CLIENT INFO", info["db"], "1")
	v, err = redis.String(u.Do("GET", prefix+"k"))
	must(t, err, "GET of an allowed key")
	eq(t, "GET of an allowed key (db 1)", v, "one")
	_, err = u.Do("SET", "redigo-outside-the-prefix", "x")
	var re redis.Error
	if !errors.As(err, &re) || !strings.HasPrefix(string(re), "NOPERM ") {
		t.Fatalf("SET outside the user's key pattern: %v, want a NOPERM error", err)
	}
	eq(t, "connection usable after NOPERM", u.Err(), nil)
	_, err = redis.Dial("tcp", srv.addr, redis.DialUsername(user), redis.DialPassword("wrong"))
	redigoErr(t, "Dial with a wrong password", err, "WRONGPASS invalid username-password pair or user is disabled.")
	_, err = redis.Dial("tcp", srv.addr, redis.DialUsername("redigo-no-such-user"), redis.DialPassword(pass))
	redigoErr(t, "Dial as an unknown user", err, "WRONGPASS invalid username-password pair or user is disabled.")

	// Deleting the user disconnects its connections and refuses new ones.
	n, err := redis.Int(admin.Do("ACL", "DELUSER", user))
	must(t, err, "ACL DELUSER")
	eq(t, "ACL DELUSER", n, 1)
	deleted = true
	waitFor(t, 5*time.Second, "the deleted user's connection to be closed", func() bool {
		return redigoNamed(t, admin, uname) == 0
	})
	if _, err := u.Do("PING"); err == nil {
		t.Fatal("PING on a connection of a deleted user succeeded")
	}
	_, err = redis.Dial("tcp", srv.addr, redis.DialUsername(user), redis.DialPassword(pass))
	redigoErr(t, "Dial as the deleted user", err, "WRONGPASS invalid username-password pair or user is disabled.")
}

// TestRedigoReplyHelpers: the typed reply helpers on the replies of everyday commands, ErrNil
// for missing values, and server errors as redis.Error with Redis's text.
func TestRedigoReplyHelpers(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)

	ok, err := redis.String(c.Do("SET", p+"s", "hello"))
	must(t, err, "SET")
	eq(t, "SET", ok, "OK")
	s, err := redis.String(c.Do("GET", p+"s"))
	must(t, err, "GET")
	eq(t, "GET", s, "hello")
	b, err := redis.Bytes(c.Do("GET", p+"s"))
	must(t, err, "GET as Bytes")
	deq(t, "GET as Bytes", b, []byte("hello"))
	_, err = redis.String(c.Do("GET", p+"missing"))
	eq(t, "String of GET of a missing key", err, redis.ErrNil)
	_, err = redis.Int64(c.Do("GET", p+"missing"))
	eq(t, "Int64 of GET of a missing key", err, redis.ErrNil)
	_, err = redis.Bytes(c.Do("HGET", p+"h", "missing"))
	eq(t, "Bytes of HGET of a missing key", err, redis.ErrNil)

	n, err := redis.Int64(c.Do("INCRBY", p+"n", 42))
	must(t, err, "INCRBY")
	eq(t, "INCRBY", n, int64(42))
	n, err = redis.Int64(c.Do("GET", p+"n")) // a bulk string parsed by the helper
	must(t, err, "Int64 of GET")
	eq(t, "Int64 of GET", n, int64(42))
	u, err := redis.Uint64(c.Do("DECRBY", p+"n", 40))
	must(t, err, "DECRBY")
	eq(t, "DECRBY", u, uint64(2))
	f, err := redis.Float64(c.Do("INCRBYFLOAT", p+"f", 2.5))
	must(t, err, "INCRBYFLOAT")
	eq(t, "INCRBYFLOAT", f, 2.5)
	f, err = redis.Float64(c.Do("INCRBYFLOAT", p+"f", -0.25))
	must(t, err, "INCRBYFLOAT negative")
	eq(t, "INCRBYFLOAT negative", f, 2.25)
	exists, err := redis.Bool(c.Do("EXISTS", p+"s"))
	must(t, err, "EXISTS")
	eq(t, "EXISTS", exists, true)
	set, err := redis.Bool(c.Do("SETNX", p+"s", "other"))
	must(t, err, "SETNX")
	eq(t, "SETNX of an existing key", set, false)

	// Lists and sets.
	_, err = c.Do("RPUSH", p+"l", "a", "b", "c")
	must(t, err, "RPUSH")
	l, err := redis.Strings(c.Do("LRANGE", p+"l", 0, -1))
	must(t, err, "LRANGE")
	deq(t, "LRANGE", l, []string{"a", "b", "c"})
	l, err = redis.Strings(c.Do("LRANGE", p+"missing", 0, -1))
	must(t, err, "LRANGE of a missing key")
	deq(t, "LRANGE of a missing key", l, []string{})
	_, err = c.Do("SADD", p+"set", "x", "z")
	must(t, err, "SADD")
	ints, err := redis.Ints(c.Do("SMISMEMBER", p+"set", "x", "y", "z"))
	must(t, err, "SMISMEMBER")
	deq(t, "SMISMEMBER", ints, []int{1, 0, 1})

	// Hashes into maps.
	_, err = c.Do("HSET", p+"h", "name", "ada", "lang", "go")
	must(t, err, "HSET")
	m, err := redis.StringMap(c.Do("HGETALL", p+"h"))
	must(t, err, "HGETALL")
	deq(t, "HGETALL", m, map[string]string{"name": "ada", "lang": "go"})
	m, err = redis.StringMap(c.Do("HGETALL", p+"missing"))
	must(t, err, "HGETALL of a missing key")
	deq(t, "HGETALL of a missing key", m, map[string]string{})
	_, err = c.Do("HINCRBY", p+"hits", "home", 3)
	must(t, err, "HINCRBY")
	_, err = c.Do("HINCRBY", p+"hits", "about", -1)
	must(t, err, "HINCRBY")
	im, err := redis.Int64Map(c.Do("HGETALL", p+"hits"))
	must(t, err, "HGETALL as Int64Map")
	deq(t, "HGETALL as Int64Map", im, map[string]int64{"home": 3, "about": -1})
	_, err = c.Do("ZADD", p+"z", 1.5, "a", 2, "b")
	must(t, err, "ZADD")
	fm, err := redis.Float64Map(c.Do("ZRANGE", p+"z", 0, -1, "WITHSCORES"))
	must(t, err, "ZRANGE WITHSCORES as Float64Map")
	deq(t, "ZRANGE WITHSCORES as Float64Map", fm, map[string]float64{"a": 1.5, "b": 2})
	f, err = redis.Float64(c.Do("ZSCORE", p+"z", "a"))
	must(t, err, "ZSCORE")
	eq(t, "ZSCORE", f, 1.5)
	_, err = redis.Float64(c.Do("ZSCORE", p+"z", "nobody"))
	eq(t, "ZSCORE of a missing member", err, redis.ErrNil)

	// Values: an array with a nil in place of a missing key, then Scan into variables.
	vals, err := redis.Values(c.Do("MGET", p+"s", p+"missing", p+"n"))
	must(t, err, "MGET")
	deq(t, "MGET", vals, []any{[]byte("hello"), nil, []byte("2")})
	var s1, s2 string
	var n3 int
	_, err = redis.Scan(vals, &s1, &s2, &n3)
	must(t, err, "Scan of MGET")
	eq(t, "Scan of MGET", fmt.Sprint(s1, "|", s2, "|", n3), "hello||2")

	// Server errors: redis.Error values with Redis's text; the connection stays usable.
	_, err = c.Do("LPUSH", p+"s", "x")
	redigoErr(t, "LPUSH on a string", err, "WRONGTYPE Operation against a key holding the wrong kind of value")
	_, err = redis.String(c.Do("GET", p+"l"))
	redigoErr(t, "GET of a list", err, "WRONGTYPE Operation against a key holding the wrong kind of value")
	_, err = c.Do("INCR", p+"s")
	redigoErr(t, "INCR of a non-number", err, "ERR value is not an integer or out of range")
	_, err = c.Do("GET")
	redigoErr(t, "GET without a key", err, "ERR wrong number of arguments for 'get' command")
	_, err = c.Do("NOSUCHCMD", "a", "b")
	redigoErr(t, "unknown command", err, "ERR unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b' ")
	_, err = c.Do("SET", p+"k", "v", "EX", 0)
	redigoErr(t, "SET EX 0", err, "ERR invalid expire time in 'set' command")
	// A client-side conversion error is not a redis.Error.
	_, err = redis.Int64(c.Do("GET", p+"s"))
	var re redis.Error
	if err == nil || errors.As(err, &re) {
		t.Fatalf("Int64 of %q: %v, want a conversion error", "hello", err)
	}
	eq(t, "Err() after server errors", c.Err(), nil)
	pong, err := redis.String(c.Do("PING"))
	must(t, err, "PING after errors")
	eq(t, "PING after errors", pong, "PONG")
}

// redigoUser is a struct stored as a hash through AddFlat and read back with ScanStruct.
type redigoUser struct {
	Name    string  `redis:"name"`
	Age     int     `redis:"age"`
	Score   float64 `redis:"score"`
	Admin   bool    `redis:"admin"`
	Avatar  []byte  `redis:"avatar"`
	Nick    string  `redis:"nick,omitempty"`
	Private string  `redis:"-"`
}

// TestRedigoScanStruct: a struct written with HSET + Args.AddFlat, read with HGETALL +
// ScanStruct, and rows of several hashes read with SORT ... GET + ScanSlice.
func TestRedigoScanStruct(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	in := redigoUser{Name: "Ada", Age: 36, Score: 97.5, Admin: true, Avatar: []byte{0, 1, '\r', '\n', 255}, Private: "not stored"}
	args := redis.Args{}.Add(p + "user:1").AddFlat(&in)
	added, err := redis.Int(c.Do("HSET", args...))
	must(t, err, "HSET of a flattened struct")
	eq(t, "fields added (nick empty and omitted, Private skipped)", added, 5)
	m, err := redis.StringMap(c.Do("HGETALL", p+"user:1"))
	must(t, err, "HGETALL")
	deq(t, "the hash as stored", m, map[string]string{
		"name": "Ada", "age": "36", "score": "97.5", "admin": "1", "avatar": "\x00\x01\r\n\xff"})

	vals, err := redis.Values(c.Do("HGETALL", p+"user:1"))
	must(t, err, "HGETALL")
	var out redigoUser
	must(t, redis.ScanStruct(vals, &out), "ScanStruct")
	want := in
	want.Private = ""
	deq(t, "ScanStruct of the hash", out, want)

	// A field changed on the server shows in the next scan; a missing hash leaves the zero value.
	_, err = c.Do("HSET", p+"user:1", "nick", "countess", "age", 37)
	must(t, err, "HSET")
	vals, err = redis.Values(c.Do("HGETALL", p+"user:1"))
	must(t, err, "HGETALL")
	out = redigoUser{}
	must(t, redis.ScanStruct(vals, &out), "ScanStruct")
	eq(t, "Nick after HSET", out.Nick, "countess")
	eq(t, "Age after HSET", out.Age, 37)
	vals, err = redis.Values(c.Do("HGETALL", p+"user:none"))
	must(t, err, "HGETALL of a missing hash")
	out = redigoUser{}
	must(t, redis.ScanStruct(vals, &out), "ScanStruct of an empty reply")
	deq(t, "ScanStruct of a missing hash", out, redigoUser{})

	// HMGET of chosen fields, scanned into variables (a missing field is nil: left alone).
	vals, err = redis.Values(c.Do("HMGET", p+"user:1", "name", "score", "nope"))
	must(t, err, "HMGET")
	var name, nope string
	var score float64
	_, err = redis.Scan(vals, &name, &score, &nope)
	must(t, err, "Scan of HMGET")
	eq(t, "HMGET name", name, "Ada")
	eq(t, "HMGET score", score, 97.5)
	eq(t, "HMGET missing field", nope, "")

	// ScanSlice: rows from SORT ... BY nosort GET, the redigo documentation's pattern.
	for i, u := range []redigoUser{{Name: "Bob", Age: 20}, {Name: "Cy", Age: 30}, {Name: "Di", Age: 40}} {
		id := strconv.Itoa(i + 2)
		_, err := c.Do("HSET", redis.Args{}.Add(p+"user:"+id).AddFlat(&u)...)
		must(t, err, "HSET user "+id)
		_, err = c.Do("RPUSH", p+"ids", id)
		must(t, err, "RPUSH id")
	}
	vals, err = redis.Values(c.Do("SORT", p+"ids", "BY", "nosort", "GET", "#", "GET", p+"user:*->name", "GET", p+"user:*->age"))
	must(t, err, "SORT GET")
	type row struct {
		ID   int
		Name string `redis:"name"`
		Age  int    `redis:"age"`
	}
	var rows []row
	must(t, redis.ScanSlice(vals, &rows, "ID", "name", "age"), "ScanSlice")
	deq(t, "ScanSlice rows", rows, []row{{2, "Bob", 20}, {3, "Cy", 30}, {4, "Di", 40}})
	// Sorted by a hash field, descending, into pointers.
	vals, err = redis.Values(c.Do("SORT", p+"ids", "BY", p+"user:*->age", "DESC", "GET", p+"user:*->name", "GET", p+"user:*->age"))
	must(t, err, "SORT BY hash field")
	var ptrs []*row
	must(t, redis.ScanSlice(vals, &ptrs, "name", "age"), "ScanSlice into pointers")
	eq(t, "rows", len(ptrs), 3)
	deq(t, "rows sorted by age DESC", []row{*ptrs[0], *ptrs[1], *ptrs[2]}, []row{{0, "Di", 40}, {0, "Cy", 30}, {0, "Bob", 20}})
	// A plain slice of strings.
	var names []string
	vals, err = redis.Values(c.Do("SORT", p+"ids", "BY", "nosort", "GET", p+"user:*->name"))
	must(t, err, "SORT GET name")
	must(t, redis.ScanSlice(vals, &names), "ScanSlice into strings")
	deq(t, "names", names, []string{"Bob", "Cy", "Di"})
}

// TestRedigoPipeline: 1000 commands sent with Send, one Flush, 1000 replies read in order with
// Receive (an error in its place among them), and Do("") reading every pending reply.
func TestRedigoPipeline(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	const count = 1000
	for i := range count {
		if i == 500 {
			must(t, c.Send("LPUSH", p+"counter", "x"), "Send LPUSH") // WRONGTYPE, in its place
			continue
		}
		must(t, c.Send("INCRBY", p+"counter", i), "Send INCRBY")
	}
	must(t, c.Flush(), "Flush")
	sum := int64(0)
	for i := range count {
		r, err := c.Receive()
		if i == 500 {
			redigoErr(t, "reply 500", err, "WRONGTYPE Operation against a key holding the wrong kind of value")
			continue
		}
		sum += int64(i)
		n, err := redis.Int64(r, err)
		must(t, err, fmt.Sprintf("reply %d", i))
		if n != sum {
			t.Fatalf("reply %d: %d, want %d", i, n, sum)
		}
	}
	total, err := redis.Int64(c.Do("GET", p+"counter"))
	must(t, err, "GET counter")
	eq(t, "counter after the pipeline", total, int64(count*(count-1)/2-500))

	// 1000 SETs, then Do("") flushes and returns all their replies.
	for i := range count {
		must(t, c.Send("SET", fmt.Sprintf("%sk:%d", p, i), i*i), "Send SET")
	}
	replies, err := redis.Values(c.Do(""))
	must(t, err, `Do("")`)
	eq(t, `replies from Do("")`, len(replies), count)
	for i, r := range replies {
		if r != "OK" {
			t.Fatalf("SET reply %d: %#v", i, r)
		}
	}
	args := redis.Args{}
	for i := range count {
		args = args.Add(fmt.Sprintf("%sk:%d", p, i))
	}
	got, err := redis.Int64s(c.Do("MGET", args...))
	must(t, err, "MGET")
	for i, v := range got {
		if v != int64(i*i) {
			t.Fatalf("MGET %d: %d, want %d", i, v, i*i)
		}
	}

	// Do with replies pending reads them first: it returns its own reply and the first error.
	_, err = c.Do("SET", p+"text", "abc")
	must(t, err, "SET")
	must(t, c.Send("GET", p+"k:3"), "Send GET")
	must(t, c.Send("INCR", p+"text"), "Send INCR of a non-number")
	must(t, c.Send("HSET", p+"counter", "f", "v"), "Send HSET on a string")
	r, err := c.Do("GET", p+"k:7")
	redigoErr(t, "Do after failing pending commands", err, "ERR value is not an integer or out of range")
	deq(t, "Do's own reply", r, any([]byte("49")))
	eq(t, "Err() after pipelined errors", c.Err(), nil)
}

// TestRedigoTransactions: MULTI/EXEC through Send+Do("EXEC") (errors inside EXEC's array, an
// EXECABORT), WATCH aborting EXEC with a nil reply after another connection's write, WATCHed
// increments from 10 goroutines retried until all count, and a pooled connection's Close sending
// UNWATCH/DISCARD.
func TestRedigoTransactions(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	k := p + "k"

	must(t, c.Send("MULTI"), "Send MULTI")
	must(t, c.Send("INCR", k), "Send INCR")
	must(t, c.Send("INCR", k), "Send INCR")
	must(t, c.Send("LPUSH", k, "x"), "Send LPUSH")
	must(t, c.Send("GET", k), "Send GET")
	vals, err := redis.Values(c.Do("EXEC"))
	must(t, err, "EXEC")
	deq(t, "EXEC replies", vals, []any{int64(1), int64(2),
		redis.Error("WRONGTYPE Operation against a key holding the wrong kind of value"), []byte("2")})

	// A command refused while queueing aborts the whole transaction.
	must(t, c.Send("MULTI"), "Send MULTI")
	must(t, c.Send("INCR", k), "Send INCR")
	must(t, c.Send("GET"), "Send GET with no key")
	r, err := c.Do("EXEC")
	redigoErr(t, "first error of the aborted transaction", err, "ERR wrong number of arguments for 'get' command")
	deq(t, "EXEC reply", r, any(redis.Error("EXECABORT Transaction discarded because of previous errors.")))
	n, err := redis.Int(c.Do("GET", k))
	must(t, err, "GET")
	eq(t, "value after EXECABORT", n, 2)

	// WATCH: another connection's write between WATCH and EXEC aborts it with a nil reply.
	other := redigoDial(t)
	_, err = c.Do("WATCH", k)
	must(t, err, "WATCH")
	n, err = redis.Int(c.Do("GET", k))
	must(t, err, "GET")
	_, err = other.Do("SET", k, 100)
	must(t, err, "SET by another connection")
	must(t, c.Send("MULTI"), "Send MULTI")
	must(t, c.Send("SET", k, n+1), "Send SET")
	r, err = c.Do("EXEC")
	must(t, err, "EXEC after the watched key changed")
	if r != nil {
		t.Fatalf("EXEC after the watched key changed: %#v, want nil", r)
	}
	_, err = redis.Values(r, err)
	eq(t, "Values of the aborted EXEC", err, redis.ErrNil)
	n, err = redis.Int(c.Do("GET", k))
	must(t, err, "GET")
	eq(t, "value after the aborted EXEC", n, 100)
	// Unchanged: EXEC runs. Changed then UNWATCHed: EXEC runs too.
	_, err = c.Do("WATCH", k)
	must(t, err, "WATCH")
	must(t, c.Send("MULTI"), "Send MULTI")
	must(t, c.Send("INCR", k), "Send INCR")
	vals, err = redis.Values(c.Do("EXEC"))
	must(t, err, "EXEC with the watched key unchanged")
	deq(t, "EXEC replies", vals, []any{int64(101)})
	_, err = c.Do("WATCH", k)
	must(t, err, "WATCH")
	_, err = other.Do("INCR", k)
	must(t, err, "INCR by another connection")
	_, err = c.Do("UNWATCH")
	must(t, err, "UNWATCH")
	must(t, c.Send("MULTI"), "Send MULTI")
	must(t, c.Send("INCR", k), "Send INCR")
	vals, err = redis.Values(c.Do("EXEC"))
	must(t, err, "EXEC after UNWATCH")
	deq(t, "EXEC replies after UNWATCH", vals, []any{int64(103)})

	// Optimistic locking from 10 goroutines on a pool: GET, then SET in MULTI, retried on nil.
	pool := redigoPool(t, &redis.Pool{MaxIdle: 10, MaxActive: 10, Wait: true})
	const workers, rounds = 10, 20
	var retries atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			conn := pool.Get()
			defer conn.Close()
			for i := 0; i < rounds; {
				if _, err := conn.Do("WATCH", p+"cas"); err != nil {
					errs <- fmt.Errorf("worker %d: WATCH: %w", w, err)
					return
				}
				v, err := redis.Int(conn.Do("GET", p+"cas"))
				if err != nil && err != redis.ErrNil {
					errs <- fmt.Errorf("worker %d: GET: %w", w, err)
					return
				}
				conn.Send("MULTI")
				conn.Send("SET", p+"cas", v+1)
				r, err := conn.Do("EXEC")
				if err != nil {
					errs <- fmt.Errorf("worker %d: EXEC: %w", w, err)
					return
				}
				if r == nil {
					retries.Add(1)
					continue
				}
				i++
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n, err = redis.Int(c.Do("GET", p+"cas"))
	must(t, err, "GET cas")
	eq(t, "increments under WATCH from 10 goroutines", n, workers*rounds)
	t.Logf("%d EXECs aborted and retried", retries.Load())

	// A pooled connection closed while WATCHing sends UNWATCH: its next user's EXEC runs.
	one := redigoPool(t, &redis.Pool{MaxIdle: 1})
	pc := one.Get()
	id, err := redis.Int64(pc.Do("CLIENT", "ID"))
	must(t, err, "CLIENT ID")
	_, err = pc.Do("WATCH", k)
	must(t, err, "WATCH")
	must(t, pc.Close(), "Close while watching")
	_, err = other.Do("SET", k, "changed")
	must(t, err, "SET by another connection")
	pc = one.Get()
	id2, err := redis.Int64(pc.Do("CLIENT", "ID"))
	must(t, err, "CLIENT ID")
	eq(t, "the same pooled connection", id2, id)
	pc.Send("MULTI")
	pc.Send("SET", k, "mine")
	vals, err = redis.Values(pc.Do("EXEC"))
	must(t, err, "EXEC on the reused connection")
	deq(t, "EXEC on the reused connection", vals, []any{"OK"})
	// Closed inside MULTI: DISCARD, so the queued command never runs and the next user is not
	// in a transaction.
	pc.Send("MULTI")
	pc.Send("SET", k, "discarded")
	must(t, pc.Flush(), "Flush")
	must(t, pc.Close(), "Close inside MULTI")
	pc = one.Get()
	defer pc.Close()
	s, err := redis.String(pc.Do("GET", k))
	must(t, err, "GET on the reused connection")
	eq(t, "value after a discarded transaction", s, "mine")
}

// TestRedigoScript: NewScript's Do sends EVALSHA and falls back to EVAL on NOSCRIPT (after
// SCRIPT FLUSH too), KeyCount splitting KEYS from ARGV, Load with SendHash in a pipeline, Send in
// MULTI, and script errors as redis.Error.
func TestRedigoScript(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	_, err := c.Do("SCRIPT", "FLUSH")
	must(t, err, "SCRIPT FLUSH")
	t.Cleanup(func() {
		cc, err := redis.Dial("tcp", srv.addr)
		if err == nil {
			_, _ = cc.Do("SCRIPT", "FLUSH")
			cc.Close()
		}
	})
	incr := redis.NewScript(1, "return redis.call('INCRBY', KEYS[1], ARGV[1])")
	exists := func() int {
		t.Helper()
		e, err := redis.Ints(c.Do("SCRIPT", "EXISTS", incr.Hash()))
		must(t, err, "SCRIPT EXISTS")
		return e[0]
	}
	eq(t, "SCRIPT EXISTS before", exists(), 0)
	evalsha0, eval0 := redigoCalls(t, c, "evalsha"), redigoCalls(t, c, "eval")
	calls := func(what string, evalsha, eval int) {
		t.Helper()
		eq(t, what+": EVALSHA calls", redigoCalls(t, c, "evalsha")-evalsha0, evalsha)
		eq(t, what+": EVAL calls", redigoCalls(t, c, "eval")-eval0, eval)
	}

	n, err := redis.Int(incr.Do(c, p+"n", 5))
	must(t, err, "first Do")
	eq(t, "first Do", n, 5)
	calls("first Do (NOSCRIPT, then EVAL)", 1, 1)
	eq(t, "SCRIPT EXISTS after EVAL", exists(), 1)
	n, err = redis.Int(incr.Do(c, p+"n", 2))
	must(t, err, "second Do")
	eq(t, "second Do", n, 7)
	calls("second Do (EVALSHA only)", 2, 1)
	ok, err := redis.String(c.Do("SCRIPT", "FLUSH"))
	must(t, err, "SCRIPT FLUSH")
	eq(t, "SCRIPT FLUSH", ok, "OK")
	eq(t, "SCRIPT EXISTS after SCRIPT FLUSH", exists(), 0)
	_, err = c.Do("EVALSHA", incr.Hash(), 1, p+"n", 1)
	redigoErr(t, "EVALSHA after SCRIPT FLUSH", err, "NOSCRIPT No matching script. Please use EVAL.")
	n, err = redis.Int(incr.Do(c, p+"n", 3))
	must(t, err, "Do after SCRIPT FLUSH")
	eq(t, "Do after SCRIPT FLUSH", n, 10)
	calls("Do after SCRIPT FLUSH (NOSCRIPT twice, then EVAL)", 4, 2)

	// KeyCount: 2 keys then arguments; -1: the caller passes the count first.
	two := redis.NewScript(2, "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}")
	vals, err := redis.Values(two.Do(c, p+"a", p+"b", "x", "y"))
	must(t, err, "two-key script")
	deq(t, "two-key script", vals, []any{[]byte(p + "a"), []byte(p + "b"), []byte("x"), []byte("y"), int64(2), int64(2)})
	own := redis.NewScript(-1, "return #KEYS .. ':' .. #ARGV")
	s, err := redis.String(own.Do(c, 1, p+"a", "x", "y", "z"))
	must(t, err, "script with the key count as first argument")
	eq(t, "KEYS:ARGV with a count of 1", s, "1:3")
	s, err = redis.String(own.Do(c, 3, p+"a", p+"b", p+"c"))
	must(t, err, "script with the key count as first argument")
	eq(t, "KEYS:ARGV with a count of 3", s, "3:0")

	// Load, then SendHash (EVALSHA without fallback) in a pipeline of 10.
	must(t, incr.Load(c), "Load")
	eq(t, "SCRIPT EXISTS after Load", exists(), 1)
	for range 10 {
		must(t, incr.SendHash(c, p+"piped", 1), "SendHash")
	}
	must(t, c.Flush(), "Flush")
	for i := 1; i <= 10; i++ {
		n, err := redis.Int(c.Receive())
		must(t, err, "pipelined EVALSHA")
		eq(t, "pipelined EVALSHA", n, i)
	}
	// Send (EVAL) inside MULTI.
	c.Send("MULTI")
	must(t, incr.Send(c, p+"tx", 3), "Send")
	must(t, incr.SendHash(c, p+"tx", 4), "SendHash")
	vals, err = redis.Values(c.Do("EXEC"))
	must(t, err, "EXEC of scripts")
	deq(t, "EXEC of scripts", vals, []any{int64(3), int64(7)})

	// Errors from scripts reach the caller as redis.Error.
	_, err = redis.NewScript(0, "return redis.error_reply('MYERR custom failure')").Do(c)
	redigoErr(t, "error_reply", err, "MYERR custom failure")
	_, err = c.Do("SET", p+"str", "v")
	must(t, err, "SET")
	wrong := redis.NewScript(1, "return redis.call('LPUSH', KEYS[1], 'x')")
	_, err = wrong.Do(c, p+"str")
	redigoErr(t, "redis.call on the wrong type", err,
		"WRONGTYPE Operation against a key holding the wrong kind of value script: "+wrong.Hash()+", on @user_script:1.")
	status := redis.NewScript(0, "return redis.status_reply('FINE')")
	s, err = redis.String(status.Do(c))
	must(t, err, "status_reply")
	eq(t, "status_reply", s, "FINE")
	_, err = redis.String(redis.NewScript(0, "return nil").Do(c))
	eq(t, "a script returning nil", err, redis.ErrNil)
	eq(t, "Err() after script errors", c.Err(), nil)
}

// TestRedigoPubSub: PubSubConn with Subscribe and PSubscribe, Subscription, Message and Pong
// values from ReceiveWithTimeout, binary and ordered payloads, Unsubscribe/PUnsubscribe leaving
// subscribed mode, a receive timing out on a quiet channel, and a pooled PubSubConn's Close
// unsubscribing before the connection goes back to the pool.
func TestRedigoPubSub(t *testing.T) {
	p := redigoPrefix(t)
	ch, pat := p+"news", p+"user.*"
	psc := redis.PubSubConn{Conn: redigoDial(t)}
	pub := redigoDial(t)
	recv := func() any {
		t.Helper()
		m := psc.ReceiveWithTimeout(5 * time.Second)
		if err, ok := m.(error); ok {
			t.Fatalf("ReceiveWithTimeout: %v", err)
		}
		return m
	}
	publish := func(channel string, data any, receivers int) {
		t.Helper()
		n, err := redis.Int(pub.Do("PUBLISH", channel, data))
		must(t, err, "PUBLISH")
		eq(t, "PUBLISH's receiver count on "+channel, n, receivers)
	}

	must(t, psc.Subscribe(ch), "Subscribe")
	deq(t, "SUBSCRIBE confirmation", recv(), redis.Subscription{Kind: "subscribe", Channel: ch, Count: 1})
	must(t, psc.PSubscribe(pat), "PSubscribe")
	deq(t, "PSUBSCRIBE confirmation", recv(), redis.Subscription{Kind: "psubscribe", Channel: pat, Count: 2})
	vals, err := redis.Values(pub.Do("PUBSUB", "NUMSUB", ch))
	must(t, err, "PUBSUB NUMSUB")
	deq(t, "PUBSUB NUMSUB", vals, []any{[]byte(ch), int64(1)})

	publish(ch, "hello", 1)
	deq(t, "channel message", recv(), redis.Message{Channel: ch, Data: []byte("hello")})
	publish(p+"user.7", "u7", 1)
	deq(t, "pattern message", recv(), redis.Message{Channel: p + "user.7", Pattern: pat, Data: []byte("u7")})
	publish(p+"users.7", "nobody", 0)
	must(t, psc.Ping("alive"), "Ping")
	deq(t, "PING while subscribed", recv(), redis.Pong{Data: "alive"})

	// Binary payloads arrive intact; messages arrive in publish order.
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	publish(ch, all, 1)
	deq(t, "binary message", recv(), redis.Message{Channel: ch, Data: all})
	for i := range 200 {
		if i%2 == 0 {
			publish(ch, i, 1)
		} else {
			publish(p+"user.x", i, 1)
		}
	}
	for i := range 200 {
		want := redis.Message{Channel: ch, Data: []byte(strconv.Itoa(i))}
		if i%2 == 1 {
			want = redis.Message{Channel: p + "user.x", Pattern: pat, Data: []byte(strconv.Itoa(i))}
		}
		deq(t, fmt.Sprintf("message %d", i), recv(), want)
	}

	must(t, psc.Unsubscribe(ch), "Unsubscribe")
	deq(t, "UNSUBSCRIBE confirmation", recv(), redis.Subscription{Kind: "unsubscribe", Channel: ch, Count: 1})
	publish(ch, "lost", 0)
	publish(p+"user.1", "kept", 1)
	deq(t, "pattern message after UNSUBSCRIBE", recv(), redis.Message{Channel: p + "user.1", Pattern: pat, Data: []byte("kept")})
	must(t, psc.PUnsubscribe(), "PUnsubscribe from all")
	deq(t, "PUNSUBSCRIBE confirmation", recv(), redis.Subscription{Kind: "punsubscribe", Channel: pat, Count: 0})
	publish(p+"user.1", "lost", 0)
	// Out of subscribed mode: ordinary commands and their replies again.
	pong, err := redis.String(psc.Conn.Do("PING"))
	must(t, err, "PING after unsubscribing from everything")
	eq(t, "PING after unsubscribing from everything", pong, "PONG")
	_, err = psc.Conn.Do("SET", p+"k", "v")
	must(t, err, "SET after unsubscribing")

	// Nothing published: the receive times out (and redigo closes the connection).
	quiet := redis.PubSubConn{Conn: redigoDial(t)}
	must(t, quiet.Subscribe(p+"quiet"), "Subscribe")
	deq(t, "SUBSCRIBE confirmation", quiet.ReceiveWithTimeout(5*time.Second),
		redis.Subscription{Kind: "subscribe", Channel: p + "quiet", Count: 1})
	m := quiet.ReceiveWithTimeout(100 * time.Millisecond)
	err, _ = m.(error)
	isTimeout(t, "ReceiveWithTimeout on a quiet channel", err)

	// A pooled connection used for pub/sub: Close unsubscribes (UNSUBSCRIBE, PUNSUBSCRIBE and
	// an ECHO to find the end of the stream) and returns a clean connection to the pool.
	pool := redigoPool(t, &redis.Pool{MaxIdle: 1})
	pc := pool.Get()
	id, err := redis.Int64(pc.Do("CLIENT", "ID"))
	must(t, err, "CLIENT ID")
	pooled := redis.PubSubConn{Conn: pc}
	must(t, pooled.Subscribe(p+"pooled"), "Subscribe")
	must(t, pooled.PSubscribe(p+"pooled.*"), "PSubscribe")
	deq(t, "SUBSCRIBE confirmation", pooled.ReceiveWithTimeout(5*time.Second), redis.Subscription{Kind: "subscribe", Channel: p + "pooled", Count: 1})
	deq(t, "PSUBSCRIBE confirmation", pooled.ReceiveWithTimeout(5*time.Second), redis.Subscription{Kind: "psubscribe", Channel: p + "pooled.*", Count: 2})
	publish(p+"pooled", "unread", 1)
	must(t, pooled.Close(), "Close of the pooled PubSubConn")
	eq(t, "IdleCount after closing the pooled subscriber", pool.IdleCount(), 1)
	publish(p+"pooled", "after close", 0)
	publish(p+"pooled.x", "after close", 0)
	pc = pool.Get()
	defer pc.Close()
	id2, err := redis.Int64(pc.Do("CLIENT", "ID"))
	must(t, err, "CLIENT ID on the reused connection")
	eq(t, "the same pooled connection", id2, id)
	_, err = pc.Do("SET", p+"k2", "v")
	must(t, err, "SET on the reused connection")
	v, err := redis.String(pc.Do("GET", p+"k2"))
	must(t, err, "GET on the reused connection")
	eq(t, "GET on the reused connection", v, "v")
}

// TestRedigoBlockingPop: BLPOP in one goroutine woken by another connection's RPUSH, BLPOP's
// timeout as a nil reply, and three waiters served in the order they blocked.
func TestRedigoBlockingPop(t *testing.T) {
	p := redigoPrefix(t)
	admin := redigoDial(t)
	type result struct {
		vals []string
		err  error
	}

	// Already there: BLPOP returns at once with the key it came from.
	_, err := admin.Do("RPUSH", p+"q2", "ready")
	must(t, err, "RPUSH")
	got, err := redis.Strings(admin.Do("BLPOP", p+"q1", p+"q2", 5))
	must(t, err, "BLPOP of a waiting element")
	deq(t, "BLPOP of a waiting element", got, []string{p + "q2", "ready"})
	// Nothing there: the server's nil after the timeout is ErrNil.
	_, err = redis.Strings(admin.Do("BLPOP", p+"q1", p+"q2", "0.2"))
	eq(t, "BLPOP timing out", err, redis.ErrNil)

	name := redigoName("blpop")
	waiter := redigoDial(t, redis.DialClientName(name))
	done := make(chan result, 1)
	go func() {
		v, err := redis.Strings(waiter.Do("BLPOP", p+"q1", p+"q2", 30))
		done <- result{v, err}
	}()
	waitFor(t, 5*time.Second, "BLPOP to block", func() bool { return redigoBlocked(t, admin, name, "blpop") })
	n, err := redis.Int(admin.Do("RPUSH", p+"q2", "x", "y"))
	must(t, err, "RPUSH to a blocked key")
	eq(t, "RPUSH's length", n, 2)
	select {
	case r := <-done:
		must(t, r.err, "woken BLPOP")
		deq(t, "woken BLPOP", r.vals, []string{p + "q2", "x"})
	case <-time.After(10 * time.Second):
		t.Fatal("BLPOP was not woken by RPUSH")
	}
	rest, err := redis.Strings(admin.Do("LRANGE", p+"q2", 0, -1))
	must(t, err, "LRANGE")
	deq(t, "list after the woken BLPOP", rest, []string{"y"})

	// Three waiters on one list, each blocked before the next: served first come, first served.
	var chans []chan result
	for i := range 3 {
		wname := redigoName(fmt.Sprintf("fifo%d", i))
		w := redigoDial(t, redis.DialClientName(wname))
		c := make(chan result, 1)
		chans = append(chans, c)
		go func() {
			v, err := redis.Strings(w.Do("BLPOP", p+"fifo", 30))
			c <- result{v, err}
		}()
		waitFor(t, 5*time.Second, "waiter "+strconv.Itoa(i)+" to block", func() bool { return redigoBlocked(t, admin, wname, "blpop") })
	}
	_, err = admin.Do("RPUSH", p+"fifo", "a", "b", "c")
	must(t, err, "RPUSH three elements")
	for i, c := range chans {
		select {
		case r := <-c:
			must(t, r.err, "BLPOP of waiter "+strconv.Itoa(i))
			deq(t, "BLPOP of waiter "+strconv.Itoa(i), r.vals, []string{p + "fifo", string(rune('a' + i))})
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d was not served", i)
		}
	}
	n, err = redis.Int(admin.Do("EXISTS", p+"fifo"))
	must(t, err, "EXISTS")
	eq(t, "the list emptied by the waiters is gone", n, 0)
}

// TestRedigoScan: SCAN MATCH COUNT to completion over 1000 keys among others, every key found,
// and HSCAN over a 500-field hash.
func TestRedigoScan(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	want := map[string]bool{}
	for i := range 1000 {
		k := fmt.Sprintf("%sk:%d", p, i)
		want[k] = true
		must(t, c.Send("SET", k, i), "Send SET")
	}
	for i := range 200 {
		must(t, c.Send("SET", fmt.Sprintf("%sother:%d", p, i), i), "Send SET")
	}
	_, err := c.Do("")
	must(t, err, "pipelined SETs")

	seen := map[string]int{}
	cursor, calls := 0, 0
	for {
		vals, err := redis.Values(c.Do("SCAN", cursor, "MATCH", p+"k:*", "COUNT", 100))
		must(t, err, "SCAN")
		var keys []string
		_, err = redis.Scan(vals, &cursor, &keys)
		must(t, err, "Scan of the SCAN reply")
		calls++
		for _, k := range keys {
			if !want[k] {
				t.Fatalf("SCAN MATCH %sk:* returned %q", p, k)
			}
			seen[k]++
		}
		if cursor == 0 {
			break
		}
		if calls > 10000 {
			t.Fatal("SCAN did not come back to cursor 0")
		}
	}
	eq(t, "distinct keys found by SCAN", len(seen), 1000)
	t.Logf("SCAN took %d calls", calls)
	// The same iteration through TYPE string finds them too (and nothing of another type).
	_, err = c.Do("RPUSH", p+"k:list", "x")
	must(t, err, "RPUSH")
	found := 0
	for cursor = 0; ; {
		vals, err := redis.Values(c.Do("SCAN", cursor, "MATCH", p+"k:*", "COUNT", 100, "TYPE", "string"))
		must(t, err, "SCAN TYPE")
		var keys []string
		_, err = redis.Scan(vals, &cursor, &keys)
		must(t, err, "Scan of the SCAN TYPE reply")
		for _, k := range keys {
			if k == p+"k:list" {
				t.Fatal("SCAN TYPE string returned a list")
			}
		}
		found += len(keys)
		if cursor == 0 {
			break
		}
	}
	if found < 1000 {
		t.Fatalf("SCAN TYPE string found %d keys, want all 1000", found)
	}

	// HSCAN over a hash too big for the listpack encoding.
	args := redis.Args{}.Add(p + "h")
	for i := range 500 {
		args = args.Add(fmt.Sprintf("f:%d", i), i)
	}
	_, err = c.Do("HSET", args...)
	must(t, err, "HSET 500 fields")
	fields := map[string]string{}
	for cursor = 0; ; {
		vals, err := redis.Values(c.Do("HSCAN", p+"h", cursor, "MATCH", "f:1*", "COUNT", 50))
		must(t, err, "HSCAN")
		var pairs map[string]string
		cursor, err = redis.Int(vals[0], nil)
		must(t, err, "HSCAN cursor")
		pairs, err = redis.StringMap(vals[1], nil)
		must(t, err, "HSCAN pairs")
		for f, v := range pairs {
			if !strings.HasPrefix(f, "f:1") || v != f[2:] {
				t.Fatalf("HSCAN MATCH f:1* returned %q=%q", f, v)
			}
			fields[f] = v
		}
		if cursor == 0 {
			break
		}
	}
	eq(t, "fields matching f:1* (1, 10-19, 100-199)", len(fields), 111)
}

// TestRedigoTimeouts: a connection opened with DialReadTimeout fails a slower reply with a
// network timeout (and the server drops the abandoned BLPOP, which consumes nothing);
// DoWithTimeout and ReceiveWithTimeout lengthen the wait for one call.
func TestRedigoTimeouts(t *testing.T) {
	p := redigoPrefix(t)
	admin := redigoDial(t)
	const short = 200 * time.Millisecond

	name := redigoName("timeout")
	c := redigoDial(t, redis.DialReadTimeout(short), redis.DialClientName(name))
	pong, err := redis.String(c.Do("PING"))
	must(t, err, "PING")
	eq(t, "PING", pong, "PONG")
	_, err = c.Do("BLPOP", p+"never", 0)
	isTimeout(t, "BLPOP 0 past the read timeout", err)
	if c.Err() == nil {
		t.Fatal("Err() is nil after a read timeout")
	}
	// redigo closed the connection: the server drops the client and its BLPOP, so a later push
	// stays in the list.
	waitFor(t, 5*time.Second, "the server to drop the timed-out client", func() bool {
		return redigoNamed(t, admin, name) == 0
	})
	_, err = admin.Do("RPUSH", p+"never", "kept")
	must(t, err, "RPUSH")
	l, err := redis.Strings(admin.Do("LRANGE", p+"never", 0, -1))
	must(t, err, "LRANGE")
	deq(t, "list after the abandoned BLPOP", l, []string{"kept"})

	// DoWithTimeout: this call waits 5 s; BLPOP's own 0.5 s timeout ends it with a nil reply.
	c2 := redigoDial(t, redis.DialReadTimeout(short))
	r, err := redis.DoWithTimeout(c2, 5*time.Second, "BLPOP", p+"empty", "0.5")
	must(t, err, "DoWithTimeout BLPOP 0.5")
	if r != nil {
		t.Fatalf("DoWithTimeout BLPOP 0.5: %#v, want nil", r)
	}
	// The connection's own read timeout applies again to the next Do.
	_, err = c2.Do("BLPOP", p+"empty", "0.5")
	isTimeout(t, "Do BLPOP 0.5 after DoWithTimeout", err)

	// DoWithTimeout woken by another connection's push.
	name3 := redigoName("timeout3")
	c3 := redigoDial(t, redis.DialReadTimeout(short), redis.DialClientName(name3))
	done := make(chan []string, 1)
	errc := make(chan error, 1)
	go func() {
		v, err := redis.Strings(redis.DoWithTimeout(c3, 30*time.Second, "BLPOP", p+"wake", 0))
		if err != nil {
			errc <- err
			return
		}
		done <- v
	}()
	waitFor(t, 5*time.Second, "BLPOP to block", func() bool { return redigoBlocked(t, admin, name3, "blpop") })
	_, err = admin.Do("RPUSH", p+"wake", "up")
	must(t, err, "RPUSH")
	select {
	case v := <-done:
		deq(t, "DoWithTimeout BLPOP woken", v, []string{p + "wake", "up"})
	case err := <-errc:
		t.Fatalf("DoWithTimeout BLPOP: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("DoWithTimeout BLPOP was not woken")
	}

	// ReceiveWithTimeout: Send, Flush, then a longer wait for this one reply.
	must(t, c3.Send("BLPOP", p+"empty", "0.5"), "Send BLPOP")
	must(t, c3.Flush(), "Flush")
	r, err = redis.ReceiveWithTimeout(c3, 5*time.Second)
	must(t, err, "ReceiveWithTimeout BLPOP 0.5")
	if r != nil {
		t.Fatalf("ReceiveWithTimeout BLPOP 0.5: %#v, want nil", r)
	}
	must(t, c3.Send("BLPOP", p+"wake", 0), "Send BLPOP")
	must(t, c3.Flush(), "Flush")
	waitFor(t, 5*time.Second, "the sent BLPOP to block", func() bool { return redigoBlocked(t, admin, name3, "blpop") })
	_, err = admin.Do("RPUSH", p+"wake", "again")
	must(t, err, "RPUSH")
	v, err := redis.Strings(redis.ReceiveWithTimeout(c3, 30*time.Second))
	must(t, err, "ReceiveWithTimeout BLPOP woken")
	deq(t, "ReceiveWithTimeout BLPOP woken", v, []string{p + "wake", "again"})

	// A pooled connection supports DoWithTimeout as well.
	pool := redigoPool(t, &redis.Pool{MaxIdle: 1, Dial: func() (redis.Conn, error) {
		return redis.Dial("tcp", srv.addr, redis.DialReadTimeout(short))
	}})
	pc := pool.Get()
	defer pc.Close()
	r, err = redis.DoWithTimeout(pc, 5*time.Second, "BLPOP", p+"empty", "0.5")
	must(t, err, "DoWithTimeout on a pooled connection")
	if r != nil {
		t.Fatalf("DoWithTimeout on a pooled connection: %#v, want nil", r)
	}
}

// TestRedigoBinarySafe: bytes 0..255 as values, keys, hash fields, list elements, set members,
// Lua arguments and a 1 MiB value, all coming back byte for byte.
func TestRedigoBinarySafe(t *testing.T) {
	p := redigoPrefix(t)
	c := redigoDial(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	bytesOf := func(r any, err error) []byte {
		t.Helper()
		b, err := redis.Bytes(r, err)
		must(t, err, "reply as Bytes")
		return b
	}

	_, err := c.Do("SET", p+"v", all)
	must(t, err, "SET")
	deq(t, "GET", bytesOf(c.Do("GET", p+"v")), all)
	n, err := redis.Int(c.Do("STRLEN", p+"v"))
	must(t, err, "STRLEN")
	eq(t, "STRLEN", n, 256)
	deq(t, "GETRANGE", bytesOf(c.Do("GETRANGE", p+"v", 250, 255)), all[250:])
	n, err = redis.Int(c.Do("APPEND", p+"v", all))
	must(t, err, "APPEND")
	eq(t, "APPEND", n, 512)
	deq(t, "GET after APPEND", bytesOf(c.Do("GET", p+"v")), slices.Concat(all, all))

	// A key made of every byte value.
	bkey := append([]byte(p+"key:"), all...)
	_, err = c.Do("SET", bkey, "binary key")
	must(t, err, "SET with a binary key")
	deq(t, "GET of the binary key", bytesOf(c.Do("GET", bkey)), []byte("binary key"))
	keys := redigoScanAll(t, c, p+"key:*")
	deq(t, "SCAN finds the binary key", keys, []string{string(bkey)})
	n, err = redis.Int(c.Do("EXISTS", append([]byte(p+"key:"), all[:255]...)))
	must(t, err, "EXISTS")
	eq(t, "EXISTS of the key one byte short", n, 0)

	// Hash fields and values, list elements (each single byte), set members.
	_, err = c.Do("HSET", p+"h", all, all, "\x00", "\r\n")
	must(t, err, "HSET")
	deq(t, "HGET of a binary field", bytesOf(c.Do("HGET", p+"h", all)), all)
	deq(t, "HGET of a NUL field", bytesOf(c.Do("HGET", p+"h", []byte{0})), []byte("\r\n"))
	args := redis.Args{}.Add(p + "l")
	for i := range 256 {
		args = args.Add([]byte{byte(i)})
	}
	_, err = c.Do("RPUSH", args...)
	must(t, err, "RPUSH 256 single bytes")
	elems, err := redis.ByteSlices(c.Do("LRANGE", p+"l", 0, -1))
	must(t, err, "LRANGE")
	eq(t, "LRANGE length", len(elems), 256)
	for i, e := range elems {
		if !bytes.Equal(e, []byte{byte(i)}) {
			t.Fatalf("element %d: %q", i, e)
		}
	}
	_, err = c.Do("SADD", p+"s", all, []byte{})
	must(t, err, "SADD")
	member, err := redis.Bool(c.Do("SISMEMBER", p+"s", all))
	must(t, err, "SISMEMBER")
	eq(t, "SISMEMBER of the binary member", member, true)
	member, err = redis.Bool(c.Do("SISMEMBER", p+"s", []byte{}))
	must(t, err, "SISMEMBER")
	eq(t, "SISMEMBER of the empty member", member, true)

	// Through Lua: ARGV in, bulk string out.
	echo := redis.NewScript(0, "return ARGV[1] .. ARGV[2]")
	deq(t, "Lua concatenation", bytesOf(echo.Do(c, all, []byte{0, 0})), append(slices.Clone(all), 0, 0))
	rev := redis.NewScript(1, "return string.reverse(redis.call('GET', KEYS[1]))")
	want := slices.Concat(all, all)
	slices.Reverse(want)
	deq(t, "Lua string.reverse of the value", bytesOf(rev.Do(c, p+"v")), want)

	// 1 MiB of every byte value.
	big := bytes.Repeat(all, 4096)
	_, err = c.Do("SET", p+"big", big)
	must(t, err, "SET 1 MiB")
	got := bytesOf(c.Do("GET", p+"big"))
	if !bytes.Equal(got, big) {
		t.Fatalf("GET 1 MiB: %d bytes back, differing", len(got))
	}
}
