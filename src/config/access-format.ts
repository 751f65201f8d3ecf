/**
 * The access_format mini-language, PHP-FPM's access.format letters plus a few of our own.
 * Parsed here so `fcgi-pm check` reports a bad letter with its line; src/log/access-format.ts
 * compiles the tokens into the line writer. docs/operations.md lists the letters; the
 * table below is the single list of them.
 */

export type AccessToken = { kind: 'text'; text: string } | { kind: 'field'; letter: string; arg: string | undefined };

export interface AccessLetter {
  letter: string;
  /** Allowed %{arg}X values; undefined = no argument; 'any' = free text (a name). */
  args?: readonly string[] | 'any';
  /** true when %{arg} is required. */
  argRequired?: boolean;
  doc: string;
}

export const TIME_ARGS_DOC = 'a strftime pattern (%Y %m %d %H %M %S %z %b %a %e %j %s %F %T), or iso, sec, msec';

export const ACCESS_LETTERS: readonly AccessLetter[] = [
  { letter: 'R', doc: 'client address (REMOTE_ADDR)' },
  { letter: 'u', doc: 'remote user (REMOTE_USER), "-" when none' },
  { letter: 't', args: 'any', doc: `time the request arrived, "30/Nov/2025:06:08:00 +0000" by default; %{...}t takes ${TIME_ARGS_DOC}` },
  { letter: 'T', args: 'any', doc: 'time the request ended; arguments as %t' },
  { letter: 'm', doc: 'request method' },
  { letter: 'r', doc: 'request URI without the query string' },
  { letter: 'q', doc: 'query string' },
  { letter: 'Q', doc: '"?" when there is a query string, else nothing (so %r%Q%q is the whole URI)' },
  { letter: 'U', doc: 'the whole request URI as the client sent it (REQUEST_URI)' },
  { letter: 's', doc: 'response status (499 when the client went away first)' },
  { letter: 'd', args: ['seconds', 'milli', 'mili', 'micro'], doc: 'duration: seconds with 3 decimals; %{milli}d milliseconds with 3 decimals; %{micro}d whole microseconds' },
  { letter: 'M', args: ['bytes', 'kilo', 'mega'], doc: "memory of the worker that served it (its latest sample), in bytes or %{kilo}M / %{mega}M; \"-\" when not measured" },
  { letter: 'C', args: ['total'], doc: 'CPU use of the worker that served it, percent of one CPU (latest sample); "-" when not measured' },
  { letter: 'l', doc: 'request body length (CONTENT_LENGTH), 0 when none' },
  { letter: 'f', doc: 'script (SCRIPT_FILENAME), "-" when none' },
  { letter: 'n', doc: 'pool name' },
  { letter: 'p', doc: 'pid of the worker that served it, "-" for external backends' },
  { letter: 'P', doc: "fcgi-pm's own pid" },
  { letter: 'e', args: 'any', argRequired: true, doc: '%{NAME}e: the request variable NAME (a FastCGI param), "-" when unset' },
  { letter: 'b', doc: 'response body bytes sent' },
  { letter: 'E', doc: 'fcgi-pm error code (ERR_...), "-" when none' },
  { letter: 'S', doc: '"slow" when the request ran past its pool\'s slow_request, else "-"' },
  { letter: 'k', doc: 'backend or worker address that served it, "-" when none' },
];

/** What `access_format: fpm` stands for (PHP-FPM's www.conf example, with our duration). */
export const FPM_ACCESS_FORMAT = '%R - %u %t "%m %r%Q%q" %s %f %{milli}d %{kilo}M %C%%';

/** Tokens, or a message saying what is wrong. `json` (and `fpm`) are handled by the caller. */
export function parseAccessFormat(format: string): AccessToken[] | string {
  const out: AccessToken[] = [];
  let text = '';
  let i = 0;
  while (i < format.length) {
    const c = format[i]!;
    if (c !== '%') {
      text += c;
      i++;
      continue;
    }
    i++;
    if (i >= format.length) return 'ends with a lone "%" (write %% for a percent sign)';
    if (format[i] === '%') {
      text += '%';
      i++;
      continue;
    }
    let arg: string | undefined;
    if (format[i] === '{') {
      const close = format.indexOf('}', i);
      if (close < 0) return `"%{" at position ${i} has no closing "}"`;
      arg = format.slice(i + 1, close);
      i = close + 1;
      if (i >= format.length) return `"%{${arg}}" must be followed by a letter`;
    }
    const letter = format[i]!;
    i++;
    const spec = ACCESS_LETTERS.find((l) => l.letter === letter);
    if (spec === undefined) return `unknown letter %${letter} (known: ${ACCESS_LETTERS.map((l) => '%' + l.letter).join(' ')})`;
    if (arg !== undefined && spec.args === undefined) return `%${letter} takes no {argument}`;
    if (arg === undefined && spec.argRequired) return `%${letter} needs an argument, e.g. %{HTTP_HOST}${letter}`;
    if (arg !== undefined && Array.isArray(spec.args) && !spec.args.includes(arg)) return `%{${arg}}${letter}: the argument must be one of ${spec.args.join(', ')}`;
    if (text !== '') out.push({ kind: 'text', text });
    text = '';
    out.push({ kind: 'field', letter, arg });
  }
  if (text !== '') out.push({ kind: 'text', text });
  return out;
}
