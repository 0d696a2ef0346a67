// One request per connection to the abstract socket of fastsnap/protocol.h, each under the
// --fast-snapshot-timeout-ms deadline, and what --toggle does with each reply.
#define _GNU_SOURCE

#include "fastsnap_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "fastsnap/protocol.h"
#include "report.h"

typedef enum { kNoListener, kReplied, kExchangeFailed } Outcome;

static long long NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

// Waits for `events` on `fd` until `deadline` (CLOCK_MONOTONIC ms); 0 on timeout or error.
static int WaitFor(int fd, short events, long long deadline) {
  for (;;) {
    long long left = deadline - NowMs();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = events};
    int ready = poll(&p, 1, left > 60000 ? 60000 : (int)left);
    if (ready > 0) return 1;
    if (ready < 0 && errno != EINTR) return 0;
  }
}

// Sends `request` and reads the one-line reply (without its newline) into `reply`; on
// kExchangeFailed, `reply` says what failed.
static Outcome Exchange(int pid, const char* request, unsigned int timeout_ms, char* reply,
                        size_t n) {
  const long long deadline = NowMs() + timeout_ms;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    snprintf(reply, n, "socket: %s", strerror(errno));
    return kExchangeFailed;
  }
  struct sockaddr_un addr;
  socklen_t len = FastsnapSocketAddress(pid, &addr);
  // A non-blocking Unix connect either completes or says EAGAIN (backlog full): retry that.
  int connected;
  while (!(connected = connect(fd, (struct sockaddr*)&addr, len) == 0) && errno == EAGAIN &&
         NowMs() < deadline) {
    usleep(10000);
  }
  if (!connected) {
    // No one listens under that name: the process does not preload the library.
    int refused = errno == ECONNREFUSED || errno == ENOENT;
    snprintf(reply, n, "connect to @%s: %s", addr.sun_path + 1, strerror(errno));
    close(fd);
    return refused ? kNoListener : kExchangeFailed;
  }
  char line[kFastsnapLineMax];
  int written = snprintf(line, sizeof line, "%s\n", request);
  size_t got = 0;
  Outcome outcome = kExchangeFailed;
  if (!WaitFor(fd, POLLOUT, deadline) || send(fd, line, (size_t)written, MSG_NOSIGNAL) != written) {
    snprintf(reply, n, "could not send '%s' within %u ms", request, timeout_ms);
  } else {
    while (got + 1 < sizeof line && WaitFor(fd, POLLIN, deadline)) {
      ssize_t r = read(fd, line + got, sizeof line - 1 - got);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) break;
      got += (size_t)r;
      if (memchr(line, '\n', got) != NULL) break;
    }
    line[got] = '\0';
    char* end = strchr(line, '\n');
    if (end != NULL) {
      *end = '\0';
      snprintf(reply, n, "%s", line);
      outcome = kReplied;
    } else {
      snprintf(reply, n, "no reply to '%s' within %u ms", request, timeout_ms);
    }
  }
  close(fd);
  return outcome;
}

static int HasPrefix(const char* text, const char* prefix) {
  return strncmp(text, prefix, strlen(prefix)) == 0;
}

// "staged 123 4.5" -> "staged 123 bytes in 4.5 ms" (the same for "unstaged").
static void PrintMoved(const char* reply) {
  char verb[16], ms[32];
  unsigned long long bytes = 0;
  if (sscanf(reply, "%15s %llu %31s", verb, &bytes, ms) == 3) {
    fprintf(stderr, "fast-snapshot: %s %llu bytes in %s ms\n", verb, bytes, ms);
  } else {
    fprintf(stderr, "fast-snapshot: %s\n", reply);
  }
}

int FastsnapStage(int pid, unsigned int timeout_ms) {
  char reply[kFastsnapLineMax];
  Outcome outcome = Exchange(pid, "stage", timeout_ms, reply, sizeof reply);
  if (outcome == kNoListener) return 0;
  if (outcome == kReplied && HasPrefix(reply, "staged ")) {
    PrintMoved(reply);
    return 1;
  }
  // A stage that answers late may still complete; the unstage after the restore puts it back.
  const char* reason = outcome == kReplied && HasPrefix(reply, "fallback ") ? reply + 9 : reply;
  fprintf(stderr, "fast-snapshot: fallback: %s\n", reason);
  return 0;
}

int FastsnapUnstageAfterFailure(int pid, unsigned int timeout_ms) {
  char reply[kFastsnapLineMax];
  Outcome outcome = Exchange(pid, "unstage", timeout_ms, reply, sizeof reply);
  if (outcome == kReplied && HasPrefix(reply, "unstaged ")) {
    PrintMoved(reply);
    return 1;
  }
  fprintf(stderr, "fast-snapshot: could not put the staged device memory back: %s\n", reply);
  return 0;
}

int FastsnapUnstage(int pid, unsigned int timeout_ms) {
  char reply[kFastsnapLineMax];
  Outcome outcome = Exchange(pid, "unstage", timeout_ms, reply, sizeof reply);
  if (outcome == kNoListener || (outcome == kReplied && strcmp(reply, "idle") == 0)) {
    return kExitOk;
  }
  if (outcome == kReplied && HasPrefix(reply, "unstaged ")) {
    PrintMoved(reply);
    return kExitOk;
  }
  const char* reason = outcome == kReplied && HasPrefix(reply, "error ") ? reply + 6 : reply;
  return ReportError(kExitCudaError,
                     "restored process ID %d, but the fast path could not put its staged device "
                     "memory back: %s; the process has lost that memory",
                     pid, reason);
}
