/*
 * /usr/bin/kube-proxy-ts: runs kube-proxy-ts on the Node.js 24 runtime bundled with the package.
 *
 * A native launcher rather than a "#!/bin/sh" script, so that the same command works where
 * there is no shell: the OCI image runs it as its entry point, and
 * `kubectl exec ds/kube-proxy-ts -- kube-proxy-ts explain` finds it in the pod.
 * It exec()s the bundled node with the daemon's V8 options (src/daemon/v8-options.ts, made
 * into launcher-args.h by scripts/launcher-args.ts) and the entry script, followed by the
 * caller's arguments. exec keeps the PID: systemd's Type=notify and watchdog, and a
 * container runtime's PID 1, see the daemon itself. No environment is read, no path searched.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher-args.h" /* KPTS_ARGV: the node binary, its V8 options, the entry script */

static const char *const prefix[] = {KPTS_ARGV};

int main(int argc, char **argv) {
  const size_t n = sizeof prefix / sizeof prefix[0];
  const size_t extra = argc > 1 ? (size_t)argc - 1 : 0;
  char **args = calloc(n + extra + 1, sizeof *args);
  if (args == NULL) {
    fputs("kube-proxy-ts: out of memory\n", stderr);
    return 127;
  }
  for (size_t i = 0; i < n; i++) args[i] = (char *)prefix[i];
  for (size_t i = 0; i < extra; i++) args[n + i] = argv[i + 1];
  execv(prefix[0], args);
  fprintf(stderr, "kube-proxy-ts: cannot run %s: %s\n", prefix[0], strerror(errno));
  return 127;
}
