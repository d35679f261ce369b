// liblathe_mpi.so: the Open MPI calls of a sharded run's workers, behind the table of
// shard/mpi_plugin.h. MPI's default error handler ends the run on any failure, so the calls
// return nothing to check.
#include <mpi.h>

#include <cstring>

#include "shard/mpi_plugin.h"

namespace lathe {
namespace {

static_assert(sizeof(MPI_Request) <= sizeof(uint64_t), "a request fits the table's slot");

MPI_Request load(const uint64_t* slot) {
  MPI_Request r;
  std::memcpy(&r, slot, sizeof r);
  return r;
}

void store(uint64_t* slot, MPI_Request r) {
  std::memcpy(slot, &r, sizeof r);
}

const MpiPlugin kTable = {
    plugin_stamp(MpiPlugin::kAbi),
    [](int* rank, int* size) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      MPI_Comm_rank(MPI_COMM_WORLD, rank);
      MPI_Comm_size(MPI_COMM_WORLD, size);
    },
    [](int64_t* values, int n) { MPI_Bcast(values, n, MPI_INT64_T, 0, MPI_COMM_WORLD); },
    [](int32_t* values, int n) { MPI_Bcast(values, n, MPI_INT32_T, 0, MPI_COMM_WORLD); },
    [](int64_t value) {
      int64_t total = 0;
      MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      return total;
    },
    [](const float* in, int n, float* out, uint64_t* request) {
      MPI_Request r;
      MPI_Iallgather(in, n, MPI_FLOAT, out, n, MPI_FLOAT, MPI_COMM_WORLD, &r);
      store(request, r);
    },
    [](uint64_t* request) {
      MPI_Request r = load(request);
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      store(request, r);
      return done != 0;
    },
    [] { MPI_Finalize(); },
    [](int code) { MPI_Abort(MPI_COMM_WORLD, code); },
};

}  // namespace
}  // namespace lathe

extern "C" __attribute__((visibility("default"))) const lathe::PluginStamp* lathe_plugin() {
  return &lathe::kTable.stamp;
}
