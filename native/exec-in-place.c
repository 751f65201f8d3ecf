/*
 * Upgrade in place that keeps the pid: execve(2) for Node 20, which has no
 * process.execve (Node 22.15 has).
 *
 * libuv opens every descriptor close-on-exec (Node's stdin, stdout and stderr too), so the listening sockets to keep are first
 * duplicated (dupForExec: a second descriptor for the same socket, still close-on-exec, so
 * the daemon may close its servers and stop accepting while the kernel keeps queueing
 * connections on the socket), then exec() clears close-on-exec on exactly those and calls
 * execve. The descriptors keep their numbers: nothing else of the process is moved, so an
 * execve that fails (the program gone, E2BIG, ENOMEM) restores their flags and the signal
 * mask and returns an error, and the daemon carries on in its old code.
 *
 * Beside it, what a worker needs from the daemon: a spawn that copies no page tables
 * (spawn: a vfork-style clone, the daemon's main thread waits only for the exec), output
 * pipes whose numbers the daemon knows (pipeForChild), and a reaper for children libuv
 * did not spawn (reap).
 */
#define _GNU_SOURCE
#include <node_api.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <grp.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_value code, message, error;
  const char *name = err == ENOENT ? "ENOENT" : err == EACCES ? "EACCES" : err == EBADF ? "EBADF" : err == E2BIG ? "E2BIG" : err == ENOMEM ? "ENOMEM" : "EEXEC";
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_throw(env, error);
  return NULL;
}

/* A JS string as a malloc'd C string (NULL when not a string). */
static char *string_arg(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *s = malloc(len + 1);
  if (s == NULL) return NULL;
  napi_get_value_string_utf8(env, v, s, len + 1, &len);
  return s;
}

/* A JS array of strings as a NULL-terminated vector; *count its length. */
static char **string_array(napi_env env, napi_value arr, uint32_t *count) {
  uint32_t n = 0;
  if (napi_get_array_length(env, arr, &n) != napi_ok) return NULL;
  char **out = calloc(n + 1, sizeof(char *));
  if (out == NULL) return NULL;
  for (uint32_t i = 0; i < n; i++) {
    napi_value el;
    napi_get_element(env, arr, i, &el);
    out[i] = string_arg(env, el);
    if (out[i] == NULL) {
      for (uint32_t j = 0; j < i; j++) free(out[j]);
      free(out);
      return NULL;
    }
  }
  *count = n;
  return out;
}

static void free_vector(char **v, uint32_t n) {
  if (v == NULL) return;
  for (uint32_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* dupForExec(fd) -> a new close-on-exec descriptor for the same open file. */
static napi_value dup_for_exec(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok) return throw_errno(env, "dupForExec", EBADF);
  int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return throw_errno(env, "dupForExec", errno);
  napi_value out;
  napi_create_int32(env, copy, &out);
  return out;
}

/* closeFd(fd): a duplicate no longer needed (an exec that fell back). */
static napi_value close_fd(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t fd = -1;
  if (argc >= 1 && napi_get_value_int32(env, argv[0], &fd) == napi_ok && fd > 2) close(fd);
  return NULL;
}

/*
 * exec(file, argv[], env[], keep[]): returns only on failure, by throwing. `keep` are the
 * descriptors the new program inherits at their numbers.
 */
static napi_value exec_in_place(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value args[4];
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  if (argc < 4) return throw_errno(env, "exec: file, argv, env and keep are required", EINVAL);
  char *file = string_arg(env, args[0]);
  uint32_t nargv = 0, nenv = 0, nkeep = 0;
  char **argv = string_array(env, args[1], &nargv);
  char **envp = string_array(env, args[2], &nenv);
  napi_get_array_length(env, args[3], &nkeep);
  int *keep = calloc(nkeep + 4, sizeof(int));
  int *flags = calloc(nkeep + 4, sizeof(int));
  if (file == NULL || argv == NULL || envp == NULL || keep == NULL || flags == NULL) {
    free(file);
    free_vector(argv, nargv);
    free_vector(envp, nenv);
    free(keep);
    free(flags);
    return throw_errno(env, "exec: bad arguments", EINVAL);
  }
  /* Node opens stdin, stdout and stderr close-on-exec too: the new program keeps them. */
  uint32_t cleared = 0;
  int err = 0;
  for (; cleared < nkeep + 3; cleared++) {
    int32_t fd = -1;
    if (cleared < 3) {
      fd = (int32_t)cleared;
    } else {
      napi_value el;
      napi_get_element(env, args[3], cleared - 3, &el);
      napi_get_value_int32(env, el, &fd);
    }
    keep[cleared] = fd;
    flags[cleared] = fcntl(fd, F_GETFD);
    if (flags[cleared] < 0 && cleared < 3) continue; /* a closed stdio descriptor stays closed */
    if (flags[cleared] < 0 || fcntl(fd, F_SETFD, flags[cleared] & ~FD_CLOEXEC) < 0) {
      err = errno;
      break;
    }
  }
  if (err == 0) {
    /* The new program starts with no signal blocked, as it would from a shell. */
    sigset_t none, old;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, &old);
    execve(file, argv, envp);
    err = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
  }
  for (uint32_t i = 0; i < cleared; i++)
    if (flags[i] >= 0) fcntl(keep[i], F_SETFD, flags[i]);
  char what[400];
  snprintf(what, sizeof what, "execve %s", file);
  free(file);
  free_vector(argv, nargv);
  free_vector(envp, nenv);
  free(keep);
  free(flags);
  return throw_errno(env, what, err);
}

/*
 * pipeForChild() -> [read, write]: a pipe for a worker's stdout or stderr, both ends
 * close-on-exec, whose numbers the daemon knows (libuv's own stdio pipes are socketpairs
 * whose descriptors Node does not say): an exec in place keeps the read end for the new code.
 */
static napi_value pipe_for_child(napi_env env, napi_callback_info info) {
  (void)info;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return throw_errno(env, "pipe2", errno);
  napi_value out, r, w;
  napi_create_array_with_length(env, 2, &out);
  napi_create_int32(env, fds[0], &r);
  napi_create_int32(env, fds[1], &w);
  napi_set_element(env, out, 0, r);
  napi_set_element(env, out, 1, w);
  return out;
}

/*
 * reap(pid) -> undefined while it runs; {code} or {signal} once it exited (reaped now);
 * {gone: true} when it is no child of ours (already reaped). For the workers an exec in
 * place handed to the new code: they are still this process's children, but libuv reaps
 * only the children it spawned itself.
 */
static napi_value reap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t pid = -1;
  if (argc < 1 || napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0) return throw_errno(env, "reap", EINVAL);
  int status = 0;
  pid_t r;
  do r = waitpid(pid, &status, WNOHANG);
  while (r < 0 && errno == EINTR);
  napi_value out, v;
  if (r == 0) {
    napi_get_undefined(env, &out);
    return out;
  }
  napi_create_object(env, &out);
  if (r < 0) {
    napi_get_boolean(env, true, &v);
    napi_set_named_property(env, out, "gone", v);
  } else if (WIFSIGNALED(status)) {
    napi_create_int32(env, WTERMSIG(status), &v);
    napi_set_named_property(env, out, "signal", v);
  } else {
    napi_create_int32(env, WEXITSTATUS(status), &v);
    napi_set_named_property(env, out, "code", v);
  }
  return out;
}

/*
 * spawn(file, argv[], env[], fds[], cwd, uid, gid) -> pid, or -errno when the child could
 * not be set up or exec'd (it is reaped here then). What libuv's uv_spawn does for Node's
 * child_process.spawn with `detached`, but through clone(CLONE_VM | CLONE_VFORK), as glibc's
 * posix_spawn does: libuv forks, which copies the page tables of the whole daemon (3.6 ms
 * from 45 MiB, 6-15 ms from 230 MiB, tens of ms under load: docs/BENCHMARKS.md), and
 * Node waits for the exec anyway. The child shares the daemon's memory until its execve,
 * so it allocates nothing, takes no lock and calls only system calls: everything is
 * prepared here first, every signal is blocked around the clone (no handler of the daemon
 * runs in the child), and the ids are set by raw system calls (glibc's setuid would signal
 * the daemon's other threads). In the child: a new session (detached), fds[i] at i (-1:
 * /dev/null; 0-2 blocking), cwd (NULL: the daemon's), no supplementary groups and gid then uid when
 * either is >= 0, signals 1-31 at their default and none blocked, execve. The parent
 * (the thread that calls, the main thread: setpriv's --pdeathsig is bound to it) resumes
 * once the child exec'd or died.
 */
struct child_args {
  const char *file;
  char **argv;
  char **envp;
  const int *fds;
  int nfds;
  const char *cwd;
  int uid, gid;
  volatile int err;
};

/* The child's stack until its exec: its own mapping, so that any thread may spawn. */
#define CHILD_STACK (64 * 1024)

static int child_fail(struct child_args *a, int err) {
  a->err = err;
  _exit(127);
}

static int child_main(void *arg) {
  struct child_args *a = arg;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < 32; sig++)
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, NULL);
  /* Handlers beyond 31 (none in Node, but a handler must never run in the child). */
  for (int sig = 32; sig < NSIG; sig++) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) sigaction(sig, &dfl, NULL);
  }
  if (setsid() < 0) return child_fail(a, errno);
  /* A source below nfds would be overwritten by an earlier dup2: move it up first. */
  int fds[16];
  for (int i = 0; i < a->nfds; i++) {
    fds[i] = a->fds[i];
    if (fds[i] >= 0 && fds[i] < a->nfds && fds[i] != i) {
      fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, a->nfds);
      if (fds[i] < 0) return child_fail(a, errno);
    }
  }
  for (int i = 0; i < a->nfds; i++) {
    int fd = fds[i];
    if (fd < 0) {
      fd = open("/dev/null", i == 0 ? O_RDONLY : O_RDWR);
      if (fd < 0) return child_fail(a, errno);
    }
    if (fd == i) {
      if (fcntl(fd, F_SETFD, 0) < 0) return child_fail(a, errno);
    } else {
      if (dup2(fd, i) < 0) return child_fail(a, errno);
      if (fds[i] < 0) close(fd);
    }
    /* Blocking stdio, as libuv leaves it (fd 0 may be the worker's listening socket, opened non-blocking by the daemon). */
    if (i <= 2) {
      int fl = fcntl(i, F_GETFL);
      if (fl >= 0 && (fl & O_NONBLOCK)) fcntl(i, F_SETFL, fl & ~O_NONBLOCK);
    }
  }
  if (a->cwd != NULL && chdir(a->cwd) < 0) return child_fail(a, errno);
  if (a->uid >= 0 || a->gid >= 0) syscall(SYS_setgroups, 0, NULL); /* fails unless root: optimistic, as libuv */
  if (a->gid >= 0 && syscall(SYS_setgid, a->gid) < 0) return child_fail(a, errno);
  if (a->uid >= 0 && syscall(SYS_setuid, a->uid) < 0) return child_fail(a, errno);
  sigset_t none;
  sigemptyset(&none);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, (size_t)(NSIG / 8));
  execve(a->file, a->argv, a->envp);
  return child_fail(a, errno);
}

static napi_value spawn_worker(napi_env env, napi_callback_info info) {
  size_t argc = 7;
  napi_value args[7];
  napi_get_cb_info(env, info, &argc, args, NULL, NULL);
  if (argc < 7) return throw_errno(env, "spawn: file, argv, env, fds, cwd, uid and gid are required", EINVAL);
  struct child_args a;
  memset(&a, 0, sizeof a);
  uint32_t nargv = 0, nenv = 0, nfds = 0;
  char *file = string_arg(env, args[0]);
  char *cwd = string_arg(env, args[4]);
  char **argv = string_array(env, args[1], &nargv);
  char **envp = string_array(env, args[2], &nenv);
  int fds[16];
  int bad = file == NULL || argv == NULL || envp == NULL || napi_get_array_length(env, args[3], &nfds) != napi_ok || nfds > 16;
  for (uint32_t i = 0; !bad && i < nfds; i++) {
    napi_value el;
    napi_get_element(env, args[3], i, &el);
    bad = napi_get_value_int32(env, el, &fds[i]) != napi_ok;
  }
  int32_t uid = -1, gid = -1;
  napi_get_value_int32(env, args[5], &uid);
  napi_get_value_int32(env, args[6], &gid);
  int result;
  if (bad) {
    result = -EINVAL;
  } else {
    a.file = file;
    a.argv = argv;
    a.envp = envp;
    a.fds = fds;
    a.nfds = (int)nfds;
    a.cwd = cwd;
    a.uid = uid;
    a.gid = gid;
    sigset_t all, old;
    sigfillset(&all);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, &old, (size_t)(NSIG / 8));
    char *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    pid_t pid = -1;
    int err = ENOMEM;
    if (stack != MAP_FAILED) {
      pid = clone(child_main, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
      err = pid < 0 ? errno : a.err;
      munmap(stack, CHILD_STACK);
    }
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, (size_t)(NSIG / 8));
    if (pid > 0 && err != 0) {
      /* It exited before its exec: reaped here, the error returned. */
      while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
      }
    }
    result = err != 0 ? -err : pid;
  }
  free(file);
  free(cwd);
  free_vector(argv, nargv);
  free_vector(envp, nenv);
  napi_value out;
  napi_create_int32(env, result, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
    {"dupForExec", NULL, dup_for_exec, NULL, NULL, NULL, napi_default, NULL},
    {"closeFd", NULL, close_fd, NULL, NULL, NULL, napi_default, NULL},
    {"exec", NULL, exec_in_place, NULL, NULL, NULL, napi_default, NULL},
    {"pipeForChild", NULL, pipe_for_child, NULL, NULL, NULL, napi_default, NULL},
    {"reap", NULL, reap, NULL, NULL, NULL, napi_default, NULL},
    {"spawn", NULL, spawn_worker, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
