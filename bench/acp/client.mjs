// Small ACP (v1) benchmark client on @agentclientprotocol/sdk 2.4.0 (the 2.x builder API).
//
// usage: node client.mjs [--cwd DIR] [--prompt TEXT] [--timeout SEC] -- <agent-cmd> [args...]
//
// The SDK is not installed in this repo (no node_modules here). It is resolved from
// $ACP_SDK_DIR (default /tmp/peers/acp-ts, where `npm i @agentclientprotocol/sdk@2.4.0` ran).
// ESM `import` ignores NODE_PATH, so we resolve the package path with createRequire and
// import it by absolute URL.
//
// Output: one line per event, "[+ms since spawn] what", then a final line
// "RESULT {json}" with the timings that run.sh reads.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { Readable, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import fs from 'node:fs/promises';
import path from 'node:path';

const sdkDir = process.env.ACP_SDK_DIR ?? '/tmp/peers/acp-ts';
const acp = await import(pathToFileURL(createRequire(path.join(sdkDir, 'noop.js')).resolve('@agentclientprotocol/sdk')).href);

const argv = process.argv.slice(2);
let cwd = process.cwd(), text = 'Say hello.', timeoutS = 60;
while (argv.length && argv[0] !== '--') {
  const k = argv.shift();
  if (k === '--cwd') cwd = path.resolve(argv.shift());
  else if (k === '--prompt') text = argv.shift();
  else if (k === '--timeout') timeoutS = Number(argv.shift());
  else throw new Error(`unknown option ${k}`);
}
argv.shift();
if (!argv.length) throw new Error('usage: node client.mjs [opts] -- <agent-cmd> [args...]');

// Unix ms with sub-ms precision: comparable with keel-mockllm's --timings clock.
const unixMs = () => performance.timeOrigin + performance.now();
// detached => own process group, so a kill also reaches helpers the agent spawned (pi-acp runs pi).
const child = spawn(argv[0], argv.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], cwd, detached: true });
const t0 = performance.now();
const rel = () => performance.now() - t0;
const log = (s) => console.log(`[+${rel().toFixed(1).padStart(7)}ms] ${s}`);
const clip = (s, n = 80) => (s.length > n ? s.slice(0, n) + '…' : s);
const exited = new Promise((r) => child.once('exit', () => r(rel())));
child.on('error', (e) => log(`spawn error: ${e.message}`));

const R = { init_ms: null, session_new_ms: null, first_chunk_ms: null, first_chunk_unix_ms: null,
  chunk_unix_ms: [], end_turn_ms: null, stop_reason: null, updates: [], permissions: [], exited_after_eof_ms: null, killed: false, error: null };

// One short, kind-specific summary per session/update (full JSON would drown the transcript).
function summary(u) {
  const c = u.content;
  switch (u.sessionUpdate) {
    case 'agent_message_chunk': case 'agent_thought_chunk': case 'user_message_chunk':
      return JSON.stringify(clip(c?.text ?? JSON.stringify(c)));
    case 'tool_call':
      return `id=${u.toolCallId} kind=${u.kind} status=${u.status} title=${JSON.stringify(clip(u.title ?? '', 60))}`;
    case 'tool_call_update': {
      const out = (u.content ?? []).map((x) => x.type === 'content' ? clip(x.content?.text ?? '', 70) : x.type).join('|');
      return `id=${u.toolCallId} status=${u.status ?? '-'}${out ? ` content=${JSON.stringify(out)}` : ''}`;
    }
    case 'available_commands_update': return `${u.availableCommands?.length ?? 0} commands`;
    case 'plan': return `${u.entries?.length ?? 0} entries`;
    case 'usage_update': return `used=${u.used} size=${u.size}`;
    case 'current_mode_update': return `mode=${u.currentModeId}`;
    default: return clip(JSON.stringify(u), 120);
  }
}

const app = acp.client({ name: 'keel-acp-bench' })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate === 'agent_message_chunk') {
      // All chunk times, not just the first: codex-acp streams a local warning before any model
      // text, so run.sh pairs the model's request with the first chunk that follows it.
      if (R.chunk_unix_ms.length < 50) R.chunk_unix_ms.push(unixMs());
      if (R.first_chunk_ms === null) { R.first_chunk_unix_ms = unixMs(); R.first_chunk_ms = rel(); }
    }
    R.updates.push([Math.round(rel()), u.sessionUpdate]);
    log(`update ${u.sessionUpdate} ${summary(u)}`);
    if (process.env.ACP_BENCH_RAW) log(`  raw: ${JSON.stringify(u)}`);  // full payloads when debugging
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    const kinds = params.options.map((o) => o.kind);
    R.permissions.push(kinds);
    // Benchmarks must not block on a human: take the first allow option, else the first option.
    const pick = params.options.find((o) => o.kind.startsWith('allow')) ?? params.options[0];
    log(`request_permission ${JSON.stringify(clip(params.toolCall?.title ?? params.toolCall?.toolCallId ?? '', 60))} options=[${params.options.map((o) => `${o.kind} ${JSON.stringify(o.name)}`).join(', ')}] -> ${pick.optionId}`);
    if (process.env.ACP_BENCH_RAW) log(`  raw: ${JSON.stringify(params)}`);
    return { outcome: { outcome: 'selected', optionId: pick.optionId } };
  })
  .onRequest(acp.methods.client.fs.readTextFile, async ({ params }) => {
    log(`fs/read_text_file ${params.path}`);
    return { content: await fs.readFile(params.path, 'utf8') };
  })
  .onRequest(acp.methods.client.fs.writeTextFile, async ({ params }) => {
    log(`fs/write_text_file ${params.path} (${params.content.length} chars)`);
    await fs.writeFile(params.path, params.content);
    return {};
  });

const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const timeout = (p, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what} timed out after ${timeoutS}s`)), timeoutS * 1000).unref())]);
try {
  await timeout(app.connectWith(stream, async (agent) => {
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
      clientInfo: { name: 'keel-acp-bench', version: '0.1.0' },
    });
    R.init_ms = rel();
    log(`initialize -> protocolVersion=${init.protocolVersion} agent=${JSON.stringify(init.agentInfo)} loadSession=${init.agentCapabilities?.loadSession} authMethods=[${(init.authMethods ?? []).map((m) => m.id).join(',')}]`);
    const s0 = rel();
    const sess = await agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    R.session_new_ms = rel() - s0;
    log(`session/new -> ${sess.sessionId} (${R.session_new_ms.toFixed(1)} ms) modes=${(sess.modes?.availableModes ?? []).map((m) => m.id).join(',') || '-'}`);
    const res = await agent.request(acp.methods.agent.session.prompt, { sessionId: sess.sessionId, prompt: [{ type: 'text', text }] });
    R.end_turn_ms = rel(); R.stop_reason = res.stopReason;
    log(`session/prompt -> stopReason=${res.stopReason}`);
  }), 'turn');
} catch (e) {
  R.error = String(e?.message ?? e);
  log(`error: ${R.error}`);
} finally {
  // ACP agents should exit when the client closes stdin; measure that, kill after 3 s.
  const eof = rel();
  child.stdin.end();
  const t = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 3000))]);
  if (t === null) {
    R.killed = true;
    try { process.kill(-child.pid, 'SIGKILL'); } catch { child.kill('SIGKILL'); }
    await exited;
    log('agent still alive 3 s after stdin EOF -> killed (SIGKILL to its process group)');
  } else {
    R.exited_after_eof_ms = t - eof;
    log(`agent exited ${R.exited_after_eof_ms.toFixed(1)} ms after stdin EOF (code=${child.exitCode}, signal=${child.signalCode})`);
    // Helpers left behind in the group would skew the next run.
    try { process.kill(-child.pid, 'SIGKILL'); } catch {}
  }
  console.log('RESULT ' + JSON.stringify(R));
  process.exit(0);
}
