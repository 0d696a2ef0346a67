// The control channel between stasis-cuda-checkpoint and libstasis-fastsnap, shared by both
// sides so the socket's name is defined once.
//
// The library listens on the abstract Unix socket "\0stasis-fastsnap.<pid>" (abstract names
// need no writable filesystem, and the helper runs in the same sandbox, so the same network
// namespace). One connection carries one request line and one reply line:
//   stage   -> "staged <bytes> <ms>"   | "fallback <reason>"
//   unstage -> "unstaged <bytes> <ms>" | "error <reason>" | "idle" (nothing staged)
//   status  -> "ok <tracked-bytes> <allocations>" | "unsupported <reason>"
// Only a peer with the library's own uid is answered.
#pragma once

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

enum { kFastsnapLineMax = 512 };

// Fills `addr` for `pid`'s socket; returns the address length to bind or connect with.
static inline socklen_t FastsnapSocketAddress(int pid, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  int len = snprintf(addr->sun_path + 1, sizeof addr->sun_path - 1, "stasis-fastsnap.%d", pid);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);
}
