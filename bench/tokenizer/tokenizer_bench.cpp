// tokenizer_bench TOKENIZER_DIR DOCS.jsonl [RUNS]: encodes every document ({"text": ...} per
// line) on one thread, RUNS times, and prints one JSON line with the median seconds, MB/s and
// the token count.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenizer_bench TOKENIZER_DIR DOCS.jsonl [RUNS]\n";
    return 2;
  }
  try {
    const lathe::Tokenizer tok = lathe::Tokenizer::load(argv[1]);
    std::ifstream in(argv[2]);
    if (!in) lathe::fail(argv[2], ": cannot open");
    std::vector<std::string> docs;
    size_t bytes = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      docs.push_back(lathe::Json::parse(line)["text"].get<std::string>());
      bytes += docs.back().size();
    }
    const int runs = argc > 3 ? std::max(1, std::stoi(argv[3])) : 5;
    std::vector<double> secs;
    size_t tokens = 0;
    for (int r = 0; r < runs; ++r) {
      tokens = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& d : docs) tokens += tok.encode(d, false).size();
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(secs.begin(), secs.end());
    const double med = secs[secs.size() / 2];
    std::cout << "{\"impl\": \"lathe\", \"median_s\": " << med
              << ", \"mb_per_s\": " << bytes / 1e6 / med << ", \"bytes\": " << bytes
              << ", \"tokens\": " << tokens << ", \"runs\": " << runs << "}\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
