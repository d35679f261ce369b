// The op bench's cases, which op_test.cpp runs on every backend: the shared pieces, and the
// cases of Gemma3n's ops kept in op_cases_rowwise.cpp, of quantized weights in
// op_cases_quant.cpp and op_cases_blocks.cpp, and of DeepSeek sparse attention in
// op_cases_dsa.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/op_harness.h"

namespace lathe::optest {

struct Case {
  std::string name;  // letters, digits and '_' (a gtest parameter name)
  graph::Op op;      // the op under test: its row of the tolerance table
  DType dtype;       // with this dtype
  Build build;
  Step step;
};

// "7x13" of a shape, for case names.
std::string label(const Shape& s);
// A new seed for each random tensor, so cases differ and every run makes the same ones.
uint32_t next_seed();
// A case whose graph applies `f` to one random F32 constant of each shape class.
void elementwise(std::vector<Case>& out, graph::Op op, const std::string& name,
                 std::function<graph::Value(graph::Builder&, graph::Value)> f, float scale = 2.0f);

// Embeddings of out-of-table ids, row statistics, broadcasting arithmetic and per-token
// matmuls (Gemma3n's AltUp, activation sparsity and embedders).
void rowwise_cases(std::vector<Case>& out);
// Block-quantized weights (op_cases_quant.cpp).
void quant_cases(std::vector<Case>& out);
// MXFP4 and FP8 weights (op_cases_blocks.cpp).
void mxfp4_cases(std::vector<Case>& out);
void fp8_cases(std::vector<Case>& out);
// DeepSeek sparse attention: the Indexer, and Attention over its chosen keys (op_cases_dsa.cpp).
void dsa_cases(std::vector<Case>& out);

}  // namespace lathe::optest
