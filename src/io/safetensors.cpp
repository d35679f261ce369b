#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "core/error.h"
#include "core/pages.h"
#include "io/json.h"

namespace lathe {

// A read-only mapping of a whole file whose page ranges can be given back early, once their
// tensor was converted to another dtype: a hole is unmapped at once (resident memory and
// address space both shrink, which RLIMIT_AS counts) and skipped when the rest is unmapped,
// so that nothing the allocator placed there since is unmapped with it.
class FileMapping {
 public:
  FileMapping(void* base, uint64_t len) : base_(static_cast<uint8_t*>(base)), len_(len) {}
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() {
    uint64_t at = 0;
    for (const auto& [b, e] : holes_) {
      if (b > at) ::munmap(base_ + at, b - at);
      at = e;
    }
    if (len_ > at) ::munmap(base_ + at, len_ - at);
  }
  const uint8_t* base() const { return base_; }

  // Unmaps the whole pages inside [begin, end) (byte offsets into the file), once per name.
  void release(const std::string& name, uint64_t begin, uint64_t end) {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t b = (begin + page - 1) / page * page, e = end / page * page;
    std::lock_guard<std::mutex> lock(mu_);
    if (!released_.insert(name).second || e <= b) return;
    if (::munmap(base_ + b, e - b) == 0) holes_.emplace(b, e);
  }
  bool released(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_.count(name) != 0;
  }

 private:
  uint8_t* base_;
  uint64_t len_;
  mutable std::mutex mu_;
  std::set<std::pair<uint64_t, uint64_t>> holes_;  // disjoint: tensors do not overlap
  std::set<std::string> released_;
};

namespace {

// Maps [offset, offset + len) of a file read-only (offset rounded down to a page); the
// returned pointer, to the byte at `offset`, unmaps when released.
std::shared_ptr<const void> map_range(const std::filesystem::path& path, uint64_t offset,
                                      uint64_t len) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page, span = offset - start + len;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
  void* p = ::mmap(nullptr, span, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(start));
  ::close(fd);
  if (p == MAP_FAILED) fail(path.string(), ": cannot map: ", std::strerror(errno));
  return std::shared_ptr<const void>(static_cast<const uint8_t*>(p) + (offset - start),
                                     [p, span](const void*) { ::munmap(p, span); });
}

// Maps a whole file read-only.
std::shared_ptr<FileMapping> map_file(const std::filesystem::path& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path.string(), ": cannot stat: ", std::strerror(errno));
  }
  *size = static_cast<uint64_t>(st.st_size);
  if (*size == 0) {
    ::close(fd);
    fail(path.string(), ": empty file (a safetensors file starts with an 8-byte header length)");
  }
  // From a 2 MiB boundary (most kernels align a large file mapping so themselves; this makes
  // sure), so that its whole 2 MiB pages can be huge pages.
  void* p = *size < kHugePage ? ::mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0)
                              : map_at_huge_page(*size, PROT_READ, MAP_PRIVATE, fd);
  ::close(fd);
  if (p == MAP_FAILED) fail(path.string(), ": cannot map: ", std::strerror(errno));
  // Where the file's cached pages are 2 MiB folios (the kernel makes them when a mapping that
  // asked for huge pages first reads the file), they are mapped as huge pages (core/pages.h).
  advise_huge_pages(p, *size);
  return std::make_shared<FileMapping>(p, *size);
}

// Number of elements of `shape`, or an error if a dimension is negative or the product
// overflows (a lying header must not make us compute garbage sizes).
uint64_t checked_numel(const Shape& shape, const std::string& where) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(where, ": negative dimension in shape ", shape_str(shape));
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d))
      fail(where, ": shape ", shape_str(shape), " overflows");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

size_t dtype_name_size(const std::string& name) {
  if (name == "F64" || name == "I64" || name == "U64") return 8;
  if (name == "F32" || name == "I32" || name == "U32") return 4;
  if (name == "F16" || name == "BF16" || name == "I16" || name == "U16") return 2;
  if (name == "I8" || name == "U8" || name == "BOOL" || name == "F8_E4M3" || name == "F8_E5M2")
    return 1;
  return 0;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.path_ = path;
  const std::string where = path.string();
  uint64_t file_size = 0;
  f.mapping_ = map_file(path, &file_size);
  const auto* bytes = f.mapping_->base();
  if (file_size < 8)
    fail(where, ": truncated file of ", file_size, " bytes (the header length alone takes 8)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail(where, ": header length ", header_len, " exceeds the limit of ",
         kMaxSafetensorsHeaderBytes, " bytes");
  if (header_len > file_size - 8)
    fail(where, ": header length ", header_len, " runs beyond the end of the file (", file_size,
         " bytes)");
  const std::string header(reinterpret_cast<const char*>(bytes + 8), header_len);
  const Json json = parse_json(header, where + " (header)");
  if (!json.is_object()) fail(where, ": header is not a JSON object");
  const uint64_t data_size = file_size - 8 - header_len;
  f.data_ = bytes + 8 + header_len;

  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(where, ": __metadata__ is not an object");
      for (const auto& [k, v] : value.items())
        f.metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    const std::string tw = where + ": tensor \"" + name + "\"";
    if (!value.is_object()) fail(tw, " is not an object");
    JsonFields fields(value, tw);
    SafetensorsEntry e;
    e.dtype_name = fields.get<std::string>("dtype");
    const Json& shape = fields.at("shape");
    if (!shape.is_array() || shape.size() > 8)
      fail(tw, ": shape must be an array of at most 8 dims");
    for (const Json& d : shape) {
      if (!d.is_number_integer()) fail(tw, ": shape holds a non-integer ", d.dump());
      e.shape.push_back(d.get<int64_t>());
    }
    const Json& offsets = fields.at("data_offsets");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail(tw, ": data_offsets must be two non-negative integers");
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end) fail(tw, ": data_offsets [", e.begin, ", ", e.end, "] are reversed");
    if (e.end > data_size)
      fail(tw, ": data_offsets [", e.begin, ", ", e.end, "] lie outside the data section of ",
           data_size, " bytes");
    const size_t elem = dtype_name_size(e.dtype_name);
    if (elem == 0) fail(tw, ": unknown dtype \"", e.dtype_name, "\"");
    const uint64_t numel = checked_numel(e.shape, tw);
    if (numel > UINT64_MAX / elem || numel * elem != e.end - e.begin)
      fail(tw, ": shape ", shape_str(e.shape), " of ", e.dtype_name, " needs ", numel * elem,
           " bytes but data_offsets span ", e.end - e.begin);
    f.entries_.emplace(name, std::move(e));
  }

  // No two tensors may share bytes.
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> order;
  for (const auto& [name, e] : f.entries_) order.emplace_back(&name, &e);
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return a.second->begin < b.second->begin; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i].second->begin < order[i - 1].second->end)
      fail(where, ": tensors \"", *order[i - 1].first, "\" and \"", *order[i].first,
           "\" overlap (data_offsets [", order[i - 1].second->begin, ", ", order[i - 1].second->end,
           "] and [", order[i].second->begin, ", ", order[i].second->end, "])");
  }
  return f;
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail(path_.string(), ": no tensor \"", name, "\"");
  const SafetensorsEntry& e = it->second;
  const auto dtype = dtype_from_name(e.dtype_name);
  if (!dtype)
    fail(path_.string(), ": tensor \"", name, "\" has dtype ", e.dtype_name,
         ", which lathe cannot compute with (supported: F32, BF16, F16, I32)");
  const uint8_t* p = data_ + e.begin;
  std::shared_ptr<const void> owner(mapping_, p);  // keeps the whole mapping alive
  if (mapping_->released(name)) {
    // Given back after a conversion and asked for again: map its bytes on their own.
    owner = map_range(path_, static_cast<uint64_t>(p - mapping_->base()), e.end - e.begin);
    p = static_cast<const uint8_t*>(owner.get());
  }
  // Views must be aligned to their element size; a misaligned tensor is copied once.
  if (reinterpret_cast<uintptr_t>(p) % dtype_size(*dtype) != 0) {
    Tensor copy = Tensor::zeros(*dtype, e.shape);
    std::memcpy(copy.mut<void>(), p, e.end - e.begin);
    return copy;
  }
  return Tensor::view(*dtype, e.shape, p, std::move(owner));
}

std::span<const uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail(path_.string(), ": no tensor \"", name, "\"");
  if (mapping_->released(name))
    fail("internal: ", path_.string(), ": tensor \"", name, "\" was released");
  return {data_ + it->second.begin, static_cast<size_t>(it->second.end - it->second.begin)};
}

void SafetensorsFile::release(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  const uint64_t at = static_cast<uint64_t>(data_ - mapping_->base());
  mapping_->release(name, at + it->second.begin, at + it->second.end);
}

}  // namespace lathe
