/*
 * mpiar-calls: the loops whose instructions per call measure the library's fixed cost, for
 * valgrind --tool=callgrind (counts do not drift with the machine's load). Each loop is its own
 * function, so that --toggle-collect=NAME counts exactly its calls; a warm-up before each makes
 * the context, the plan and the kept request first. Run it through count.sh.
 *
 *   blocking_loop     mpiar_allreduce of 8 bytes (2 x float32 sum), the same call N times
 *   persistent_loop   mpiar_start + mpiar_wait of a persistent 8-byte allreduce, N times
 *   sizes_loop        mpiar_allreduce over 8 sizes in turn (4 B .. 512 B), N rounds
 *   nonblocking_loop  mpiar_iallreduce + mpiar_wait of 8 bytes, N times
 *   options_loop      mpiar_allreduce_ex of 8 bytes with options (reproducible), N times
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "mpiar.h"

static float in[128], out[128];

static void check(int rc, const char *what) {
  if (rc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-calls: %s: %s\n", what, mpiar_last_error());
    exit(1);
  }
}

__attribute__((noinline)) void blocking_loop(int n) {
  for (int i = 0; i < n; i++) {
    check(mpiar_allreduce(in, out, 2, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD), "allreduce");
  }
}

__attribute__((noinline)) void persistent_loop(mpiar_request_t *r, int n) {
  for (int i = 0; i < n; i++) {
    check(mpiar_start(r), "start");
    check(mpiar_wait(r), "wait");
  }
}

__attribute__((noinline)) void sizes_loop(int n) {
  for (int i = 0; i < n; i++) {
    for (size_t c = 1; c <= 128; c *= 2) {
      check(mpiar_allreduce(in, out, c, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD), "allreduce");
    }
  }
}

__attribute__((noinline)) void nonblocking_loop(int n) {
  for (int i = 0; i < n; i++) {
    mpiar_request_t r = MPIAR_REQUEST_NULL;
    check(mpiar_iallreduce(in, out, 2, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, NULL, &r),
          "iallreduce");
    check(mpiar_wait(&r), "wait");
  }
}

__attribute__((noinline)) void options_loop(const mpiar_options_t *o, int n) {
  for (int i = 0; i < n; i++) {
    check(mpiar_allreduce_ex(in, out, 2, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, o),
          "allreduce_ex");
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  if (n < 1) {
    fprintf(stderr, "usage: mpiar-calls [N >= 1]\n");
    return 2;
  }
  for (int i = 0; i < 128; i++) {
    in[i] = (float)i;
  }
  for (int w = 0; w < 10; w++) {
    check(mpiar_allreduce(in, out, 2, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD), "allreduce");
  }
  blocking_loop(n);
  mpiar_request_t r = MPIAR_REQUEST_NULL;
  check(mpiar_allreduce_init(in, out, 2, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD, NULL, &r),
        "allreduce_init");
  for (int w = 0; w < 10; w++) {
    check(mpiar_start(&r), "start");
    check(mpiar_wait(&r), "wait");
  }
  persistent_loop(&r, n);
  check(mpiar_request_free(&r), "request_free");
  for (size_t c = 1; c <= 128; c *= 2) {
    check(mpiar_allreduce(in, out, c, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD), "allreduce");
  }
  sizes_loop(n);
  nonblocking_loop(10);
  nonblocking_loop(n);
  mpiar_options_t o = MPIAR_OPTIONS_INIT;
  o.reproducible = 1;
  options_loop(&o, 10);
  options_loop(&o, n);
  MPI_Finalize();
  return 0;
}
