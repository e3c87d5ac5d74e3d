// A netlink socket for Node.js: socket/bind, sendmsg of several chunks to the kernel,
// datagrams read on a libuv poll handle and handed to JavaScript as Buffers, setsockopt and
// getsockopt (rlimit.c adds getrlimit/setrlimit, malloc_trim.c mallocTrim: Node lacks both). Kept small on purpose: the
// protocols live in TypeScript (src/netlink/).
//
// Rules this file keeps so that no input can take the process down:
// - every syscall error becomes a JavaScript value (an Error with errno, code, syscall);
// - a datagram of any size is read whole (peeked size) or reported as truncated (fixed size);
// - ENOBUFS from recvmsg (the kernel dropped replies) is reported and reading goes on;
// - close() may run at any time, also from inside a callback this file made: the poll loop
//   checks for it after every callback, and the memory is freed only once both the libuv
//   handle is closed and the JavaScript object is gone.

#include <errno.h>
#include <linux/netlink.h>
#include <node_api.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uv.h>

#include "malloc_trim.h"
#include "rlimit.h"

#define MAX_CHUNKS 1024      /* IOV_MAX on Linux */
#define READS_PER_WAKEUP 64  /* then yield to the event loop; the poll is level-triggered */
#define PEEK_FLOOR 4096      /* the scratch buffer never shrinks below this */
#define MAX_UNEXPLAINED 16
#define DRAIN_MAX 65536      /* datagrams read after an overrun before it is reported */
#define READ_OVERRUN 2

typedef struct {
  napi_env env;
  uv_poll_t poll;
  int fd;              /* -1 once closed */
  int handle_live;     /* uv_poll_init succeeded and the close callback has not run yet */
  int wrapper_live;    /* the JavaScript object has not been finalized yet */
  int listening;
  size_t fixed_bytes;  /* read into a buffer of this size; 0: peek at each datagram's size */
  char *scratch;
  size_t scratch_len;
  napi_ref on_message;
  napi_ref on_error;
  napi_async_context async_ctx;
  int unexplained_errors; /* poll errors in a row that SO_ERROR did not explain */
} nlsock;

static void maybe_free(nlsock *s) {
  if (s->handle_live || s->wrapper_live) return;
  free(s->scratch);
  free(s);
}

static void on_handle_closed(uv_handle_t *h) {
  nlsock *s = h->data;
  s->handle_live = 0;
  maybe_free(s);
}

/* An Error carrying errno (positive), code ("ENOBUFS") and syscall, as Node's own. */
/* Not static: rlimit.c throws the same errors. */
napi_value errno_error(napi_env env, int err, const char *syscall);
napi_value errno_error(napi_env env, int err, const char *syscall) {
  char msg[256];
  const char *code = uv_err_name(-err);
  snprintf(msg, sizeof msg, "%s: %s (%s)", syscall, strerror(err), code);
  napi_value text, error, v;
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &text);
  napi_create_error(env, NULL, text, &error);
  napi_create_int32(env, err, &v);
  napi_set_named_property(env, error, "errno", v);
  napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "code", v);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, error, "syscall", v);
  return error;
}

static napi_value throw_errno(napi_env env, int err, const char *syscall) {
  napi_throw(env, errno_error(env, err, syscall));
  return NULL;
}

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

static void close_socket(nlsock *s) {
  if (s->fd < 0) return;
  if (s->handle_live) {
    uv_poll_stop(&s->poll);
    uv_close((uv_handle_t *)&s->poll, on_handle_closed);
  }
  close(s->fd);
  s->fd = -1;
  s->listening = 0;
  if (s->on_message) napi_delete_reference(s->env, s->on_message);
  if (s->on_error) napi_delete_reference(s->env, s->on_error);
  s->on_message = s->on_error = NULL;
  if (s->async_ctx) napi_async_destroy(s->env, s->async_ctx);
  s->async_ctx = NULL;
}

static void finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nlsock *s = data;
  close_socket(s);
  s->wrapper_live = 0;
  maybe_free(s);
}

/* Calls a stored callback; an exception it throws goes to process 'uncaughtException'. */
static void call_js(nlsock *s, napi_ref fn_ref, napi_value arg) {
  napi_env env = s->env;
  napi_value fn, global, result;
  if (fn_ref == NULL || napi_get_reference_value(env, fn_ref, &fn) != napi_ok || fn == NULL) return;
  napi_get_global(env, &global);
  if (napi_make_callback(env, s->async_ctx, global, fn, 1, &arg, &result) == napi_pending_exception) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
}

static void report_errno(nlsock *s, int err, const char *syscall) {
  call_js(s, s->on_error, errno_error(s->env, err, syscall));
}

static int grow_scratch(nlsock *s, size_t want) {
  if (want <= s->scratch_len) return 0;
  char *p = realloc(s->scratch, want);
  if (p == NULL) return -1;
  s->scratch = p;
  s->scratch_len = want;
  return 0;
}

static ssize_t recv_retry(int fd, void *buf, size_t len, int flags) {
  struct iovec iov = {.iov_base = buf, .iov_len = len};
  struct sockaddr_nl from;
  struct msghdr mh = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n;
  do n = recvmsg(fd, &mh, flags | MSG_DONTWAIT); while (n < 0 && errno == EINTR);
  return n;
}

/*
 * Reads one datagram. Returns 1 when one was handled, 0 when the queue is empty, -1 to stop,
 * READ_OVERRUN when recvmsg reported ENOBUFS.
 */
static int read_one(nlsock *s) {
  size_t want = s->fixed_bytes;
  if (want == 0) {
    char one;
    ssize_t size = recv_retry(s->fd, &one, 1, MSG_PEEK | MSG_TRUNC);
    if (size < 0) goto failed;
    want = (size_t)size > PEEK_FLOOR ? (size_t)size : PEEK_FLOOR;
  }
  if (grow_scratch(s, want) != 0) {
    /* Drop the datagram rather than leave it at the head of the queue forever. */
    char one;
    recv_retry(s->fd, &one, 1, 0);
    report_errno(s, ENOMEM, "recvmsg");
    return s->fd < 0 ? -1 : 1;
  }
  ssize_t n = recv_retry(s->fd, s->scratch, want, MSG_TRUNC);
  if (n < 0) goto failed;
  if ((size_t)n > want) {
    /* A datagram larger than the fixed buffer: its tail is lost, as after a queue overflow. */
    report_errno(s, ENOBUFS, "recvmsg (datagram truncated)");
    return s->fd < 0 ? -1 : 1;
  }
  if (n == 0) return 1;
  napi_handle_scope scope;
  napi_open_handle_scope(s->env, &scope);
  napi_value buf;
  void *unused;
  if (napi_create_buffer_copy(s->env, (size_t)n, s->scratch, &unused, &buf) == napi_ok)
    call_js(s, s->on_message, buf);
  else
    report_errno(s, ENOMEM, "recvmsg");
  napi_close_handle_scope(s->env, scope);
  return s->fd < 0 ? -1 : 1;

failed:
  if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
  /* The kernel dropped datagrams for us; the caller drains the queue, then reports it. */
  if (errno == ENOBUFS) return READ_OVERRUN;
  report_errno(s, errno, "recvmsg");
  return -1;
}

static void on_poll(uv_poll_t *h, int status, int events);

/*
 * libuv turns EPOLLERR into status UV_EBADF and stops the handle. On a netlink socket
 * EPOLLERR means a pending socket error, in practice ENOBUFS (the kernel dropped datagrams
 * because the receive queue was full). SO_ERROR reads and clears it, and the poll is started
 * again: the datagrams still queued are valid. Returns the error, 0 if SO_ERROR had none,
 * -1 to stop.
 */
static int recover_poll(nlsock *s, int status) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) {
    report_errno(s, -status, "uv_poll");
    /* An error that SO_ERROR does not explain and that keeps coming back: stop, rather than spin. */
    if (++s->unexplained_errors > MAX_UNEXPLAINED) close_socket(s);
  }
  if (s->fd < 0) return -1;
  int rc = uv_poll_start(&s->poll, UV_READABLE, on_poll);
  if (rc != 0) {
    report_errno(s, -rc, "uv_poll_start");
    return -1;
  }
  return err;
}

/*
 * After an overrun the kernel drops every new datagram for this socket until a read empties
 * its queue (NETLINK_S_CONGESTED). So the queue is drained (bounded) before the error goes
 * to JavaScript: a request its handler sends then gets its reply.
 */
static void on_poll(uv_poll_t *h, int status, int events) {
  (void)events;
  nlsock *s = h->data;
  if (s->fd < 0 || !s->listening) return;
  napi_handle_scope scope;
  napi_open_handle_scope(s->env, &scope);
  int pending = 0;
  if (status < 0) {
    pending = recover_poll(s, status);
  } else {
    s->unexplained_errors = 0;
  }
  int limit = pending > 0 ? DRAIN_MAX : READS_PER_WAKEUP;
  for (int i = 0; pending >= 0 && i < limit && s->fd >= 0; i++) {
    int r = read_one(s);
    if (r == READ_OVERRUN) {
      pending = ENOBUFS;
      limit = DRAIN_MAX;
    } else if (r <= 0) {
      break;
    }
  }
  if (pending > 0 && s->fd >= 0) report_errno(s, pending, "recvmsg");
  napi_close_handle_scope(s->env, scope);
}

static nlsock *unwrap(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv, int need_open) {
  napi_value self;
  nlsock *s = NULL;
  if (napi_get_cb_info(env, info, argc, argv, &self, NULL) != napi_ok) return NULL;
  if (napi_unwrap(env, self, (void **)&s) != napi_ok || s == NULL) {
    throw_type(env, "not a NetlinkSocket");
    return NULL;
  }
  if (need_open && s->fd < 0) {
    throw_errno(env, EBADF, "netlink socket closed");
    return NULL;
  }
  return s;
}

static int get_int(napi_env env, napi_value v, int32_t *out) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  return t == napi_number && napi_get_value_int32(env, v, out) == napi_ok ? 0 : -1;
}

/* new NetlinkSocket(protocol): socket() in the calling thread's netns, bound to a port the kernel picks. */
static napi_value js_new(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], self;
  napi_get_cb_info(env, info, &argc, argv, &self, NULL);
  int32_t protocol;
  if (argc < 1 || get_int(env, argv[0], &protocol) != 0 || protocol < 0)
    return throw_type(env, "NetlinkSocket(protocol): protocol must be a non-negative integer");
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
  if (fd < 0) return throw_errno(env, errno, "socket");
  struct sockaddr_nl addr = {.nl_family = AF_NETLINK};
  socklen_t len = sizeof addr;
  if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
    int err = errno;
    close(fd);
    return throw_errno(env, err, "bind");
  }
  nlsock *s = calloc(1, sizeof *s);
  uv_loop_t *loop;
  if (s == NULL) {
    close(fd);
    return throw_errno(env, ENOMEM, "NetlinkSocket");
  }
  s->env = env;
  s->fd = fd;
  s->poll.data = s;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || uv_poll_init(loop, &s->poll, fd) != 0) {
    close(fd);
    free(s);
    return throw_errno(env, EINVAL, "uv_poll_init");
  }
  s->handle_live = 1;
  if (napi_wrap(env, self, s, finalize, NULL, NULL) != napi_ok) {
    close_socket(s); /* frees s in the handle's close callback */
    return NULL;
  }
  s->wrapper_live = 1;
  napi_value port;
  napi_create_uint32(env, addr.nl_pid, &port);
  napi_set_named_property(env, self, "port", port);
  return self;
}

/* send(chunks): one datagram to the kernel (port 0) made of the chunks, in order. Returns its length. */
static napi_value js_send(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  nlsock *s = unwrap(env, info, &argc, argv, 1);
  if (s == NULL) return NULL;
  bool is_array = false;
  uint32_t count = 0;
  if (argc < 1 || napi_is_array(env, argv[0], &is_array) != napi_ok || !is_array)
    return throw_type(env, "send(chunks): chunks must be an array of Uint8Array");
  napi_get_array_length(env, argv[0], &count);
  if (count > MAX_CHUNKS) return throw_errno(env, EMSGSIZE, "sendmsg (more than 1024 chunks)");
  struct iovec iov[MAX_CHUNKS];
  for (uint32_t i = 0; i < count; i++) {
    napi_value el, ab;
    bool is_ta = false;
    napi_typedarray_type type;
    size_t length, offset;
    void *data;
    napi_get_element(env, argv[0], i, &el);
    if (napi_is_typedarray(env, el, &is_ta) != napi_ok || !is_ta ||
        napi_get_typedarray_info(env, el, &type, &length, &data, &ab, &offset) != napi_ok || type != napi_uint8_array)
      return throw_type(env, "send(chunks): every chunk must be a Uint8Array");
    iov[i].iov_base = data;
    iov[i].iov_len = length;
  }
  struct sockaddr_nl to = {.nl_family = AF_NETLINK};
  struct msghdr mh = {.msg_name = &to, .msg_namelen = sizeof to, .msg_iov = iov, .msg_iovlen = count};
  ssize_t n;
  do n = sendmsg(s->fd, &mh, 0); while (n < 0 && errno == EINTR);
  if (n < 0) return throw_errno(env, errno, "sendmsg");
  napi_value out;
  napi_create_int64(env, n, &out);
  return out;
}

/* listen(onMessage, onError, fixedBytes): starts reading; fixedBytes 0 peeks at each datagram's size. */
static napi_value js_listen(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  nlsock *s = unwrap(env, info, &argc, argv, 1);
  if (s == NULL) return NULL;
  napi_valuetype t0, t1;
  int32_t fixed = 0;
  napi_typeof(env, argv[0], &t0);
  napi_typeof(env, argv[1], &t1);
  if (argc < 3 || t0 != napi_function || t1 != napi_function || get_int(env, argv[2], &fixed) != 0 || fixed < 0 ||
      (fixed > 0 && fixed < 16))
    return throw_type(env, "listen(onMessage, onError, fixedBytes): two functions and 0 or a size of 16 bytes or more");
  if (s->listening) return throw_errno(env, EBUSY, "listen (already listening)");
  napi_value name;
  napi_create_string_utf8(env, "NetlinkSocket", NAPI_AUTO_LENGTH, &name);
  if (napi_async_init(env, NULL, name, &s->async_ctx) != napi_ok) return NULL;
  napi_create_reference(env, argv[0], 1, &s->on_message);
  napi_create_reference(env, argv[1], 1, &s->on_error);
  s->fixed_bytes = (size_t)fixed;
  if (grow_scratch(s, fixed > 0 ? (size_t)fixed : PEEK_FLOOR) != 0) return throw_errno(env, ENOMEM, "listen");
  int rc = uv_poll_start(&s->poll, UV_READABLE, on_poll);
  if (rc != 0) return throw_errno(env, -rc, "uv_poll_start");
  s->listening = 1;
  return NULL;
}

static napi_value js_setsockopt(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  nlsock *s = unwrap(env, info, &argc, argv, 1);
  if (s == NULL) return NULL;
  int32_t level, name, value;
  if (argc < 3 || get_int(env, argv[0], &level) || get_int(env, argv[1], &name) || get_int(env, argv[2], &value))
    return throw_type(env, "setsockopt(level, name, value): three integers");
  int v = value;
  if (setsockopt(s->fd, level, name, &v, sizeof v) != 0) return throw_errno(env, errno, "setsockopt");
  return NULL;
}

static napi_value js_getsockopt(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  nlsock *s = unwrap(env, info, &argc, argv, 1);
  if (s == NULL) return NULL;
  int32_t level, name;
  if (argc < 2 || get_int(env, argv[0], &level) || get_int(env, argv[1], &name))
    return throw_type(env, "getsockopt(level, name): two integers");
  int v = 0;
  socklen_t len = sizeof v;
  if (getsockopt(s->fd, level, name, &v, &len) != 0) return throw_errno(env, errno, "getsockopt");
  napi_value out;
  napi_create_int32(env, v, &out);
  return out;
}

static napi_value js_ref(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  nlsock *s = unwrap(env, info, &argc, NULL, 0);
  if (s != NULL && s->fd >= 0) uv_ref((uv_handle_t *)&s->poll);
  return NULL;
}

static napi_value js_unref(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  nlsock *s = unwrap(env, info, &argc, NULL, 0);
  if (s != NULL && s->fd >= 0) uv_unref((uv_handle_t *)&s->poll);
  return NULL;
}

/* close(): idempotent; safe inside onMessage/onError. */
static napi_value js_close(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  nlsock *s = unwrap(env, info, &argc, NULL, 0);
  if (s != NULL) close_socket(s);
  return NULL;
}

static napi_value js_closed(napi_env env, napi_callback_info info) {
  size_t argc = 0;
  nlsock *s = unwrap(env, info, &argc, NULL, 0);
  napi_value out;
  napi_get_boolean(env, s == NULL || s->fd < 0, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor methods[] = {
      {"send", NULL, js_send, NULL, NULL, NULL, napi_default, NULL},
      {"listen", NULL, js_listen, NULL, NULL, NULL, napi_default, NULL},
      {"setsockopt", NULL, js_setsockopt, NULL, NULL, NULL, napi_default, NULL},
      {"getsockopt", NULL, js_getsockopt, NULL, NULL, NULL, napi_default, NULL},
      {"ref", NULL, js_ref, NULL, NULL, NULL, napi_default, NULL},
      {"unref", NULL, js_unref, NULL, NULL, NULL, napi_default, NULL},
      {"close", NULL, js_close, NULL, NULL, NULL, napi_default, NULL},
      {"closed", NULL, NULL, js_closed, NULL, NULL, napi_default, NULL},
  };
  napi_value cls;
  napi_define_class(env, "NetlinkSocket", NAPI_AUTO_LENGTH, js_new, NULL, sizeof methods / sizeof methods[0], methods,
                    &cls);
  napi_set_named_property(env, exports, "NetlinkSocket", cls);
  rlimit_init(env, exports);
  malloc_trim_init(env, exports);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
