// Test helper: the bytes a loaded model's step graph holds in weights, by dtype.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "core/thread_pool.h"
#include "graph/graph.h"
#include "models/engine.h"

namespace lathe::testing {

// The bytes of the step graph's weights by dtype, each tensor once.
inline std::map<DType, uint64_t> weight_bytes(const Model& model) {
  ThreadPool pool(1);
  Context ctx{&pool, false, false};
  const auto& g = dynamic_cast<const GraphModel&>(model);
  const graph::Graph graph = Engine(g, ctx).build_graph(1, 1);
  std::map<DType, uint64_t> bytes;
  std::set<const void*> seen;
  for (const graph::Node& n : graph.nodes)
    if (n.op == graph::Op::Weight && n.constant.numel() > 0 &&
        seen.insert(n.constant.data<void>()).second)
      bytes[n.constant.dtype()] += n.constant.nbytes();
  return bytes;
}

}  // namespace lathe::testing
