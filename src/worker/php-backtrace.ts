/**
 * The PHP call stack of a running php-cgi worker, read from its memory, for the slow log
 * (PHP-FPM's slowlog; its fpm_php_trace.c reads the same structures through ptrace, in its
 * own child whose addresses it knows). Here the worker is another program: its
 * `executor_globals` is found in php-cgi's dynamic symbol table (exported for extensions,
 * so stock Debian builds have it) plus where /proc/PID/maps says the program is loaded,
 * and the memory is read through /proc/PID/mem (root, or the workers' own user with
 * ptrace allowed). The worker is not stopped: a request slow enough to be logged sits
 * still, and every pointer is checked before it is followed, so a stack that changes
 * while it is read gives fewer frames, never a wrong one made up.
 *
 * The structures, as in Debian 12's PHP 8.2 (LP64, non-ZTS; the vm stack fields beside
 * current_execute_data are checked first, so another layout says so instead of guessing):
 *   zend_executor_globals: current_execute_data at 488, after vm_stack_top (456),
 *     vm_stack_end (464), vm_stack (472), vm_stack_page_size (480)
 *   zend_execute_data: opline 0, func 24, This.u1.type_info 40, prev_execute_data 48
 *   zend_function: type 0 (1 internal, 2 user), function_name 8, scope 16
 *   zend_class_entry: name 8; zend_string: len 16, val 24; zend_op: lineno 24
 *   zend_op_array.filename: its offset moved between versions; found on the main frame,
 *     whose file is the request's SCRIPT_FILENAME.
 */
import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync } from 'node:fs';
import { childrenOf } from './children.js';

const EG_CURRENT_EXECUTE_DATA = 488;
const EG_VM_STACK_TOP = 456;
const ED_OPLINE = 0;
const ED_FUNC = 24;
const ED_PREV = 48;
const FN_TYPE = 0;
const FN_NAME = 8;
const FN_SCOPE = 16;
const CE_NAME = 8;
const STR_LEN = 16;
const STR_VAL = 24;
const OP_LINENO = 24;
const MAX_FRAMES = 50;
const USER_FUNCTION = 2;

export interface PhpFrame {
  /** "sleep", "Foo::bar", "[include]" */
  function: string;
  /** Where it was called: the caller's file and line. */
  file?: string;
  line?: number;
}

const symbols = new Map<string, { mtimeMs: number; value: number | undefined; pie: boolean }>();
/** zend_op_array.filename's offset per php-cgi program, once found. */
const filenameOffsets = new Map<string, number>();

/**
 * The stack of the PHP request `pid` runs, innermost call first, or why it cannot be
 * read. `script`: the request's SCRIPT_FILENAME (finds zend_op_array.filename), undefined where fcgi-pm does not see the request.
 */
export function phpBacktrace(pid: number, script: string | undefined): PhpFrame[] | string {
  let exe: string;
  try {
    exe = realpathSync(`/proc/${pid}/exe`);
  } catch (err) {
    return `cannot read /proc/${pid}/exe (${(err as NodeJS.ErrnoException).code})`;
  }
  const sym = executorGlobals(exe);
  if (sym.value === undefined) return `${exe} exports no executor_globals`;
  const base = sym.pie ? loadBase(pid, exe) : 0;
  if (base === undefined) return `${exe} not found in /proc/${pid}/maps`;
  let mem: Memory;
  try {
    mem = new Memory(pid);
  } catch (err) {
    return `cannot read /proc/${pid}/mem (${(err as NodeJS.ErrnoException).code}): fcgi-pm needs root, or ptrace allowed on its workers`;
  }
  try {
    return walk(mem, base + sym.value, exe, script);
  } finally {
    mem.close();
  }
}

function walk(mem: Memory, eg: number, exe: string, script: string | undefined): PhpFrame[] | string {
  const top = mem.ptr(eg + EG_VM_STACK_TOP);
  const end = mem.ptr(eg + EG_VM_STACK_TOP + 8);
  let ed = mem.ptr(eg + EG_CURRENT_EXECUTE_DATA);
  if (ed === undefined || top === undefined || end === undefined) return 'executor_globals unreadable';
  if (ed === 0) return 'no PHP code running';
  if (!(top <= end)) return 'executor_globals does not look like this PHP version\'s';
  // The frames, outermost last.
  const eds: number[] = [];
  while (ed !== undefined && ed !== 0 && eds.length < MAX_FRAMES) {
    eds.push(ed);
    ed = mem.ptr(ed + ED_PREV);
  }
  const nameOff = filenameOffset(mem, exe, eds[eds.length - 1]!, script);
  const frames: PhpFrame[] = [];
  for (let i = 0; i < eds.length; i++) {
    const func = mem.ptr(eds[i]! + ED_FUNC);
    if (func === undefined || func === 0) break;
    const nameStr = mem.ptr(func + FN_NAME);
    if (nameStr === undefined) break;
    let name: string;
    if (nameStr === 0) {
      if (i === eds.length - 1) break; // the script itself: its calls are the frames above
      name = '[include or eval]';
    } else {
      const fn = mem.zstr(nameStr);
      if (fn === undefined) break;
      const scope = mem.ptr(func + FN_SCOPE);
      const cls = scope !== undefined && scope !== 0 ? mem.zstr(mem.ptr(scope + CE_NAME) ?? 0) : undefined;
      name = cls === undefined ? fn : `${cls}::${fn}`;
    }
    const frame: PhpFrame = { function: name };
    const caller = eds[i + 1];
    if (caller !== undefined && nameOff !== undefined) {
      const cf = mem.ptr(caller + ED_FUNC);
      if (cf !== undefined && cf !== 0 && mem.u8(cf + FN_TYPE) === USER_FUNCTION) {
        const file = mem.zstr(mem.ptr(cf + nameOff) ?? 0);
        const opline = mem.ptr(caller + ED_OPLINE);
        const line = opline === undefined || opline === 0 ? undefined : mem.u32(opline + OP_LINENO);
        if (file !== undefined) frame.file = file;
        if (line !== undefined) frame.line = line;
      }
    }
    frames.push(frame);
  }
  return frames;
}

/**
 * zend_op_array.filename's offset: the field of the main frame's op_array that points at
 * SCRIPT_FILENAME, or where the request is not known (a direct pool's worker) at a file
 * that exists.
 */
function filenameOffset(mem: Memory, exe: string, mainEd: number, script: string | undefined): number | undefined {
  const known = filenameOffsets.get(exe);
  if (known !== undefined) return known;
  const func = mem.ptr(mainEd + ED_FUNC);
  if (func === undefined || func === 0) return undefined;
  const want = script === undefined ? undefined : [script, safeRealpath(script)];
  for (let off = 64; off <= 256; off += 8) {
    const s = mem.zstr(mem.ptr(func + off) ?? 0);
    if (s === undefined || !s.startsWith('/')) continue;
    if (want !== undefined ? !want.includes(s) : !isFile(s)) continue;
    filenameOffsets.set(exe, off);
    return off;
  }
  return undefined;
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

function safeRealpath(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

/** executor_globals' value in the program's .dynsym, and whether the program is position-independent. */
function executorGlobals(exe: string): { value: number | undefined; pie: boolean } {
  const mtimeMs = statSync(exe).mtimeMs;
  const hit = symbols.get(exe);
  if (hit !== undefined && hit.mtimeMs === mtimeMs) return hit;
  const found = { mtimeMs, ...findDynamicSymbol(readFileSync(exe), 'executor_globals') };
  symbols.set(exe, found);
  return found;
}

/** An ELF64 little-endian file's dynamic symbol `name`: its value, and whether it is ET_DYN (PIE). */
export function findDynamicSymbol(elf: Buffer, name: string): { value: number | undefined; pie: boolean } {
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) return { value: undefined, pie: false };
  const pie = elf.readUInt16LE(16) === 3;
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const shentsize = elf.readUInt16LE(0x3a);
  const shnum = elf.readUInt16LE(0x3c);
  const section = (i: number): { type: number; offset: number; size: number; link: number; entsize: number } => {
    const at = shoff + i * shentsize;
    return { type: elf.readUInt32LE(at + 4), offset: Number(elf.readBigUInt64LE(at + 0x18)), size: Number(elf.readBigUInt64LE(at + 0x20)), link: elf.readUInt32LE(at + 0x28), entsize: Number(elf.readBigUInt64LE(at + 0x38)) };
  };
  const want = Buffer.from(`${name}\0`);
  for (let i = 0; i < shnum; i++) {
    const sec = section(i);
    if (sec.type !== 11 /* SHT_DYNSYM */ || sec.entsize === 0) continue;
    const strtab = section(sec.link);
    for (let at = sec.offset; at + sec.entsize <= sec.offset + sec.size; at += sec.entsize) {
      const nameAt = strtab.offset + elf.readUInt32LE(at);
      if (elf.compare(want, 0, want.length, nameAt, nameAt + want.length) === 0) return { value: Number(elf.readBigUInt64LE(at + 8)), pie };
    }
  }
  return { value: undefined, pie };
}

/** Where `exe` is mapped at file offset 0 in the process: its load address. */
function loadBase(pid: number, exe: string): number | undefined {
  let maps: string;
  try {
    maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return undefined;
  }
  for (const line of maps.split('\n')) {
    const f = line.split(/\s+/);
    if (f[5] === exe && f[2] === '00000000') return parseInt(f[0]!.split('-')[0]!, 16);
  }
  return undefined;
}

/** Bounded reads of another process's memory; undefined for what cannot be read. */
class Memory {
  private readonly fd: number;
  private readonly buf = Buffer.alloc(8);

  constructor(pid: number) {
    this.fd = openSync(`/proc/${pid}/mem`, 'r');
  }

  close(): void {
    closeSync(this.fd);
  }

  private read(addr: number, n: number, into = this.buf): boolean {
    if (!Number.isSafeInteger(addr) || addr < 4096) return false;
    try {
      return readSync(this.fd, into, 0, n, addr) === n;
    } catch {
      return false;
    }
  }

  ptr(addr: number): number | undefined {
    if (!this.read(addr, 8)) return undefined;
    const v = this.buf.readBigUInt64LE(0);
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(v);
  }

  u32(addr: number): number | undefined {
    return this.read(addr, 4) ? this.buf.readUInt32LE(0) : undefined;
  }

  u8(addr: number): number | undefined {
    return this.read(addr, 1) ? this.buf[0] : undefined;
  }

  /** A zend_string's text: printable, at most 4 KiB. */
  zstr(addr: number): string | undefined {
    if (addr === 0) return undefined;
    const len = this.ptr(addr + STR_LEN);
    if (len === undefined || len === 0 || len > 4096) return undefined;
    const out = Buffer.alloc(len);
    if (!this.read(addr + STR_VAL, len, out)) return undefined;
    const s = out.toString('utf8');
    return /^[\x20-\x7e\u00a0-\uffff]+$/.test(s) ? s : undefined;
  }
}

/** PHP-FPM's slowlog lines: "sleep() /srv/slow.php:3". */
export function formatBacktrace(frames: readonly PhpFrame[]): string[] {
  return frames.map((f) => `${f.function}() ${f.file ?? 'unknown'}:${f.line ?? 0}`);
}

/**
 * The stack of the php-cgi serving a request on worker `pid`: the worker itself, or in a
 * php-cgi group (a parent that forked its children) the child running a script.
 */
export function requestBacktrace(pid: number, script: string | undefined): PhpFrame[] | string {
  const own = phpBacktrace(pid, script);
  if (typeof own !== 'string' && own.length > 0) return own;
  for (const child of childrenOf(pid)) {
    const frames = phpBacktrace(child, script);
    if (typeof frames !== 'string' && frames.length > 0) return frames;
  }
  return own;
}
