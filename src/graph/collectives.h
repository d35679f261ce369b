// The collectives a sharded run's ranks call inside a step (graph Op::AllReduce and
// Op::AllGather): one primitive, an all-gather, from which the backend makes both, so that a
// sum over ranks is added in rank order and every rank gets the same bits whatever the
// library's reduction algorithm (src/shard/worker.cpp implements it with MPI; an NCCL
// implementation on GPUs would be another class behind the same interface).
#pragma once

#include <cstdint>
#include <string>

namespace lathe::graph {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every rank's `n` floats of `in`, concatenated in rank order into `out` (size() * n).
  // `what` names the node, for the message when another rank fails (which throws
  // lathe::Error, or ends the run naming the rank).
  virtual void all_gather(const float* in, int64_t n, float* out, const std::string& what) = 0;
};

}  // namespace lathe::graph
