/*
 * The optional progress thread (MPIAR_PROGRESS=thread): one per process, it advances every
 * outstanding operation of every communicator while the program computes, so nonblocking
 * operations progress without calls to test. It needs MPI_THREAD_MULTIPLE (it calls MPI while the
 * program's threads may too).
 *
 * It follows the wait policy of an oversubscribed node whatever MPIAR_WAIT says, because a thread
 * that spins steals the core of the computation it is meant to overlap: it spins for a few
 * passes after the last progress, then yields the core between passes, then sleeps (50 us, then
 * growing to 1 ms) while nothing is in progress.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "core/context.h"

#define SPIN_PASSES 64
#define YIELD_PASSES 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t thread;
static int running;
static int stop;
static int start_rc;
static char start_detail[256];
static int tried;

/* Set by any progress; read by the thread to reset its back-off. */
static unsigned long progress_epoch;

static void *progress_main(void *arg) {
  (void)arg;
  unsigned idle = 0;
  long sleep_ns = 50000;
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    unsigned long before = __atomic_load_n(&progress_epoch, __ATOMIC_RELAXED);
    mpiar__contexts_progress_all();
    if (__atomic_load_n(&progress_epoch, __ATOMIC_RELAXED) != before) {
      idle = 0;
      sleep_ns = 50000;
      continue;
    }
    idle++;
    if (idle < SPIN_PASSES) {
      continue;
    }
    if (idle < YIELD_PASSES) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000) {
      sleep_ns *= 2;
    }
  }
  return NULL;
}

void mpiar__progress_note(void) {
  __atomic_add_fetch(&progress_epoch, 1, __ATOMIC_RELAXED);
}

int mpiar__progress_thread_start(void) {
  const mpiar__settings_t *set = NULL;
  int rc = mpiar__settings(&set);
  if (rc != MPIAR_SUCCESS || !set->progress_thread) {
    return rc;
  }
  pthread_mutex_lock(&lock);
  if (!tried) {
    tried = 1;
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided != MPI_THREAD_MULTIPLE) {
      static const char *const names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED",
                                          "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"};
      const char *name = "an unknown level";
      if (provided == MPI_THREAD_SINGLE) {
        name = names[0];
      } else if (provided == MPI_THREAD_FUNNELED) {
        name = names[1];
      } else if (provided == MPI_THREAD_SERIALIZED) {
        name = names[2];
      }
      start_rc = mpiar__error(MPIAR_ERR_THREAD_LEVEL,
                              "MPIAR_PROGRESS=thread needs MPI_THREAD_MULTIPLE, but MPI provides "
                              "%s (initialise MPI with MPI_Init_thread)",
                              name);
    } else {
      stop = 0;
      int err = pthread_create(&thread, NULL, progress_main, NULL);
      if (err != 0) {
        start_rc = mpiar__error(MPIAR_ERR_NOMEM, "cannot start the progress thread (error %d)",
                                err);
      } else {
        running = 1;
      }
    }
    if (start_rc != MPIAR_SUCCESS) {
      snprintf(start_detail, sizeof start_detail, "%s", mpiar_last_error());
    }
  }
  rc = start_rc;
  pthread_mutex_unlock(&lock);
  if (rc != MPIAR_SUCCESS) {
    return mpiar__error(rc, "%s", start_detail);
  }
  return MPIAR_SUCCESS;
}

void mpiar__progress_thread_stop(void) {
  pthread_mutex_lock(&lock);
  if (running) {
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    pthread_join(thread, NULL);
    running = 0;
  }
  pthread_mutex_unlock(&lock);
}

int mpiar__progress_thread_running(void) {
  return __atomic_load_n(&running, __ATOMIC_ACQUIRE);
}
