{
  "targets": [
    {
      "target_name": "netlink_socket",
      "sources": ["src/netlink_socket.c", "src/rlimit.c", "src/malloc_trim.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-Wall", "-Wextra", "-Werror", "-std=gnu11", "-fvisibility=hidden"]
    }
  ]
}
