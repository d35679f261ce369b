#include "graph/graph.h"

#include "graph/collectives.h"

#include <cstring>
#include <sstream>

namespace lathe::graph {

const char* op_name(Op op) {
  switch (op) {
    case Op::Input:
      return "input";
    case Op::Weight:
      return "weight";
    case Op::Embedding:
      return "embedding";
    case Op::Linear:
      return "linear";
    case Op::RmsNorm:
      return "rms_norm";
    case Op::LayerNorm:
      return "layer_norm";
    case Op::ActMul:
      return "act_mul";
    case Op::Activation:
      return "activation";
    case Op::Add:
      return "add";
    case Op::Scale:
      return "scale";
    case Op::Divide:
      return "divide";
    case Op::Softcap:
      return "softcap";
    case Op::Clamp:
      return "clamp";
    case Op::Xielu:
      return "xielu";
    case Op::Reshape:
      return "reshape";
    case Op::RopeTables:
      return "rope_tables";
    case Op::Rope:
      return "rope";
    case Op::Attention:
      return "attention";
    case Op::Rows:
      return "rows";
    case Op::Route:
      return "route";
    case Op::Experts:
      return "experts";
    case Op::Concat:
      return "concat";
    case Op::HeadLinear:
      return "head_linear";
    case Op::Slice:
      return "slice";
    case Op::CausalConv:
      return "causal_conv";
    case Op::GatedDeltaRule:
      return "gated_delta_rule";
    case Op::Ssd:
      return "ssd";
    case Op::RowStat:
      return "row_stat";
    case Op::Binary:
      return "binary";
    case Op::BatchMatmul:
      return "batch_matmul";
    case Op::Indexer:
      return "indexer";
    case Op::AllReduce:
      return "all_reduce";
    case Op::AllGather:
      return "all_gather";
    case Op::HyperMix:
      return "hyper_mix";
    case Op::Compress:
      return "compress";
  }
  return "?";
}

namespace {

// FNV-1a over the bytes of each field, fed one value at a time (no struct padding hashed).
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  template <class T>
  void add(T v) {
    bytes(&v, sizeof v);
  }
  void shape(const Shape& s) {
    add(s.size());
    for (int64_t d : s) add(d);
  }
};

}  // namespace

uint64_t Graph::hash(bool shapes) const {
  Hasher h;
  h.add(nodes.size());
  for (const Node& n : nodes) {
    h.add(static_cast<int>(n.op));
    h.add(n.inputs.size());
    for (Value v : n.inputs) h.add(v.id);
    if (shapes) h.shape(n.shape);
    h.add(static_cast<int>(n.dtype));
    const Params& p = n.params;
    for (float f : {p.eps, p.offset, p.scale, p.softcap, p.limit, p.xielu[0], p.xielu[1],
                    p.xielu[2], p.xielu[3], p.alpha, p.dt_min, p.dt_max})
      h.add(f);
    for (int v :
         {static_cast<int>(p.act), static_cast<int>(p.layout), static_cast<int>(p.bias),
          static_cast<int>(p.routing), static_cast<int>(p.norm_topk), static_cast<int>(p.glu),
          static_cast<int>(p.kv_read_only), static_cast<int>(p.scale_inputs),
          static_cast<int>(p.id_range), static_cast<int>(p.stat), static_cast<int>(p.binary),
          static_cast<int>(p.upper_only), static_cast<int>(p.tail), static_cast<int>(p.inverse)})
      h.add(v);
    for (int64_t v : {p.layer, p.window, p.value_dim, p.id_offset, p.input_slot, p.top_k, p.groups,
                      p.top_groups, p.slice_start, p.state_slot, p.chunk, p.compressor, p.iters})
      h.add(v);
    if (n.op == Op::Weight) {
      h.shape(n.constant.shape());
      h.add(static_cast<int>(n.constant.dtype()));
    }
    if (n.rope) h.add(n.rope->hash());
    if (n.comm) h.add(n.comm->size());
  }
  h.add(outputs.size());
  for (Value v : outputs) h.add(v.id);
  return h.h;
}

std::string Graph::dump() const {
  std::ostringstream out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    out << '%' << i << " = " << op_name(n.op) << '(';
    for (size_t j = 0; j < n.inputs.size(); ++j)
      out << (j ? ", " : "") << (n.inputs[j].valid() ? "%" + std::to_string(n.inputs[j].id) : "-");
    out << ") " << shape_str(n.shape) << ' ' << dtype_name(n.dtype);
    if (!n.name.empty()) out << ' ' << n.name;
    out << '\n';
  }
  return out.str();
}

}  // namespace lathe::graph
