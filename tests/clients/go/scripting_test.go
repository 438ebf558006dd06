// Lua scripting the way Go services use it: redis.NewScript's Run (EVALSHA first, EVAL when the
// server answers NOSCRIPT), Eval's reply types as go-redis hands them over, Lua error texts,
// and Redis 7 functions (FUNCTION LOAD, FCALL, FCALL_RO).
package goredis

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// recorder is a go-redis hook that notes each command's name, so a test can see which commands
// a helper such as Script.Run sent.
type recorder struct {
	mu    sync.Mutex
	names []string
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.names = append(r.names, cmd.Name())
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// take returns the names recorded since the last call.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := r.names
	r.names = nil
	return names
}

func TestScriptRunFallsBackToEval(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		src := "return redis.call('INCRBY', KEYS[1], ARGV[1])"
		script := redis.NewScript(src)
		sum := sha1.Sum([]byte(src))
		eq(t, "script digest", script.Hash(), hex.EncodeToString(sum[:]))
		eq(t, "SCRIPT FLUSH", c.ScriptFlush(ctx).Val(), "OK") // FLUSHALL keeps scripts
		rec := &recorder{}
		c.AddHook(rec)

		// Not cached yet: EVALSHA answers NOSCRIPT and Run sends EVAL, which caches it.
		eq(t, "first Run", script.Run(ctx, c, []string{"n"}, 5).Val(), any(int64(5)))
		deq(t, "commands of the first Run", rec.take(), []string{"evalsha", "eval"})
		deq(t, "SCRIPT EXISTS after EVAL", c.ScriptExists(ctx, script.Hash(), strings.Repeat("0", 40)).Val(),
			[]bool{true, false})
		rec.take()
		// Cached: one EVALSHA.
		eq(t, "second Run", script.Run(ctx, c, []string{"n"}, 2).Val(), any(int64(7)))
		deq(t, "commands of the second Run", rec.take(), []string{"evalsha"})

		// After SCRIPT FLUSH the server forgets it and Run falls back again.
		must(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
		deq(t, "SCRIPT EXISTS after the flush", c.ScriptExists(ctx, script.Hash()).Val(), []bool{false})
		rec.take()
		eq(t, "Run after the flush", script.Run(ctx, c, []string{"n"}, 3).Val(), any(int64(10)))
		deq(t, "commands of the Run after the flush", rec.take(), []string{"evalsha", "eval"})
		deq(t, "SCRIPT EXISTS after the fallback", c.ScriptExists(ctx, script.Hash()).Val(), []bool{true})

		// The server's own NOSCRIPT text (go-redis's EvalSha normalises it, Do does not).
		must(t, c.ScriptFlush(ctx).Err(), "SCRIPT FLUSH")
		errText(t, "raw EVALSHA of an unknown digest", c.Do(ctx, "EVALSHA", script.Hash(), 1, "n", 1).Err(),
			"NOSCRIPT No matching script. Please use EVAL.")
		// SCRIPT LOAD returns the same digest go-redis computed.
		eq(t, "SCRIPT LOAD", script.Load(ctx, c).Val(), hex.EncodeToString(sum[:]))
		eq(t, "EvalSha after SCRIPT LOAD", script.EvalSha(ctx, c, []string{"n"}, 1).Val(), any(int64(11)))

		// Scripts in a pipeline: Run inside Pipelined works once the script is cached.
		var a, b *redis.Cmd
		_, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			a = script.Run(ctx, pipe, []string{"p"}, 1)
			b = script.Run(ctx, pipe, []string{"p"}, 1)
			return nil
		})
		must(t, err, "scripts in a pipeline")
		eq(t, "first pipelined Run", a.Val(), any(int64(1)))
		eq(t, "second pipelined Run", b.Val(), any(int64(2)))
	})
}

func TestEvalReturnTypes(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eval := func(src string, keys []string, args ...any) (any, error) {
			return c.Eval(ctx, src, keys, args...).Result()
		}
		val := func(what, src string, want any) {
			t.Helper()
			got, err := eval(src, nil)
			must(t, err, what)
			deq(t, what, got, want)
		}
		// The Lua to RESP conversion: numbers become integers (truncated), tables arrays that
		// stop at the first nil, true becomes 1 and false a null, in both protocols (a script
		// speaks RESP2 unless it calls redis.setresp(3)).
		val("integer", "return 42", int64(42))
		val("float, truncated", "return 3.99", int64(3))
		val("string", "return 'hello'", "hello")
		val("true", "return true", int64(1))
		val("nested table", "return {1, 'two', {3, 'four'}, 5.5}",
			[]any{int64(1), "two", []any{int64(3), "four"}, int64(5)})
		val("table stops at nil", "return {1, nil, 3}", []any{int64(1)})
		val("false inside a table", "return {1, false, true}", []any{int64(1), nil, int64(1)})
		val("status reply", "return redis.status_reply('FINE')", "FINE")
		val("status reply table", "return {ok='DONE'}", "DONE")
		val("empty table", "return {}", []any{})
		_, err := eval("return false", nil)
		isNil(t, "false", err)
		_, err = eval("return nil", nil)
		isNil(t, "nil", err)

		// KEYS and ARGV, and a server reply converted to Lua and back.
		must(t, c.RPush(ctx, "l", "x", "y").Err(), "RPUSH")
		got, err := eval("return {KEYS[1], ARGV[1], #KEYS, #ARGV, redis.call('LRANGE', KEYS[1], 0, -1)}",
			[]string{"l"}, "arg", "more")
		must(t, err, "KEYS and ARGV")
		deq(t, "KEYS and ARGV", got, []any{"l", "arg", int64(1), int64(2), []any{"x", "y"}})
		// A missing key's nil reaches Lua as false.
		got, err = eval("return tostring(redis.call('GET', KEYS[1]))", []string{"missing"})
		must(t, err, "GET of a missing key inside Lua")
		eq(t, "GET of a missing key inside Lua", got, any("false"))
		// go-redis's typed accessors on a script reply.
		n, err := c.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{"n"}, 7).Int64()
		must(t, err, "Eval(...).Int64()")
		eq(t, "Eval(...).Int64()", n, int64(7))
		ss, err := c.Eval(ctx, "return {'a', 'b'}", nil).StringSlice()
		must(t, err, "Eval(...).StringSlice()")
		deq(t, "Eval(...).StringSlice()", ss, []string{"a", "b"})
	})
}

func TestLuaErrors(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		digest := func(src string) string {
			sum := sha1.Sum([]byte(src))
			return hex.EncodeToString(sum[:])
		}
		fails := func(what, src string, keys []string, want string) {
			t.Helper()
			errText(t, what, c.Eval(ctx, src, keys).Err(), want)
		}
		fails("error_reply", "return redis.error_reply('MYERR custom failure')", nil, "MYERR custom failure")
		// A one-word error_reply gets the ERR code in front (a first word before a space counts
		// as the code); a raw {err=...} table goes out as it is.
		fails("one-word error_reply", "return redis.error_reply('custom')", nil, "ERR custom")
		fails("error_reply with a space", "return redis.error_reply('no code')", nil, "no code")
		fails("err table without a code", "return {err='plain'}", nil, "plain")
		src := "error('boom')"
		fails("Lua error()", src, nil, "ERR user_script:1: boom script: "+digest(src)+", on @user_script:1.")
		src = "return redis.call('NOSUCH')"
		fails("unknown command", src, nil,
			"ERR Unknown Redis command called from script script: "+digest(src)+", on @user_script:1.")
		must(t, c.Set(ctx, "s", "text", 0).Err(), "SET")
		src = "return redis.call('LPUSH', KEYS[1], 'x')"
		fails("redis.call error", src, []string{"s"},
			"WRONGTYPE Operation against a key holding the wrong kind of value script: "+digest(src)+", on @user_script:1.")
		// pcall hands the error to the script as a table instead of raising it.
		got, err := c.Eval(ctx, "local r = redis.pcall('LPUSH', KEYS[1], 'x'); return r['err']", []string{"s"}).Result()
		must(t, err, "pcall")
		eq(t, "pcall's error text", got, any("WRONGTYPE Operation against a key holding the wrong kind of value"))
		src = "return +"
		err = c.Eval(ctx, src, nil).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR Error compiling script (new function): user_script:1:") {
			t.Fatalf("syntax error: %v", err)
		}
		// A read-only script (EVAL_RO) may not write.
		err = c.EvalRO(ctx, "return redis.call('SET', KEYS[1], 'x')", []string{"s"}).Err()
		if err == nil || !strings.HasPrefix(err.Error(), "ERR Write commands are not allowed from read-only scripts.") {
			t.Fatalf("write from EVAL_RO: %v", err)
		}
		eq(t, "value after the refused write", c.Get(ctx, "s").Val(), "text")
	})
}

const goLibrary = `#!lua name=golib
local function bump(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
local function peek(keys)
  return redis.call('GET', keys[1])
end
redis.register_function('go_bump', bump)
redis.register_function{function_name='go_peek', callback=peek, flags={'no-writes'}}
`

func TestFunctions(t *testing.T) {
	eachProtocol(t, func(t *testing.T, _ int, c *redis.Client) {
		ctx := t.Context()
		eq(t, "FUNCTION FLUSH", c.FunctionFlush(ctx).Val(), "OK") // FLUSHALL keeps functions
		eq(t, "FUNCTION LOAD", c.FunctionLoad(ctx, goLibrary).Val(), "golib")
		errText(t, "FUNCTION LOAD of an existing library", c.FunctionLoad(ctx, goLibrary).Err(),
			"ERR Library 'golib' already exists")
		eq(t, "FUNCTION LOAD REPLACE", c.FunctionLoadReplace(ctx, goLibrary).Val(), "golib")

		eq(t, "FCALL", c.FCall(ctx, "go_bump", []string{"n"}, 7).Val(), any(int64(7)))
		eq(t, "FCALL again", c.FCall(ctx, "go_bump", []string{"n"}, 3).Val(), any(int64(10)))
		eq(t, "FCALL_RO", c.FCallRO(ctx, "go_peek", []string{"n"}).Val(), any("10"))
		isNil(t, "FCALL_RO of a missing key", c.FCallRO(ctx, "go_peek", []string{"none"}).Err())
		errText(t, "FCALL_RO of a writing function", c.FCallRO(ctx, "go_bump", []string{"n"}, 1).Err(),
			"ERR Can not execute a script with write flag using *_ro command.")
		errText(t, "FCALL of a missing function", c.FCall(ctx, "nope", nil).Err(), "ERR Function not found")

		libs, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
		must(t, err, "FUNCTION LIST")
		eq(t, "libraries", len(libs), 1)
		eq(t, "library name", libs[0].Name, "golib")
		eq(t, "library engine", libs[0].Engine, "LUA")
		fns := map[string][]string{}
		for _, f := range libs[0].Functions {
			fns[f.Name] = f.Flags
		}
		deq(t, "functions and flags", fns, map[string][]string{"go_bump": {}, "go_peek": {"no-writes"}})
		withCode, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "go*", WithCode: true}).Result()
		must(t, err, "FUNCTION LIST WITHCODE")
		eq(t, "library code", withCode[0].Code, goLibrary)

		eq(t, "FUNCTION DELETE", c.FunctionDelete(ctx, "golib").Val(), "OK")
		errText(t, "FCALL after FUNCTION DELETE", c.FCall(ctx, "go_bump", []string{"n"}, 1).Err(), "ERR Function not found")
		errText(t, "FUNCTION DELETE of a missing library", c.FunctionDelete(ctx, "golib").Err(), "ERR Library not found")
	})
}
