// The CPU backends: the reference and the fast op tables of ops.h, each built once, behind
// the Backend interface (graph/backend.h).
#include "backends/cpu/backend.h"

#include <algorithm>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/quant.h"

namespace lathe {
namespace {

using graph::Op;

// The weight types the matmul kernels take (kernels.h): Linear, Experts.
bool matmul_weight(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::MXFP4 || t == DType::FP8 ||
         is_quantized(t);
}

// Every op's entry, from each family's file.
cpu::OpTable op_table(bool fast) {
  cpu::OpTable t{};
  cpu::add_data_ops(t, fast);
  cpu::add_elementwise_ops(t, fast);
  cpu::add_matmul_ops(t, fast);
  cpu::add_attention_ops(t, fast);
  cpu::add_recurrent_ops(t, fast);
  for (size_t op = 0; op < t.size(); ++op)
    if (!t[op].run)
      fail("internal: the CPU backend has no kernel for ", graph::op_name(static_cast<Op>(op)));
  return t;
}

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(bool reference) : reference_(reference), table_(op_table(!reference)) {}
  const char* name() const override { return reference_ ? "reference" : "cpu"; }
  std::string kernel_level() const override {
    if (reference_) return "reference";
    return cat(cpu::isa_name(cpu::active_isa()), '+', cpu::quant_kernel_name(cpu::quant_kernel()));
  }

  // Both backends have a kernel for every op; what differs is the dtypes: the matmuls take
  // the weight types of matmul_weight(), embeddings read tables of any dtype, ids and chosen
  // positions are I32, and every other input is F32.
  bool supports(const graph::Graph& g, const graph::Node& n) const override {
    auto dtype = [&](size_t i) {
      return i < n.inputs.size() && n.inputs[i].valid() ? g.at(n.inputs[i]).dtype : DType::F32;
    };
    auto all_f32 = [&](size_t from, size_t to) {
      for (size_t i = from; i < std::min(to, n.inputs.size()); ++i)
        if (dtype(i) != DType::F32) return false;
      return true;
    };
    switch (n.op) {
      case Op::Input:
      case Op::Weight:
      case Op::Reshape:  // no compute
        return true;
      case Op::Embedding:
        return dtype(1) == DType::I32;
      case Op::Rows:
        return dtype(0) == DType::F32 && dtype(1) == DType::I32;
      case Op::RopeTables:
        return dtype(0) == DType::I32;
      case Op::Linear:
        return dtype(0) == DType::F32 && matmul_weight(dtype(1)) && dtype(2) == DType::F32;
      case Op::HeadLinear:
        return dtype(0) == DType::F32 && (dtype(1) == DType::F32 || dtype(1) == DType::BF16);
      case Op::Experts:
        for (size_t i = 2; i < n.inputs.size(); ++i)
          if ((i - 2) % graph::kExpertInputs < 3 ? !matmul_weight(dtype(i))
                                                 : dtype(i) != DType::F32)
            return false;
        return all_f32(0, 2);
      case Op::Attention:  // q, k, v, slopes, sinks, then an Indexer's chosen keys
        return all_f32(0, 5) && (n.inputs.size() < 6 || dtype(5) == DType::I32);
      case Op::RmsNorm:
      case Op::LayerNorm:
      case Op::ActMul:
      case Op::Activation:
      case Op::Add:
      case Op::Scale:
      case Op::Divide:
      case Op::Softcap:
      case Op::Clamp:
      case Op::Xielu:
      case Op::Rope:
      case Op::Route:
      case Op::Concat:
      case Op::Slice:
      case Op::CausalConv:
      case Op::GatedDeltaRule:
      case Op::Ssd:
      case Op::RowStat:
      case Op::Binary:
      case Op::BatchMatmul:
      case Op::Indexer:
      case Op::AllReduce:
      case Op::AllGather:
      case Op::HyperMix:
      case Op::Compress:
        return all_f32(0, n.inputs.size());
    }
    return false;
  }

  const KernelChoices* choices() const override {
    return reference_ ? nullptr : &cpu::matmul_choices();
  }

  size_t workspace_floats(const graph::Graph& g, const graph::Node& node, int threads,
                          int64_t max_context) const override {
    const cpu::OpKernel& k = table_.at(static_cast<size_t>(node.op));
    return k.workspace ? k.workspace(g, node, threads, max_context) : 0;
  }

  void run(const NodeArgs& a) const override { table_.at(static_cast<size_t>(a.node.op)).run(a); }

 private:
  bool reference_;
  cpu::OpTable table_;
};

}  // namespace

const Backend& cpu_backend(bool reference) {
  static const CpuBackend fast(false), ref(true);
  return reference ? ref : fast;
}

}  // namespace lathe
