// malloc_trim(3) for the daemon's heap release: after V8's compacting collection the memory
// Node's C++ side freed (parsers, buffers, the sync's transient allocations) stays in glibc's
// arenas, and RSS with it (measured: 82 MiB of the main arena kept after a 1,000 updates/s
// burst at 10,000 Services x 10; malloc_trim(0) gave back 70 MiB). Node has no binding for it.
// Without glibc (musl) it does nothing and says so.

#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "malloc_trim.h"

/* mallocTrim() -> true when glibc gave memory back to the kernel, false otherwise or without glibc. */
static napi_value js_malloc_trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#if defined(__GLIBC__)
  released = malloc_trim(0);
#endif
  napi_value out;
  napi_get_boolean(env, released != 0, &out);
  return out;
}

void malloc_trim_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, js_malloc_trim, NULL, &fn);
  napi_set_named_property(env, exports, "mallocTrim", fn);
}
