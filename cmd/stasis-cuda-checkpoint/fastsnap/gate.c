// A reader count under one mutex: wrapped calls are readers, staging is the single writer.
#define _GNU_SOURCE

#include "gate.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opened = PTHREAD_COND_INITIALIZER;
static pthread_cond_t drained;
static pthread_once_t drained_once = PTHREAD_ONCE_INIT;
static int closed;
static unsigned long readers;

static __thread unsigned int depth;
static __thread int exempt;

// CLOCK_MONOTONIC, so a clock step during a stage cannot stretch or cut the drain wait.
static void InitDrained(void) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&drained, &attr);
  pthread_condattr_destroy(&attr);
}

void GateEnter(void) {
  if (exempt || depth++ > 0) return;
  pthread_mutex_lock(&mutex);
  while (closed) pthread_cond_wait(&opened, &mutex);
  readers++;
  pthread_mutex_unlock(&mutex);
}

void GateLeave(void) {
  if (exempt || --depth > 0) return;
  pthread_once(&drained_once, InitDrained);
  pthread_mutex_lock(&mutex);
  if (--readers == 0 && closed) pthread_cond_broadcast(&drained);
  pthread_mutex_unlock(&mutex);
}

int GateClose(unsigned int timeout_ms) {
  pthread_once(&drained_once, InitDrained);
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&mutex);
  closed = 1;
  int drained_ok = 1;
  while (readers > 0) {
    if (pthread_cond_timedwait(&drained, &mutex, &deadline) == ETIMEDOUT && readers > 0) {
      drained_ok = 0;
      break;
    }
  }
  if (!drained_ok) {
    closed = 0;
    pthread_cond_broadcast(&opened);
  }
  pthread_mutex_unlock(&mutex);
  return drained_ok;
}

void GateOpen(void) {
  pthread_mutex_lock(&mutex);
  closed = 0;
  pthread_cond_broadcast(&opened);
  pthread_mutex_unlock(&mutex);
}

void GateExemptThisThread(void) { exempt = 1; }
