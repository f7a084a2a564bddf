// The public headers from C++: they compile as C++ (extern "C", no compound literals in the
// macros a C++ program uses), and a C++ program links against libmpiar.so and runs a collective,
// a request and the kvstore.
#include <mpiar.h>
#include <mpiar_kv.h>

#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failed = 0;
  mpiar_options_t opts = MPIAR_OPTIONS_INIT;
  opts.algorithm = "ring";
  mpiar_options_t opts2 = mpiar_options_init();
  failed |= opts2.struct_size != sizeof(mpiar_options_t);
  float x[4] = {1, 2, 3, 4};
  failed |= mpiar_allreduce_ex(MPIAR_IN_PLACE, x, 4, MPIAR_FLOAT32, MPIAR_SUM, MPI_COMM_WORLD,
                               &opts) != MPIAR_SUCCESS;
  failed |= x[3] != 4.0f * size;
  mpiar_request_t req = MPIAR_REQUEST_NULL;
  failed |= mpiar_iallreduce(MPIAR_IN_PLACE, x, 4, MPIAR_FLOAT32, MPIAR_MAX, MPI_COMM_WORLD, NULL,
                             &req) != MPIAR_SUCCESS;
  failed |= mpiar_wait(&req) != MPIAR_SUCCESS || req != MPIAR_REQUEST_NULL;
  mpiar_kv_options_t ko = MPIAR_KV_OPTIONS_INIT;
  mpiar_kv_t *kv = NULL;
  failed |= mpiar_kv_create(MPI_COMM_WORLD, &ko, &kv) != MPIAR_SUCCESS;
  double w[2] = {1, 2};
  failed |= mpiar_kv_init(kv, MPIAR_KV_STR("w"), MPIAR_FLOAT64, 2, w) != MPIAR_SUCCESS;
  failed |= mpiar_kv_init(kv, MPIAR_KV_INT(3), MPIAR_FLOAT64, 2, w) != MPIAR_SUCCESS;
  mpiar_kv_optimizer_t sgd = MPIAR_KV_SGD(0.1, 0.0, 0.0);
  failed |= mpiar_kv_set_optimizer(kv, &sgd) != MPIAR_SUCCESS;
  double g[2] = {1, 1};
  failed |= mpiar_kv_pushpull(kv, mpiar_kv_int(3), g, g) != MPIAR_SUCCESS;
  failed |= g[0] != 1.0 * size;
  failed |= mpiar_kv_destroy(kv) != MPIAR_SUCCESS;
  failed |= std::strcmp(mpiar_version(), MPIAR_VERSION_STRING) != 0;
  failed |= mpiar_version_hex() != MPIAR_VERSION_HEX;
  if (rank == 0) {
    std::printf("C++ program against libmpiar %s: %s (%s)\n", mpiar_version(),
                failed ? "FAILED" : "ok", mpiar_last_error());
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
