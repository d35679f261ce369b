// The op bench's cases of the ops Gemma3n brought (op_cases.h).
#include <tuple>

#include "backends/op_cases.h"

namespace lathe::optest {

using graph::Builder;
using graph::Op;
using graph::Value;

void rowwise_cases(std::vector<Case>& out) {
  // Ids past the table or below it (offset -4) read zeros or row 0 (Gemma3n's multimodal
  // embedders and per-layer embeddings); ZerosBelow and ZerosPast read zeros on one side only,
  // and their ids leave the table on that side alone.
  const std::tuple<graph::IdRange, const char*, std::vector<int32_t>> ranges[] = {
      {graph::IdRange::Zeros, "zeros", {0, 25, 19, 7, 20, 3, 31, 5, 12}},
      {graph::IdRange::FirstRow, "first_row", {0, 25, 19, 7, 20, 3, 31, 5, 12}},
      {graph::IdRange::ZerosBelow, "zeros_below", {0, 22, 19, 7, 1, 3, 2, 5, 12}},
      {graph::IdRange::ZerosPast, "zeros_past", {4, 25, 19, 7, 20, 6, 31, 5, 12}}};
  for (const auto& entry : ranges)
    for (DType dt : {DType::F32, DType::BF16}) {
      const graph::IdRange range = std::get<0>(entry);
      const Tensor table = random_tensor({20, 13}, next_seed()).to(dt);
      Step step = rows_step(9);
      step.tokens = std::get<2>(entry);
      out.push_back({std::string("embedding_out_of_range_") + std::get<1>(entry) + "_" +
                         std::string(dtype_name(dt)),
                     Op::Embedding, dt,
                     [table, range](Builder& g) {
                       return std::vector{g.embedding(
                           g.weight(table), g.input(graph::InputSlot::Tokens, 9), -4, range)};
                     },
                     std::move(step)});
    }

  for (graph::RowStat stat : {graph::RowStat::Mean, graph::RowStat::Std, graph::RowStat::Rms})
    for (float eps : {0.0f, 1e-5f}) {
      if (eps > 0 && stat != graph::RowStat::Rms) continue;
      const char* what = stat == graph::RowStat::Mean  ? "mean"
                         : stat == graph::RowStat::Std ? "std"
                         : eps > 0                     ? "rms_floored"
                                                       : "rms";
      elementwise(out, Op::RowStat, std::string("row_stat_") + what,
                  [stat, eps](Builder& g, Value x) { return g.row_stat(x, stat, eps); });
    }
  // A row of zeros: the floor decides (Gemma3n's clamp(min=1e-5)).
  const Tensor zeros = Tensor::zeros(DType::F32, {3, 8});
  out.push_back({"row_stat_rms_floored_zeros_3x8", Op::RowStat, DType::F32,
                 [zeros](Builder& g) {
                   return std::vector{g.row_stat(g.weight(zeros), graph::RowStat::Rms, 1e-5f)};
                 },
                 Step{}});
  const std::pair<Shape, Shape> broadcasts[] = {
      {{7, 13}, {7, 13}},     {{7, 13}, {7, 1}}, {{37, 300}, {300}}, {{5, 4, 9}, {5, 1, 9}},
      {{5, 4, 1}, {5, 1, 9}}, {{1, 64}, {1}},    {{5, 1}, {3, 5, 7}}};
  for (graph::BinaryOp op :
       {graph::BinaryOp::Add, graph::BinaryOp::Sub, graph::BinaryOp::Mul, graph::BinaryOp::Div})
    for (const auto& pair : broadcasts) {
      const Shape sa = pair.first, sb = pair.second;
      const Tensor a = random_tensor(sa, next_seed()), b = random_tensor(sb, next_seed());
      const char* what = op == graph::BinaryOp::Add   ? "add"
                         : op == graph::BinaryOp::Sub ? "sub"
                         : op == graph::BinaryOp::Mul ? "mul"
                                                      : "div";
      out.push_back(
          {std::string("binary_") + what + "_" + label(sa) + "_by_" + label(sb), Op::Binary,
           DType::F32,
           [op, a, b](Builder& g) { return std::vector{g.binary(op, g.weight(a), g.weight(b))}; },
           Step{}});
    }
  for (const Shape& s :
       {Shape{1, 4, 4, 64}, Shape{7, 4, 1, 13}, Shape{5, 3, 2, 9}, Shape{37, 4, 4, 300}}) {
    const Tensor a = random_tensor({s[0], s[1], s[2]}, next_seed());
    const Tensor b = random_tensor({s[0], s[2], s[3]}, next_seed());
    out.push_back(
        {"batch_matmul_" + label(s), Op::BatchMatmul, DType::F32,
         [a, b](Builder& g) { return std::vector{g.batch_matmul(g.weight(a), g.weight(b))}; },
         Step{}});
  }
}

}  // namespace lathe::optest
