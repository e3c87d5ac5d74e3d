#ifndef MALLOC_TRIM_H
#define MALLOC_TRIM_H
#include <node_api.h>

/* Adds mallocTrim to the module's exports. */
void malloc_trim_init(napi_env env, napi_value exports);

#endif
