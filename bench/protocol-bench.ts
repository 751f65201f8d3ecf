/**
 * Micro-benchmark of the protocol hot path. Prints figures, asserts nothing.
 *
 *   npx tsc -p . && node dist/bench/protocol-bench.js [seconds-per-case]
 *
 * Cases: decoding a typical nginx FastCGI request (BEGIN_REQUEST, ~30 params, a small
 * POST body) into records and CgiParams; encoding a 100-byte response (STDOUT record,
 * empty STDOUT, END_REQUEST); parsing a PHP-style CGI response head; SCGI request decode.
 */
import { performance } from 'node:perf_hooks';
import { CgiResponseHeadParser } from '../src/protocol/cgi-response.js';
import {
  FCGI_KEEP_CONN,
  FcgiDecoder,
  ParamsCollector,
  ProtocolStatus,
  RecordType,
  Role,
  encodeEndRequest,
  encodeRecord,
  encodeRequestHead,
  encodeStream,
  type FcgiRecord,
} from '../src/protocol/fastcgi.js';
import { CgiParams, DEFAULT_PARAMS_LIMITS } from '../src/protocol/params.js';
import { ScgiRequestDecoder, encodeScgiHead, scgiLimits } from '../src/protocol/scgi.js';

const seconds = Number(process.argv[2] ?? 1);

/** What nginx sends with the stock fastcgi_params plus a browser's headers. */
const NGINX_PARAMS = new CgiParams([
  'QUERY_STRING', 'page=2&sort=desc',
  'REQUEST_METHOD', 'POST',
  'CONTENT_TYPE', 'application/x-www-form-urlencoded',
  'CONTENT_LENGTH', '200',
  'SCRIPT_NAME', '/index.php',
  'REQUEST_URI', '/index.php?page=2&sort=desc',
  'DOCUMENT_URI', '/index.php',
  'DOCUMENT_ROOT', '/var/www/html',
  'SERVER_PROTOCOL', 'HTTP/1.1',
  'REQUEST_SCHEME', 'http',
  'GATEWAY_INTERFACE', 'CGI/1.1',
  'SERVER_SOFTWARE', 'nginx/1.22.1',
  'REMOTE_ADDR', '192.0.2.10',
  'REMOTE_PORT', '53422',
  'SERVER_ADDR', '192.0.2.1',
  'SERVER_PORT', '80',
  'SERVER_NAME', 'example.com',
  'REDIRECT_STATUS', '200',
  'SCRIPT_FILENAME', '/var/www/html/index.php',
  'PATH_INFO', '',
  'HTTP_HOST', 'example.com',
  'HTTP_USER_AGENT', 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
  'HTTP_ACCEPT', 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8',
  'HTTP_ACCEPT_LANGUAGE', 'en-US,en;q=0.9',
  'HTTP_ACCEPT_ENCODING', 'gzip, deflate, br',
  'HTTP_COOKIE', 'PHPSESSID=0123456789abcdef0123456789; theme=dark; consent=yes',
  'HTTP_CONNECTION', 'keep-alive',
  'HTTP_CONTENT_TYPE', 'application/x-www-form-urlencoded',
  'HTTP_CONTENT_LENGTH', '200',
  'HTTP_REFERER', 'http://example.com/index.php?page=1',
]);
const BODY = Buffer.alloc(200, 0x61);

function run(name: string, unit: string, perOp: number, op: () => void): void {
  // Warm up so the JIT has settled before timing.
  for (let i = 0; i < 20000; i++) op();
  let ops = 0;
  const start = performance.now();
  const until = start + seconds * 1000;
  let now = start;
  while (now < until) {
    for (let i = 0; i < 1000; i++) op();
    ops += 1000;
    now = performance.now();
  }
  const perSec = (ops / (now - start)) * 1000;
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  console.log(`${name.padEnd(44)} ${fmt(perSec * perOp).padStart(12)} ${unit}/s  (${fmt(perSec)} ops/s)`);
}

// ---- FastCGI request decode ------------------------------------------------------------

const stdin: Buffer[] = [];
encodeStream(RecordType.Stdin, 1, BODY, stdin);
const requestWire = Buffer.concat([
  encodeRequestHead(1, Role.Responder, FCGI_KEEP_CONN, NGINX_PARAMS),
  ...stdin,
  encodeRecord(RecordType.Stdin, 1),
]);
let recordsPerRequest = 0;
let sink = 0;
{
  let collector = new ParamsCollector(DEFAULT_PARAMS_LIMITS);
  const onRecord = (r: FcgiRecord): void => {
    recordsPerRequest++;
    if (r.type === RecordType.BeginRequest) collector = new ParamsCollector(DEFAULT_PARAMS_LIMITS);
    else if (r.type === RecordType.Params) {
      const p = collector.add(r.content);
      if (p) sink += p.size;
    } else sink += r.content.length;
  };
  const decoder = new FcgiDecoder(onRecord);
  decoder.push(requestWire);
  const perRequest = recordsPerRequest;
  console.log(`request: ${requestWire.length} bytes, ${perRequest} records, ${NGINX_PARAMS.size} params, ${BODY.length}-byte body`);
  run('fastcgi decode nginx request (one chunk)', 'records', perRequest, () => decoder.push(requestWire));
  // The same request arriving in 3 reads (header split, params split): exercises the copy paths.
  const parts = [requestWire.subarray(0, 13), requestWire.subarray(13, 500), requestWire.subarray(500)];
  run('fastcgi decode nginx request (3 chunks)', 'records', perRequest, () => {
    decoder.push(parts[0]!);
    decoder.push(parts[1]!);
    decoder.push(parts[2]!);
  });
}

// ---- FastCGI request encode ------------------------------------------------------------

run('fastcgi encode request head (30 params)', 'requests', 1, () => {
  sink += encodeRequestHead(1, Role.Responder, FCGI_KEEP_CONN, NGINX_PARAMS).length;
});

// ---- FastCGI response encode -----------------------------------------------------------

{
  const response = Buffer.alloc(100, 0x62);
  const out: Buffer[] = [];
  run('fastcgi encode 100-byte response', 'records', 3, () => {
    out.length = 0;
    encodeStream(RecordType.Stdout, 1, response, out);
    out.push(encodeRecord(RecordType.Stdout, 1), encodeEndRequest(1, 0, ProtocolStatus.RequestComplete));
    sink += out.length;
  });
}

// ---- CGI response head -----------------------------------------------------------------

{
  const phpHead = Buffer.from(
    'X-Powered-By: PHP/8.2.7\r\nSet-Cookie: PHPSESSID=0123456789abcdef; path=/\r\n' +
      'Expires: Thu, 19 Nov 1981 08:52:00 GMT\r\nCache-Control: no-store, no-cache, must-revalidate\r\n' +
      'Pragma: no-cache\r\nContent-type: text/html; charset=UTF-8\r\n\r\n<!doctype html><p>hello</p>',
  );
  run('cgi response head parse (6 headers)', 'heads', 1, () => {
    sink += new CgiResponseHeadParser().push(phpHead)!.head.status;
  });
}

// ---- SCGI request decode ---------------------------------------------------------------

{
  const scgiWire = Buffer.concat([encodeScgiHead(NGINX_PARAMS), BODY]);
  const limits = scgiLimits(DEFAULT_PARAMS_LIMITS);
  const handlers = {
    onHead: (p: CgiParams) => {
      sink += p.size;
    },
    onBody: (c: Buffer) => {
      sink += c.length;
    },
    onEnd: () => {},
  };
  run('scgi decode nginx request', 'requests', 1, () => new ScgiRequestDecoder(limits, handlers).push(scgiWire));
}

if (sink === 42) console.log(''); // keeps the work observable to the JIT
