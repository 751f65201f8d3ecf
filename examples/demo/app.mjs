#!/usr/bin/env node
// A small FastCGI application in Node, for the demo: fcgi-pm spawns it on demand and
// hands it a listening socket as file descriptor 0 (the FastCGI convention php-cgi
// also follows). Run alone: `node app.mjs /tmp/app.sock` listens on that path instead.
import net from 'node:net';
import { FcgiDecoder, RecordType, Role, ProtocolStatus, FCGI_KEEP_CONN, decodeNameValues,
  encodeStream, encodeRecord, encodeEndRequest, parseBeginRequest } from '../../dist/src/protocol/fastcgi.js';
import { DEFAULT_PARAMS_LIMITS } from '../../dist/src/protocol/params.js';

let served = 0;
let inFlight = 0;
let stopping = false;
const startedAt = new Date();

function page(params, body) {
  const uri = params.get('REQUEST_URI') ?? '/';
  const q = new URLSearchParams(params.get('QUERY_STRING') ?? '');
  if (uri.startsWith('/slow')) {
    const ms = Math.min(Number(q.get('ms') ?? 1000), 60_000);
    return new Promise((r) => setTimeout(() => r(['200 OK', 'text/plain', `slept ${ms} ms in pid ${process.pid}\n`]), ms));
  }
  if (uri.startsWith('/missing')) return ['404 Not Found', 'text/plain', 'no such page\n'];
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const rows = [];
  params.forEach((k, v) => rows.push(`<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`));
  return ['200 OK', 'text/html; charset=utf-8', `<!doctype html><title>fcgi-pm demo</title>
<h1>Hello from worker ${process.pid}</h1>
<p>This worker has served ${served} requests since ${startedAt.toISOString()}.
fcgi-pm started it on demand and stops it after it has been idle for a while.</p>
<p>Try <a href="/slow?ms=2000">a slow page</a> in several tabs to see more workers start,
or <a href="/missing">a 404</a>.</p>
<form method="post"><input name="msg" value="hello"><button>POST</button></form>
${body.length ? `<p>You posted ${body.length} bytes: <code>${esc(body.toString('utf8').slice(0, 200))}</code></p>` : ''}
<table border="1" cellpadding="3">${rows.join('\n')}</table>\n`];
}

function serve(socket) {
  const reqs = new Map();
  const decoder = new FcgiDecoder((rec) => {
    const { type, requestId, content } = rec;
    if (type === RecordType.BeginRequest) {
      const { role, flags } = parseBeginRequest(content);
      if (role !== Role.Responder) {
        socket.write(encodeEndRequest(requestId, 0, ProtocolStatus.UnknownRole));
        return;
      }
      reqs.set(requestId, { keep: (flags & FCGI_KEEP_CONN) !== 0, params: [], body: [] });
      return;
    }
    const r = reqs.get(requestId);
    if (!r) return;
    if (type === RecordType.Params) {
      if (content.length) r.params.push(Buffer.from(content));
      else r.paramsDone = decodeNameValues(Buffer.concat(r.params), DEFAULT_PARAMS_LIMITS);
    } else if (type === RecordType.Stdin) {
      if (content.length) r.body.push(Buffer.from(content));
      else respond(requestId, r);
    } else if (type === RecordType.AbortRequest) {
      reqs.delete(requestId);
      socket.write(encodeEndRequest(requestId, 1, ProtocolStatus.RequestComplete));
    }
  });
  async function respond(id, r) {
    served++;
    inFlight++;
    const [status, type, text] = await page(r.paramsDone, Buffer.concat(r.body));
    inFlight--;
    if (stopping && inFlight === 0) setImmediate(() => process.exit(0));
    if (!reqs.has(id)) return; // aborted while we were busy
    reqs.delete(id);
    const out = [];
    const body = Buffer.from(text);
    encodeStream(RecordType.Stdout, id, Buffer.from(`Status: ${status}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`), out);
    encodeStream(RecordType.Stdout, id, body, out);
    out.push(encodeRecord(RecordType.Stdout, id), encodeEndRequest(id, 0, ProtocolStatus.RequestComplete));
    socket.write(Buffer.concat(out));
    if (!r.keep) socket.end();
  }
  socket.on('data', (chunk) => {
    try {
      decoder.push(chunk);
    } catch (err) {
      console.error(`bad FastCGI input: ${err.message}`);
      socket.destroy();
    }
  });
  socket.on('error', () => {});
}

const server = net.createServer(serve);
if (process.argv[2]) server.listen(process.argv[2]);
else server.listen({ fd: 0 });
// Finish the request in progress, then exit: fcgi-pm stops idle workers with SIGTERM.
process.on('SIGTERM', () => {
  stopping = true;
  if (inFlight === 0) process.exit(0);
});
