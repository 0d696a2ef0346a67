// Serves protocol.h's requests one connection at a time: the helper sends one request per
// toggle, so there is nothing to gain from concurrency and a lot to lose (two stages at once).
#define _GNU_SOURCE

#include "control.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "gate.h"
#include "protocol.h"
#include "real.h"
#include "stage.h"

// A peer that connects and says nothing must not hold the server (and so the next toggle) up.
enum { kRequestTimeoutMs = 5000 };

static pthread_mutex_t start_mutex = PTHREAD_MUTEX_INITIALIZER;
static int started;
static int listen_fd = -1;

// Reads one line (without its newline) or fails on EOF, error, timeout or an overlong line.
static int ReadLine(int fd, char* line, size_t n) {
  size_t len = 0;
  while (len + 1 < n) {
    ssize_t got = read(fd, line + len, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return 0;
    if (line[len] == '\n') {
      line[len] = '\0';
      return 1;
    }
    len++;
  }
  return 0;
}

static int SamePeerUid(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid();
}

static void Serve(int fd) {
  struct timeval timeout = {kRequestTimeoutMs / 1000, (kRequestTimeoutMs % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  char request[kFastsnapLineMax];
  char reply[kFastsnapLineMax];
  if (!SamePeerUid(fd) || !ReadLine(fd, request, sizeof request)) return;
  if (strcmp(request, "stage") == 0) {
    StageRequest(reply, sizeof reply - 1);
  } else if (strcmp(request, "unstage") == 0) {
    UnstageRequest(reply, sizeof reply - 1);
  } else if (strcmp(request, "status") == 0) {
    StatusRequest(reply, sizeof reply - 1);
  } else {
    snprintf(reply, sizeof reply - 1, "error unknown request");
  }
  // One line per stage and unstage on the workload's stderr: its own log then says which path
  // each checkpoint took (status queries are not events).
  if (strcmp(request, "status") != 0) FastsnapLog("%s: %s", request, reply);
  size_t len = strlen(reply);
  reply[len++] = '\n';
  // MSG_NOSIGNAL: a helper that gave up must not kill the workload with SIGPIPE.
  for (size_t sent = 0; sent < len;) {
    ssize_t put = send(fd, reply + sent, len - sent, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return;
    sent += (size_t)put;
  }
}

static void* ServeLoop(void* arg) {
  (void)arg;
  GateExemptThisThread();
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      FastsnapLog("control socket accept failed (%s); no fast path from now on", strerror(errno));
      return NULL;
    }
    Serve(fd);
    close(fd);
  }
}

// A forked child is another pid with no server thread: it starts its own if it ever needs one.
static void AfterFork(void) {
  if (listen_fd >= 0) close(listen_fd);
  listen_fd = -1;
  started = 0;
}

static int Listen(void) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un addr;
  socklen_t len = FastsnapSocketAddress((int)getpid(), &addr);
  if (fd < 0 || bind(fd, (struct sockaddr*)&addr, len) != 0 || listen(fd, 4) != 0) {
    FastsnapLog("cannot listen on the control socket @%s (%s); no fast path for this process",
                addr.sun_path + 1, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

void ControlEnsureStarted(void) {
  pthread_mutex_lock(&start_mutex);
  if (!started) {
    started = 1;
    static int atfork_registered;
    if (!atfork_registered) atfork_registered = pthread_atfork(NULL, NULL, AfterFork) == 0;
    listen_fd = Listen();
    // Every signal blocked in the thread: the workload's handlers expect its own threads.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    if (listen_fd >= 0 && pthread_create(&thread, NULL, ServeLoop, NULL) == 0) {
      pthread_detach(thread);
    } else if (listen_fd >= 0) {
      FastsnapLog("cannot start the control thread; no fast path for this process");
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pthread_mutex_unlock(&start_mutex);
}
