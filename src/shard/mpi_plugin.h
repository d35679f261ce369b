// The table of liblathe_mpi.so, the plug-in that holds every call into Open MPI
// (src/shard/mpi_plugin.cpp), loaded by a sharded run's workers (src/shard/worker.cpp) when
// they start: the rest of lathe neither links nor maps MPI (core/plugin.h).
#pragma once

#include <cstdint>

#include "core/plugin.h"

namespace lathe {

struct MpiPlugin {
  static constexpr int kAbi = 1;  // bump when the table changes shape
  static constexpr const char* kFile = "liblathe_mpi.so";
  PluginStamp stamp;
  // MPI_Init_thread (funneled), then this process's rank and the world's size.
  void (*init)(int* rank, int* size);
  // Rank 0's `n` values to every rank.
  void (*broadcast_i64)(int64_t* values, int n);
  void (*broadcast_i32)(int32_t* values, int n);
  // The sum of `value` over the ranks.
  int64_t (*sum_i64)(int64_t value);
  // Starts gathering every rank's `n` floats into `out` (rank order); `request` is an opaque
  // slot for test().
  void (*start_all_gather)(const float* in, int n, float* out, uint64_t* request);
  // Whether the gather of `request` is done.
  bool (*test)(uint64_t* request);
  void (*finalize)();
  // Ends every rank of the run.
  void (*abort)(int code);
};

}  // namespace lathe
