// Starts one goblin-core process for the test binary (TestMain) on a free loopback port, and
// hands each test a go-redis client on an empty keyspace. The binary is $GOBLIN_CORE_BIN, else
// $CARGO_TARGET_DIR/debug/goblin-core, else ~/.cache/goblin-target/debug/goblin-core.
//
// CLIENTS_REFERENCE=redis starts Debian's redis-server instead, to tell a wrong test from a
// goblin-core bug.
package goredis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var reference = os.Getenv("CLIENTS_REFERENCE") == "redis"

// srv is the one server of this test binary, started by TestMain.
var srv *server

type server struct {
	addr    string
	proc    *exec.Cmd
	exited  chan struct{} // closed when the process has exited; then waitErr is set
	waitErr error
	logPath string
	dir     string
}

func goblinCoreBin() string {
	if bin := os.Getenv("GOBLIN_CORE_BIN"); bin != "" {
		return bin
	}
	target := os.Getenv("CARGO_TARGET_DIR")
	if target == "" {
		home, _ := os.UserHomeDir()
		target = filepath.Join(home, ".cache", "goblin-target")
	}
	return filepath.Join(target, "debug", "goblin-core")
}

// freePort asks the OS for a free loopback port: goblin-core treats --port 0 as "no TCP" (like
// Redis) and cannot report a port it chose, so we pick one and hand it over.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pingOnce speaks raw RESP so that readiness does not depend on the client under test.
func pingOnce(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}

// startServer starts a server with `extra` arguments after the defaults.
func startServer(extra ...string) (*server, error) {
	bin := goblinCoreBin()
	if reference {
		bin = "redis-server"
	} else if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("goblin-core not found at %s; run cargo build -p goblin-core", bin)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// redis-server in cluster mode needs its port + 10000 (the cluster bus) to be a port too.
	for len(extra) > 0 && extra[0] == "--cluster-enabled" && port > 55535 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "goblin-go-")
	if err != nil {
		return nil, err
	}
	// Its files in the test's own folder: without --dir the server would load and write
	// dump.rdb in the suite's folder, from one test to the next.
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--loglevel", "warn", "--save", "", "--dir", dir}
	if reference {
		args = []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--loglevel", "warning",
			"--save", "", "--appendonly", "no", "--dir", dir}
	}
	args = append(args, extra...)
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{}),
		logPath: filepath.Join(dir, "server.log"), dir: dir}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	s.proc = exec.Command(bin, args...)
	s.proc.Stdout, s.proc.Stderr = logFile, logFile
	if err := s.proc.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		s.waitErr = s.proc.Wait()
		logFile.Close()
		close(s.exited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !pingOnce(s.addr) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("%s exited early (%v): %s", bin, s.waitErr, s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			_ = s.proc.Process.Kill()
			<-s.exited
			return nil, fmt.Errorf("%s did not answer PING within 15 s: %s", bin, s.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s, nil
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop sends SIGTERM and reports a crash: a server that died during the run, or that exits with
// anything but a clean shutdown, fails the binary even when every test passed.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	select {
	case <-s.exited:
		return fmt.Errorf("server exited during the tests (%v): %s", s.waitErr, s.logTail())
	default:
	}
	_ = s.proc.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.proc.Process.Kill()
		<-s.exited
		return fmt.Errorf("server did not stop within 10 s of SIGTERM: %s", s.logTail())
	}
	var exitErr *exec.ExitError
	if errors.As(s.waitErr, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
		return fmt.Errorf("server exited with %v after SIGTERM: %s", s.waitErr, s.logTail())
	}
	return s.waitErr
}

func TestMain(m *testing.M) {
	var err error
	srv, err = startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: "+err.Error())
		os.Exit(1)
	}
	code := m.Run()
	if err := srv.stop(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: "+err.Error())
		code = 1
	}
	os.Exit(code)
}

// protocols are the two runs of every protocol-sensitive test: go-redis's defaults (Protocol 0
// means 3: HELLO 3 on connect) and RESP2 chosen explicitly.
var protocols = []struct {
	name  string
	proto int
}{{"default-resp3", 0}, {"resp2", 2}}

// client returns a go-redis client with the given Protocol (0: go-redis's default) and any
// option tweaks, closed when the test ends. It does not touch the keyspace.
func client(t testing.TB, proto int, tweak ...func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: srv.addr, Protocol: proto}
	for _, f := range tweak {
		f(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freshClient is client on an empty keyspace, so tests do not depend on one another's data.
func freshClient(t testing.TB, proto int, tweak ...func(*redis.Options)) *redis.Client {
	t.Helper()
	c := client(t, proto, tweak...)
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHALL: %v", err)
	}
	return c
}

// eachProtocol runs body once per protocol, as a subtest named after it, with a fresh client.
func eachProtocol(t *testing.T, body func(t *testing.T, proto int, c *redis.Client)) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			body(t, p.proto, freshClient(t, p.proto))
		})
	}
}

// waitFor polls cond until it holds, failing the test at the deadline. It replaces fixed sleeps:
// the test goes on as soon as the condition is met, and a condition never met fails loudly.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// must fails the test on a non-nil error, naming what was being done.
func must(t testing.TB, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eq fails the test unless got == want (comparable values only).
func eq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %#v, want %#v", what, got, want)
	}
}
