// Starts one goblin-core process for a test file: a free loopback port plus a Unix socket in a
// temporary directory. The binary comes from GOBLIN_CORE_BIN, else the default cargo target path.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export function goblinCoreBin() {
  if (process.env.GOBLIN_CORE_BIN) return process.env.GOBLIN_CORE_BIN;
  const target = process.env.CARGO_TARGET_DIR || path.join(os.homedir(), '.cache', 'goblin-target');
  return path.join(target, 'debug', 'goblin-core');
}

// goblin-core treats --port 0 as "no TCP" (like Redis), so ask the OS for a free port first.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function pingOnce(port) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.setTimeout(1000);
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      data += d;
      if (data.includes('\r\n')) {
        sock.destroy();
        resolve(data.startsWith('+PONG'));
      }
    });
    sock.on('error', () => resolve(false));
    sock.on('timeout', () => { sock.destroy(); resolve(false); });
  });
}

// `extraArgs` go after the defaults (`--cluster-enabled yes` for the cluster clients' tests).
export async function startServer(extraArgs = []) {
  // CLIENTS_REFERENCE=redis runs the same tests against Debian's redis-server, to tell a wrong
  // test from a goblin-core bug.
  const reference = process.env.CLIENTS_REFERENCE === 'redis';
  const bin = reference ? 'redis-server' : goblinCoreBin();
  if (!reference && !existsSync(bin)) throw new Error(`goblin-core not found at ${bin}; run cargo build -p goblin-core`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'goblin-node-'));
  let port = await freePort();
  // redis-server in cluster mode needs its port + 10000 (the cluster bus) to be a port too.
  while (extraArgs.includes('--cluster-enabled') && port > 55535) port = await freePort();
  const unixsocket = path.join(dir, 'goblin.sock');
  const level = reference ? 'warning' : 'warn';
  // Both keep their files in the test's own folder and save nothing at exit: without it the
  // server would load and write dump.rdb in the suite's folder, from one test file to the next.
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--unixsocket', unixsocket, '--loglevel', level,
    '--save', '', '--dir', dir];
  if (reference) args.push('--appendonly', 'no');
  args.push(...extraArgs);
  const proc = spawn(bin, args, { stdio: ['ignore', 'inherit', 'inherit'] });
  let exited = null;
  proc.on('exit', (code, signal) => { exited = { code, signal }; });
  const deadline = Date.now() + 15000;
  for (;;) {
    if (exited) throw new Error(`goblin-core exited early: ${JSON.stringify(exited)}`);
    if (await pingOnce(port) && existsSync(unixsocket)) break;
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error('goblin-core did not answer PING'); }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host: '127.0.0.1',
    port,
    unixsocket,
    url: `redis://127.0.0.1:${port}`,
    reference,
    // Resolves with the exit status so a test can assert the server did not crash under load.
    async stop() {
      if (!exited) {
        const done = new Promise((r) => proc.once('exit', () => r()));
        proc.kill('SIGTERM');
        await done;
      }
      rmSync(dir, { recursive: true, force: true });
      return exited;
    },
    get exited() { return exited; },
  };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
