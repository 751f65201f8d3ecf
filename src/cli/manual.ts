/**
 * The manual pages and the bash completion, rendered from the same sources as `--help`
 * (the commander program) and docs/configuration.md's key reference (CONFIG_KEYS), so none
 * of them is written twice. scripts/build-deb.sh writes them with scripts/gen-manual.mjs.
 *
 *   fcgi-pm(8)        the program: synopsis, each command's help, signals, files
 *   fcgi-pm.yaml(5)   the config file: every key with its type, default and meaning
 *   fcgi-pm-wsgi(1)   the WSGI adapter: its --help
 */
import type { Command, Option } from 'commander';
import { CONFIG_KEYS } from '../config/keys.js';

/** roff text: backslashes and leading dots/quotes escaped, dashes kept as typed. */
function roff(s: string): string {
  return s
    .replace(/\\/g, '\\e')
    .replace(/-/g, '\\-')
    .split('\n')
    .map((l) => (/^[.']/.test(l) ? `\\&${l}` : l))
    .join('\n');
}

function header(name: string, section: number, date: string, version: string, summary: string): string {
  return `.TH ${name.toUpperCase()} ${section} "${date}" "fcgi-pm ${version}" "fcgi-pm"\n.SH NAME\n${roff(name)} \\- ${roff(summary)}\n`;
}

/** A help text (commander's) as a no-fill block: it is already laid out for a terminal. */
function block(text: string): string {
  return `.nf\n${roff(text.trimEnd())}\n.fi\n`;
}

const SIGNALS: ReadonlyArray<[string, string]> = [
  ['TERM, INT, QUIT', 'Graceful stop: listeners close, running requests have up to shutdown_timeout, then exit 0. A second INT cuts running requests.'],
  ['HUP', 'Reload the configuration file; an invalid file changes nothing.'],
  ['USR1', 'Reopen the log files (as fcgi-pm reopen-logs).'],
  ['USR2', 'Upgrade in place (as fcgi-pm upgrade): a new daemon from the files on disk takes over every listening socket; the old one drains and exits. A new daemon that cannot start leaves the old one serving.'],
];

export function renderProgramManPage(program: Command, version: string, date: string): string {
  let out = header('fcgi-pm', 8, date, version, 'FastCGI/SCGI application process manager');
  out += `.SH SYNOPSIS\n.B fcgi\\-pm\n.I command\n[\\fIoptions\\fR]\n`;
  out += `.SH DESCRIPTION\n${roff(program.description().replace(/\n/g, ' '))}\n.PP\n`;
  out += block(program.helpInformation());
  out += '.SH COMMANDS\n';
  for (const c of program.commands) {
    out += `.SS ${roff(c.name())}\n`;
    out += block(c.helpInformation());
  }
  out += '.SH SIGNALS\n';
  for (const [sig, what] of SIGNALS) out += `.TP\n.B ${roff(sig)}\n${roff(what)}\n`;
  out += exitStatus();
  out += `.SH FILES\n.TP\n.I /etc/fcgi\\-pm/fcgi\\-pm.yaml\nThe configuration file; see \\fBfcgi\\-pm.yaml\\fR(5).\n.TP\n.I /run/fcgi\\-pm/\nControl sockets, runtime directories and the pid file of daemons run as root.\n`;
  out += `.SH SEE ALSO\n\\fBfcgi\\-pm.yaml\\fR(5), \\fBnginx\\fR(8), \\fBphp\\-fpm\\fR(8)\n.PP\nThe README and docs/ in /usr/share/doc/fcgi\\-pm (or the npm package).\n`;
  return out;
}

/** The exit codes every command shares (docs/operations.md "Exit codes"). */
export const EXIT_CODES: ReadonlyArray<[number, string]> = [
  [0, 'Done: the config is valid (check), the daemon answered and did it, ready says ready.'],
  [1, 'Failed: an invalid config or a failed host check (check, run), a daemon that could not start, an action the daemon refused or that failed (reload of an invalid file, an upgrade whose new code cannot start); ready: not ready.'],
  [2, 'Wrong usage: an unknown option, a missing argument.'],
  [3, 'No daemon answers on the control socket (status, reload, stop, reopen-logs, upgrade, workers, ready and the pool actions).'],
];

function exitStatus(): string {
  let out = '.SH EXIT STATUS\n';
  for (const [code, what] of EXIT_CODES) out += `.TP\n.B ${code}\n${roff(what)}\n`;
  return out;
}

/** Where each command's page is: fcgi-pm-status(8) for `fcgi-pm status`. */
export function commandPageName(command: Command): string {
  return `fcgi-pm-${command.name()}`;
}

/** One command's page (man fcgi-pm-status), as git has one per verb: its --help, the exit codes. */
export function renderCommandManPage(command: Command, version: string, date: string): string {
  let out = header(commandPageName(command), 8, date, version, command.description().split('\n')[0]!.replace(/[.]$/, ''));
  out += `.SH SYNOPSIS\n.B fcgi\\-pm ${roff(command.name())}\n[\\fIoptions\\fR]\n`;
  out += `.SH DESCRIPTION\n${block(command.helpInformation())}`;
  out += exitStatus();
  out += `.SH SEE ALSO\n\\fBfcgi\\-pm\\fR(8), \\fBfcgi\\-pm.yaml\\fR(5)\n`;
  return out;
}

export function renderConfigManPage(version: string, date: string): string {
  let out = header('fcgi-pm.yaml', 5, date, version, 'fcgi-pm configuration file');
  out += `.SH DESCRIPTION\nA YAML (or JSON) file given to \\fBfcgi\\-pm run \\-c\\fR FILE. \\fBfcgi\\-pm check \\-c\\fR FILE validates it and the host it would run on.\n`;
  out += `.SH EXAMPLE\n${block(`listen:
  - { protocol: fastcgi, address: "unix:/run/fcgi-pm/php.sock", pool: php, owner: www-data, mode: "0660" }
pools:
  php:
    command: [php-cgi]
    user: www-data
    pm: ondemand
    max_children: 8`)}`;
  out += '.SH KEYS\n';
  for (const k of CONFIG_KEYS) {
    const def = k.required ? 'required' : k.default === '' ? '' : `default: ${k.default}`;
    out += `.TP\n.B ${roff(k.path)}\n.I ${roff(k.type)}${def ? ` \\(em ${roff(def)}` : ''}\n.br\n${roff(k.description)}\n`;
  }
  out += `.SH SEE ALSO\n\\fBfcgi\\-pm\\fR(8)\n`;
  return out;
}

/** A page for a program whose --help text is the reference (fcgi-pm-wsgi's argparse help). */
export function renderHelpManPage(name: string, section: number, version: string, date: string, summary: string, help: string): string {
  return `${header(name, section, date, version, summary)}.SH DESCRIPTION\n${block(help)}.SH SEE ALSO\n\\fBfcgi\\-pm\\fR(8)\n`;
}

function optionWords(options: readonly Option[]): string[] {
  const out: string[] = [];
  for (const o of options) {
    if (o.long !== undefined) out.push(o.long);
    if (o.short !== undefined) out.push(o.short);
  }
  return out;
}

/** A bash completion for the commands and their options (file names after -c). */
export function renderBashCompletion(program: Command): string {
  const global = optionWords(program.options).concat(['--help']);
  const cases = program.commands
    .map((c) => `    ${c.name()}) opts="${optionWords(c.options).concat(['--help']).join(' ')}" ;;`)
    .join('\n');
  return `# bash completion for fcgi-pm (generated from its command line definition)
_fcgi_pm() {
  local cur prev cmd opts i
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  case "$prev" in
    -c|--config|--control|--document-root) COMPREPLY=( $(compgen -f -- "$cur") ); return ;;
  esac
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in -*) ;; *) cmd="\${COMP_WORDS[i]}"; break ;; esac
  done
  if [ -z "$cmd" ]; then
    COMPREPLY=( $(compgen -W "${program.commands.map((c) => c.name()).join(' ')} help ${global.join(' ')}" -- "$cur") )
    return
  fi
  case "$cmd" in
${cases}
    *) opts="" ;;
  esac
  COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
}
complete -F _fcgi_pm fcgi-pm
`;
}

/** What follows an option that takes a value: a file, a directory, or anything. */
function valueKind(o: Option): 'file' | 'dir' | 'value' | undefined {
  if (!o.required && !o.optional) return undefined;
  if (/^--(config|control)$/.test(o.long ?? '')) return 'file';
  if (o.long === '--document-root') return 'dir';
  return 'value';
}

function escapeSingle(s: string): string {
  return s.replace(/'/g, "'\\''");
}

/** A zsh completion (_fcgi-pm) for the commands and their options. */
export function renderZshCompletion(program: Command): string {
  const spec = (o: Option): string => {
    const kind = valueKind(o);
    const desc = escapeSingle(o.description.replace(/[[\]:]/g, ' ')).slice(0, 80);
    const action = kind === 'file' ? ':file:_files' : kind === 'dir' ? ':directory:_files -/' : kind === 'value' ? ':value: ' : '';
    const names = [o.short, o.long].filter((n): n is string => n !== undefined);
    const head = names.length > 1 ? `'(${names.join(' ')})'{${names.join(',')}}'` : `'${names[0]}`;
    return `${head}[${desc}]${action}'`;
  };
  const commands = program.commands.map((c) => `    '${c.name()}:${escapeSingle(c.description().split('\n')[0]!.replace(/:/g, ' ')).slice(0, 90)}'`).join('\n');
  const cases = program.commands.map((c) => `    (${c.name()})\n      _arguments -s ${c.options.map(spec).join(' ')}\n      ;;`).join('\n');
  return `#compdef fcgi-pm
# zsh completion for fcgi-pm (generated from its command line definition)
_fcgi-pm() {
  local curcontext="$curcontext" state line
  local -a commands
  commands=(
${commands}
  )
  _arguments -C ${program.options.map(spec).join(' ')} '1:command:->command' '*::arg:->args'
  case $state in
    (command) _describe -t commands 'fcgi-pm command' commands ;;
    (args)
      case $line[1] in
${cases}
      esac
      ;;
  esac
}
_fcgi-pm "$@"
`;
}

/** A fish completion for the commands and their options. */
export function renderFishCompletion(program: Command): string {
  const names = program.commands.map((c) => c.name()).join(' ');
  const lines = [`# fish completion for fcgi-pm (generated from its command line definition)`, `complete -c fcgi-pm -f`];
  const quote = (s: string): string => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  for (const c of program.commands) lines.push(`complete -c fcgi-pm -n "not __fish_seen_subcommand_from ${names}" -a ${c.name()} -d ${quote(c.description().split('\n')[0]!.slice(0, 90))}`);
  const option = (o: Option, cond: string): string => {
    const kind = valueKind(o);
    const parts = [`complete -c fcgi-pm -n "${cond}"`];
    if (o.short !== undefined) parts.push(`-s ${o.short.replace(/^-/, '')}`);
    if (o.long !== undefined) parts.push(`-l ${o.long.replace(/^--/, '')}`);
    if (kind === 'file' || kind === 'dir') parts.push('-r -F');
    else if (kind === 'value') parts.push('-r');
    parts.push(`-d ${quote(o.description.slice(0, 90))}`);
    return parts.join(' ');
  };
  for (const o of program.options) lines.push(option(o, `not __fish_seen_subcommand_from ${names}`));
  for (const c of program.commands) for (const o of c.options) lines.push(option(o, `__fish_seen_subcommand_from ${c.name()}`));
  return `${lines.join('\n')}\n`;
}
