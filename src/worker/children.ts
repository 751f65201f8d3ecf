/**
 * The child processes of a worker (a php-cgi group's parent forks its PHP_FCGI_CHILDREN
 * children itself): from /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN, one read per
 * thread), else by scanning /proc for processes whose PPid is the worker. Linux only;
 * elsewhere no children are known.
 */
import fs from 'node:fs';

/** Pids of `pid`'s live children, ascending; [] when unknown. */
export function childrenOf(pid: number, proc = '/proc'): number[] {
  const fromTasks = readTaskChildren(pid, proc);
  const pids = fromTasks ?? scanForParent(pid, proc);
  return pids.sort((a, b) => a - b);
}

function readTaskChildren(pid: number, proc: string): number[] | undefined {
  let tasks: string[];
  try {
    tasks = fs.readdirSync(`${proc}/${pid}/task`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const tid of tasks) {
    let text: string;
    try {
      text = fs.readFileSync(`${proc}/${pid}/task/${tid}/children`, 'latin1');
    } catch (err) {
      // No such file: the kernel lacks CONFIG_PROC_CHILDREN; a thread that went is fine.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && fs.existsSync(`${proc}/${pid}/task/${tid}`)) return undefined;
      continue;
    }
    for (const f of text.split(' ')) if (f !== '' && f !== '\n') out.push(Number(f));
  }
  return out;
}

function scanForParent(pid: number, proc: string): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = fs.readdirSync(proc);
  } catch {
    return out;
  }
  for (const name of names) {
    if (name.charCodeAt(0) < 48 || name.charCodeAt(0) > 57) continue;
    try {
      const stat = fs.readFileSync(`${proc}/${name}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
