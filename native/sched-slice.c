/*
 * A thread's CPU time slice (sched_setattr(2) sched_runtime for SCHED_OTHER and
 * SCHED_BATCH: Linux 6.12's EEVDF "custom slice"), which Node has no call for. A task
 * with a shorter slice than the one running may take the CPU from it when it wakes; one
 * with a longer slice never does, and is taken from. The weight (nice, the cgroup's
 * share) is kept: the slice changes who runs first, not how much each gets.
 */
#define _GNU_SOURCE
#include <node_api.h>

#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr, SCHED_ATTR_SIZE_VER1 (56 bytes). */
struct slice_attr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

#define RESET_ON_FORK 0x01

/*
 * setSlice(tid, ns[, resetOnFork]) -> 0, or the errno (0 ns: the kernel's default slice
 * again). A real-time or idle thread is left alone (0). A child inherits its parent's
 * slice; resetOnFork true makes the thread's children start with the kernel's default
 * (SCHED_FLAG_RESET_ON_FORK), as a process that spawns others wants for its own slice.
 */
static napi_value set_slice(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t tid = 0;
  double ns = 0;
  bool reset = false;
  int err = 0;
  if (argc >= 3) napi_get_value_bool(env, argv[2], &reset);
  if (argc < 2 || napi_get_value_int32(env, argv[0], &tid) != napi_ok || napi_get_value_double(env, argv[1], &ns) != napi_ok || tid <= 0 || ns < 0) {
    err = EINVAL;
  } else {
    struct slice_attr a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0) {
      err = errno;
    } else if (a.sched_policy == SCHED_OTHER || a.sched_policy == SCHED_BATCH) {
      a.size = sizeof a;
      a.sched_flags &= RESET_ON_FORK;
      if (reset) a.sched_flags |= RESET_ON_FORK;
      a.sched_runtime = (uint64_t)ns;
      if (syscall(SYS_sched_setattr, tid, &a, 0) != 0) err = errno;
    }
  }
  napi_value out;
  napi_create_int32(env, err, &out);
  return out;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "setSlice", NAPI_AUTO_LENGTH, set_slice, NULL, &fn);
  napi_set_named_property(env, exports, "setSlice", fn);
  return exports;
}
