#include "graph/graph.h"

#include <cstring>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "graph/collectives.h"

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

// The hash of a field: its bytes; a rotary schedule by its parameters, collectives by their
// number of ranks.
struct AttrHasher {
  Hasher& h;
  template <class T>
  void operator()(const char*, const T& v) const {
    if constexpr (std::is_same_v<T, const RopeSchedule*>) {
      h.add(v ? v->hash() : uint64_t{0});
    } else if constexpr (std::is_same_v<T, Collectives*>) {
      h.add(v ? v->size() : 0);
    } else if constexpr (std::is_enum_v<T>) {
      h.add(static_cast<int64_t>(v));
    } else {
      h.add(v);
    }
  }
};

// " name=value" per field, for dump().
struct AttrPrinter {
  std::ostream& out;
  template <class T>
  void operator()(const char* name, const T& v) const {
    out << ' ' << name << '=';
    if constexpr (std::is_same_v<T, const RopeSchedule*>) {
      out << (v ? "rope" : "none");
    } else if constexpr (std::is_same_v<T, Collectives*>) {
      out << (v ? v->size() : 0) << " ranks";
    } else if constexpr (std::is_enum_v<T>) {
      out << static_cast<int64_t>(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      out << (v ? "true" : "false");
    } else {
      out << v;
    }
  }
};

}  // namespace

bool attrs_fit(Op op, const Attrs& a) {
  switch (op) {
    case Op::Weight:
    case Op::Add:
    case Op::Reshape:
    case Op::Rows:
    case Op::Concat:
    case Op::HeadLinear:
    case Op::BatchMatmul:
      return std::holds_alternative<NoAttrs>(a);
    case Op::Input:
      return std::holds_alternative<InputAttrs>(a);
    case Op::Embedding:
      return std::holds_alternative<EmbeddingAttrs>(a);
    case Op::Linear:
      return std::holds_alternative<LinearAttrs>(a);
    case Op::RmsNorm:
      return std::holds_alternative<RmsNormAttrs>(a);
    case Op::LayerNorm:
      return std::holds_alternative<LayerNormAttrs>(a);
    case Op::ActMul:
    case Op::Activation:
      return std::holds_alternative<ActAttrs>(a);
    case Op::Scale:
    case Op::Divide:
      return std::holds_alternative<ScaleAttrs>(a);
    case Op::Softcap:
      return std::holds_alternative<SoftcapAttrs>(a);
    case Op::Clamp:
      return std::holds_alternative<ClampAttrs>(a);
    case Op::Xielu:
      return std::holds_alternative<XieluAttrs>(a);
    case Op::RopeTables:
      return std::holds_alternative<RopeTablesAttrs>(a);
    case Op::Rope:
      return std::holds_alternative<RopeAttrs>(a);
    case Op::Attention:
      return std::holds_alternative<AttentionAttrs>(a);
    case Op::Route:
      return std::holds_alternative<RouteAttrs>(a);
    case Op::Experts:
      return std::holds_alternative<ExpertsAttrs>(a);
    case Op::Slice:
      return std::holds_alternative<SliceAttrs>(a);
    case Op::CausalConv:
    case Op::GatedDeltaRule:
      return std::holds_alternative<StateAttrs>(a);
    case Op::Ssd:
      return std::holds_alternative<SsdAttrs>(a);
    case Op::RowStat:
      return std::holds_alternative<RowStatAttrs>(a);
    case Op::Binary:
      return std::holds_alternative<BinaryAttrs>(a);
    case Op::Indexer:
      return std::holds_alternative<IndexerAttrs>(a);
    case Op::AllReduce:
    case Op::AllGather:
      return std::holds_alternative<CollectiveAttrs>(a);
    case Op::HyperMix:
      return std::holds_alternative<HyperMixAttrs>(a);
    case Op::Compress:
      return std::holds_alternative<CompressAttrs>(a);
  }
  return false;
}

void Node::bad_attrs() const {
  fail("internal: ", op_name(op), " node ", name.empty() ? "(unnamed)" : name,
       " holds attributes of another op");
}

uint64_t Graph::hash(bool shapes) const {
  Hasher h;
  h.add(nodes.size());
  for (const Node& n : nodes) {
    h.add(static_cast<int>(n.op));
    h.add(n.inputs.size());
    for (Value v : n.inputs) h.add(v.id);
    if (shapes) h.shape(n.shape);
    h.add(static_cast<int>(n.dtype));
    std::visit([&](const auto& a) { a.visit(AttrHasher{h}); }, n.attrs);
    if (n.op == Op::Weight) {
      h.shape(n.constant.shape());
      h.add(static_cast<int>(n.constant.dtype()));
    }
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
    std::visit([&](const auto& a) { a.visit(AttrPrinter{out}); }, n.attrs);
    out << '\n';
  }
  return out.str();
}

}  // namespace lathe::graph
