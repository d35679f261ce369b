// The op bench's cases of block-quantized weights (Q8_0, Q4_0: core/quant.h): Linear over
// decode, odd row counts and the widths of real models, with and without bias; Embedding
// tables; Experts. The quantized kernels of each level against the reference kernel, which
// quantizes the activations the same way (backends/cpu/quant_kernels.h).
#include "backends/op_cases.h"

namespace lathe::optest {

using graph::Activation;
using graph::Builder;
using graph::Op;
using graph::Value;

void quant_cases(std::vector<Case>& out) {
  struct S {
    int64_t m, n, k;
    const char* what;
  };
  const S shapes[] = {{1, 64, 128, "decode"}, {1, 37, 640, "decode_n37"}, {7, 16, 64, "odd_rows"},
                      {3, 9, 64, "n9"},       {2, 64, 576, "k576"},       {37, 300, 192, "large"},
                      {65, 29, 256, "rows65"}};
  for (DType dt : {DType::Q8_0, DType::Q4_0}) {
    const std::string type(dtype_name(dt));
    for (bool bias : {false, true})
      for (const S& s : shapes) {
        const Tensor x = random_tensor({s.m, s.k}, next_seed());
        const Tensor w = random_tensor({s.n, s.k}, next_seed()).to(dt);
        const Tensor b = bias ? random_tensor({s.n}, next_seed()) : Tensor();
        out.push_back({std::string("linear_") + s.what + "_" + label({s.m, s.n, s.k}) +
                           (bias ? "_bias_" : "_") + type,
                       Op::Linear, dt,
                       [x, w, b](Builder& g) {
                         return std::vector{g.linear(g.weight(x), g.weight(w), g.weight(b))};
                       },
                       Step{}});
      }
    const Tensor table = random_tensor({300, 128}, next_seed()).to(dt);
    Step step = rows_step(5);
    step.tokens = {0, 299, 17, 17, 150};
    out.push_back({"embedding_300x128_ids5_" + type, Op::Embedding, dt,
                   [table](Builder& g) {
                     return std::vector{
                         g.embedding(g.weight(table), g.input(graph::InputSlot::Tokens, 5))};
                   },
                   step});
    for (int64_t tokens : {1, 9}) {
      const int64_t dim = 64, inter = 128, experts = 4;
      const Tensor x = random_tensor({tokens, dim}, next_seed());
      const Tensor router = random_tensor({experts, dim}, next_seed());
      std::vector<std::array<Tensor, 3>> w;
      for (int64_t e = 0; e < experts; ++e)
        w.push_back({random_tensor({inter, dim}, next_seed()).to(dt),
                     random_tensor({inter, dim}, next_seed()).to(dt),
                     random_tensor({dim, inter}, next_seed()).to(dt)});
      out.push_back({"experts_" + label({tokens, dim, inter}) + "_e4_k2_" + type, Op::Experts, dt,
                     [x, router, w](Builder& g) {
                       Value xv = g.weight(x);
                       Value r = g.route(g.linear(xv, g.weight(router)),
                                         {.routing = graph::Routing::SoftmaxTopK, .top_k = 2});
                       std::vector<Builder::Expert> ex;
                       for (const auto& e : w)
                         ex.push_back({g.weight(e[0]), g.weight(e[1]), g.weight(e[2])});
                       return std::vector{g.experts(xv, r, ex, Activation::Silu, {})};
                     },
                     Step{}});
    }
  }
}

}  // namespace lathe::optest
