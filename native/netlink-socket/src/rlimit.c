// getrlimit/setrlimit for the daemon's descriptor budget: Node has neither. The daemon raises
// its soft RLIMIT_NOFILE to the hard limit at start (as Go's runtime does for upstream
// kube-proxy) and sizes the userspace proxy's connection budget from it.
//
// Limits travel as JavaScript numbers: every finite rlim_t a kernel allows for a resource is
// far below 2^53; RLIM_INFINITY is Infinity, both ways.

#include <errno.h>
#include <math.h>
#include <node_api.h>
#include <sys/resource.h>

#include "rlimit.h"

napi_value errno_error(napi_env env, int err, const char *syscall);

static napi_value limit_value(napi_env env, rlim_t v) {
  napi_value out;
  napi_create_double(env, v == RLIM_INFINITY ? INFINITY : (double)v, &out);
  return out;
}

static int limit_arg(napi_env env, napi_value v, rlim_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || isnan(d) || d < 0) return -1;
  *out = isinf(d) ? RLIM_INFINITY : (rlim_t)d;
  return 0;
}

static int resource_arg(napi_env env, napi_callback_info info, size_t want, napi_value *argv, int *resource) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < want ||
      napi_get_value_int32(env, argv[0], resource) != napi_ok) {
    napi_throw_type_error(env, NULL, "expected a resource number and limits");
    return -1;
  }
  return 0;
}

/* getrlimit(resource) -> { soft, hard } */
static napi_value js_getrlimit(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int resource;
  if (resource_arg(env, info, 1, argv, &resource) < 0) return NULL;
  struct rlimit rl;
  if (getrlimit(resource, &rl) < 0) {
    napi_throw(env, errno_error(env, errno, "getrlimit"));
    return NULL;
  }
  napi_value out;
  napi_create_object(env, &out);
  napi_set_named_property(env, out, "soft", limit_value(env, rl.rlim_cur));
  napi_set_named_property(env, out, "hard", limit_value(env, rl.rlim_max));
  return out;
}

/* setrlimit(resource, soft, hard) */
static napi_value js_setrlimit(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  int resource;
  if (resource_arg(env, info, 3, argv, &resource) < 0) return NULL;
  struct rlimit rl;
  if (limit_arg(env, argv[1], &rl.rlim_cur) < 0 || limit_arg(env, argv[2], &rl.rlim_max) < 0) {
    napi_throw_type_error(env, NULL, "limits must be numbers >= 0 (Infinity: unlimited)");
    return NULL;
  }
  if (setrlimit(resource, &rl) < 0) napi_throw(env, errno_error(env, errno, "setrlimit"));
  return NULL;
}

void rlimit_init(napi_env env, napi_value exports) {
  napi_value fn, nofile;
  napi_create_function(env, "getrlimit", NAPI_AUTO_LENGTH, js_getrlimit, NULL, &fn);
  napi_set_named_property(env, exports, "getrlimit", fn);
  napi_create_function(env, "setrlimit", NAPI_AUTO_LENGTH, js_setrlimit, NULL, &fn);
  napi_set_named_property(env, exports, "setrlimit", fn);
  napi_create_int32(env, RLIMIT_NOFILE, &nofile);
  napi_set_named_property(env, exports, "RLIMIT_NOFILE", nofile);
}
