#ifndef RLIMIT_H
#define RLIMIT_H
#include <node_api.h>

/* Adds getrlimit, setrlimit and RLIMIT_NOFILE to the module's exports. */
void rlimit_init(napi_env env, napi_value exports);

#endif
