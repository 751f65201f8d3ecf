/*
 * The shared socket of an `accept: direct` pool, held without libuv.
 *
 * Workers (php-cgi) get this listening socket as fd 0 and accept on it with blocking
 * accept(). Any libuv handle opened on it (net.Server, uv_poll_init) sets O_NONBLOCK on
 * the open file the workers share, and php-cgi then gets EAGAIN from accept() and exits.
 * So the socket is created here, stays blocking, and is watched through an epoll set of
 * our own: epoll_ctl never changes a file's flags. libuv polls the epoll descriptor,
 * which is ours alone.
 *
 * The watch is edge-triggered: one callback per wake-up of the listening socket (a new
 * connection in its queue), never a busy loop while connections wait for a worker.
 *
 * queued(fd) reads the accept queue's length and limit from the kernel: TCP_INFO on a
 * TCP listener (tcpi_unacked, tcpi_sacked), sock_diag UNIX_DIAG_RQLEN on a Unix one
 * (what `ss -lx` shows). Neither touches the socket's flags.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <uv.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static napi_value throw_errno(napi_env env, const char *what, int err) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s: %s", what, strerror(err));
  napi_value code, message, error;
  napi_create_string_utf8(env, err == EADDRINUSE ? "EADDRINUSE" : err == EACCES ? "EACCES" : err == ENOENT ? "ENOENT" : "ESOCKET", NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, code, message, &error);
  napi_throw(env, error);
  return NULL;
}

static int arg_int(napi_env env, napi_value v) {
  int32_t n = 0;
  napi_get_value_int32(env, v, &n);
  return n;
}

/* The first argument, a descriptor. */
static int fd_arg(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  return arg_int(env, argv[0]);
}

static napi_value make_int(napi_env env, int64_t n) {
  napi_value v;
  napi_create_int64(env, n, &v);
  return v;
}

/* listenUnix(path, backlog) -> fd */
static napi_value listen_unix(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  size_t len = 0;
  napi_get_value_string_utf8(env, argv[0], sa.sun_path, sizeof sa.sun_path, &len);
  if (len == 0 || len >= sizeof sa.sun_path - 1) return throw_errno(env, "socket path", ENAMETOOLONG);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, arg_int(env, argv[1])) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, sa.sun_path, e);
  }
  return make_int(env, fd);
}

/* listenTcp(host, port, backlog) -> fd; host is a numeric IPv4 or IPv6 address. */
static napi_value listen_tcp(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  char host[64];
  size_t len = 0;
  napi_get_value_string_utf8(env, argv[0], host, sizeof host, &len);
  int port = arg_int(env, argv[1]);
  struct sockaddr_storage ss;
  socklen_t sl;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    sl = sizeof *a4;
  } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    sl = sizeof *a6;
  } else {
    return throw_errno(env, "not a numeric address", EINVAL);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return throw_errno(env, "socket", errno);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, arg_int(env, argv[2])) < 0) {
    int e = errno;
    close(fd);
    return throw_errno(env, host, e);
  }
  return make_int(env, fd);
}

static napi_value close_fd(napi_env env, napi_callback_info info) {
  close(fd_arg(env, info));
  return NULL;
}

/* Whether the file is in O_NONBLOCK mode (tests check we never set it). */
static napi_value is_nonblocking(napi_env env, napi_callback_info info) {
  int fl = fcntl(fd_arg(env, info), F_GETFL);
  if (fl < 0) return throw_errno(env, "fcntl", errno);
  napi_value b;
  napi_get_boolean(env, (fl & O_NONBLOCK) != 0, &b);
  return b;
}

/* A socket systemd passed us with NonBlocking=yes: php-cgi needs it blocking. */
static napi_value make_blocking(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return throw_errno(env, "fcntl", errno);
  return NULL;
}

/* Unix listener: sock_diag by inode, UNIX_DIAG_RQLEN = {queued, backlog}. */
static int unix_queue(int fd, uint32_t *queued, uint32_t *limit) {
  struct stat st;
  if (fstat(fd, &st) < 0) return -errno;
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return -errno;
  struct {
    struct nlmsghdr nlh;
    struct unix_diag_req req;
  } msg;
  memset(&msg, 0, sizeof msg);
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.req.sdiag_family = AF_UNIX;
  msg.req.udiag_states = -1;
  msg.req.udiag_ino = (uint32_t)st.st_ino;
  msg.req.udiag_show = UDIAG_SHOW_RQLEN;
  msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = (uint32_t)~0U;
  int rc = -EIO;
  if (send(nl, &msg, sizeof msg, 0) < 0) {
    rc = -errno;
    close(nl);
    return rc;
  }
  char buf[1024];
  ssize_t n = recv(nl, buf, sizeof buf, 0);
  if (n < 0) rc = -errno;
  for (struct nlmsghdr *h = (struct nlmsghdr *)buf; n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      rc = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
      break;
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
    struct unix_diag_msg *m = NLMSG_DATA(h);
    int alen = h->nlmsg_len - NLMSG_LENGTH(sizeof *m);
    for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
      if (a->rta_type == UNIX_DIAG_RQLEN) {
        struct unix_diag_rqlen *q = RTA_DATA(a);
        *queued = q->udiag_rqueue;
        *limit = q->udiag_wqueue;
        rc = 0;
      }
    }
    break;
  }
  close(nl);
  return rc;
}

/* queued(fd) -> [waiting connections, backlog limit] */
static napi_value queued(napi_env env, napi_callback_info info) {
  int fd = fd_arg(env, info);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) return throw_errno(env, "getsockname", errno);
  uint32_t q = 0, lim = 0;
  if (ss.ss_family == AF_UNIX) {
    int rc = unix_queue(fd, &q, &lim);
    if (rc < 0) return throw_errno(env, "sock_diag", -rc);
  } else {
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0) return throw_errno(env, "TCP_INFO", errno);
    q = ti.tcpi_unacked; /* a listener's accept queue */
    lim = ti.tcpi_sacked; /* and its backlog */
  }
  napi_value arr;
  napi_create_array_with_length(env, 2, &arr);
  napi_set_element(env, arr, 0, make_int(env, q));
  napi_set_element(env, arr, 1, make_int(env, lim));
  return arr;
}

/* ---- the watch ------------------------------------------------------------------- */

typedef struct {
  uv_poll_t poll;
  int epfd;
  napi_env env;
  napi_ref callback;
  int closed;
} watch_t;

static void on_poll_closed(uv_handle_t *h) {
  watch_t *w = h->data;
  close(w->epfd);
  free(w);
}

static void on_epoll(uv_poll_t *p, int status, int events) {
  (void)events;
  watch_t *w = p->data;
  if (w->closed) return;
  struct epoll_event ev[4];
  /* Empty the ready list: edge-triggered, so the next wake-up is the next connection. */
  while (epoll_wait(w->epfd, ev, 4, 0) > 0) {
  }
  napi_handle_scope scope;
  napi_open_handle_scope(w->env, &scope);
  napi_value cb, global, st;
  napi_get_reference_value(w->env, w->callback, &cb);
  napi_get_global(w->env, &global);
  napi_create_int32(w->env, status, &st);
  napi_value result;
  napi_make_callback(w->env, NULL, global, cb, 1, &st, &result);
  napi_close_handle_scope(w->env, scope);
}

static napi_value unwatch(napi_env env, napi_callback_info info) {
  void *data;
  napi_get_cb_info(env, info, NULL, NULL, NULL, &data);
  watch_t *w = data;
  if (w == NULL || w->closed) return NULL;
  w->closed = 1;
  napi_delete_reference(env, w->callback);
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, on_poll_closed);
  return NULL;
}

/* watch(fd, callback) -> stop function. callback(status) on each new waiting connection. */
static napi_value watch(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int fd = arg_int(env, argv[0]);
  int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return throw_errno(env, "epoll_create1", errno);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data = {.fd = fd}};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
    int e = errno;
    close(epfd);
    return throw_errno(env, "epoll_ctl", e);
  }
  uv_loop_t *loop;
  napi_get_uv_event_loop(env, &loop);
  watch_t *w = calloc(1, sizeof *w);
  w->epfd = epfd;
  w->env = env;
  w->poll.data = w;
  napi_create_reference(env, argv[1], 1, &w->callback);
  /* Sets O_NONBLOCK on the epoll descriptor only: ours, shared with nobody. */
  if (uv_poll_init(loop, &w->poll, epfd) != 0 || uv_poll_start(&w->poll, UV_READABLE, on_epoll) != 0) {
    napi_delete_reference(env, w->callback);
    close(epfd);
    free(w);
    return throw_errno(env, "uv_poll", EIO);
  }
  napi_value stop;
  napi_create_function(env, "unwatch", NAPI_AUTO_LENGTH, unwatch, w, &stop);
  return stop;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"listenUnix", NULL, listen_unix, NULL, NULL, NULL, napi_default, NULL},
      {"listenTcp", NULL, listen_tcp, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, close_fd, NULL, NULL, NULL, napi_default, NULL},
      {"isNonBlocking", NULL, is_nonblocking, NULL, NULL, NULL, napi_default, NULL},
      {"makeBlocking", NULL, make_blocking, NULL, NULL, NULL, napi_default, NULL},
      {"queued", NULL, queued, NULL, NULL, NULL, napi_default, NULL},
      {"watch", NULL, watch, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, sizeof props / sizeof props[0], props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
