#include "graph/quantize.h"

#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/quant.h"

namespace lathe::graph {
namespace {

// Whether [begin, end) lies in one private mapping of a file (/proc/self/maps: a line with an
// inode), where unmodified pages can be dropped and read again from the file.
bool in_file_mapping(uintptr_t begin, uintptr_t end) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream f(line);
    std::string range, perms, offset, device;
    uint64_t inode = 0;
    f >> range >> perms >> offset >> device >> inode;
    const size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (begin >= lo && end <= hi) return inode != 0 && perms.size() == 4 && perms[3] == 'p';
  }
  return false;
}

// Gives back the whole pages of [p, p + n) when they are a private file mapping (a view of the
// checkpoint): MADV_DONTNEED drops them from this process, and a later read (a tied head's
// embedding rows) faults them in again from the file. Never on anonymous memory, which
// MADV_DONTNEED would zero.
void page_out(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin && in_file_mapping(begin, end))
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

WeightQuantizer::WeightQuantizer(DType type) : type_(type) {
  if (!is_quantized(type)) fail("internal: WeightQuantizer to ", dtype_name(type));
}

bool WeightQuantizer::applies(const Tensor& w) const {
  return (w.dtype() == DType::F32 || w.dtype() == DType::BF16) && w.rank() == 2 && w.dim(1) > 0 &&
         w.dim(1) % kQuantGroup == 0;
}

Tensor WeightQuantizer::get(const Tensor& w) {
  const std::pair<const void*, int64_t> key{w.data<void>(), w.dim(0)};
  std::lock_guard<std::mutex> lock(mu_);
  if (!applies(w)) {
    if (kept_.emplace(key, true).second) ++stats_.kept;
    return w;
  }
  if (auto it = done_.find(key); it != done_.end()) return it->second;
  const int64_t rows = w.dim(0), k = w.dim(1);
  Tensor q = Tensor::zeros(type_, w.shape());
  std::vector<float> row(static_cast<size_t>(k));
  const size_t in_row = w.nbytes() / static_cast<size_t>(rows), out_row = row_bytes(type_, k);
  for (int64_t r = 0; r < rows; ++r) {
    convert_to_f32(w.dtype(), w.data<uint8_t>() + static_cast<size_t>(r) * in_row, row.data(),
                   static_cast<size_t>(k));
    quantize_rows(type_, row.data(), q.mut<uint8_t>() + static_cast<size_t>(r) * out_row, 1, k);
  }
  if (!w.owned()) page_out(w.data<void>(), w.nbytes());
  ++stats_.matrices;
  stats_.source_bytes += w.nbytes();
  stats_.quantized_bytes += q.nbytes();
  done_.emplace(key, q);
  return q;
}

WeightQuantizer::Stats WeightQuantizer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace lathe::graph
