#include "core/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace lathe {

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

}  // namespace

void page_out(const void* p, size_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  if (end > begin && in_file_mapping(begin, end))
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void advise_huge_pages(const void* p, size_t n) {
  const auto begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) / kHugePage * kHugePage;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / kHugePage * kHugePage;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

void* map_at_huge_page(size_t len, int prot, int flags, int fd) {
  // Reserve a huge page more than asked, map over the reservation from its first 2 MiB
  // boundary, and give back the slack on both sides.
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t mapped = (len + page - 1) / page * page, span = mapped + kHugePage;
  void* r = ::mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return MAP_FAILED;
  auto* base = static_cast<uint8_t*>(r);
  auto* at = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + kHugePage - 1) /
                                        kHugePage * kHugePage);
  if (::mmap(at, len, prot, flags | MAP_FIXED, fd, 0) == MAP_FAILED) {
    const int err = errno;
    ::munmap(r, span);
    errno = err;
    return MAP_FAILED;
  }
  if (at > base) ::munmap(base, static_cast<size_t>(at - base));
  if (base + span > at + mapped)
    ::munmap(at + mapped, static_cast<size_t>(base + span - (at + mapped)));
  return at;
}

namespace {

std::shared_ptr<void> heap(size_t n, size_t align) {
  // posix_memalign, not aligned_alloc: C11 (and the sanitizers) want aligned_alloc's size to
  // be a multiple of the alignment.
  void* p = nullptr;
  if (::posix_memalign(&p, align, n) != 0) return nullptr;
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

}  // namespace

std::shared_ptr<void> allocate_pages(size_t n) {
  if (n < kHugePage) return heap(n, 64);
  if (LATHE_ASAN) {  // large buffers stay on its heap, where it checks their bounds
    std::shared_ptr<void> p = heap(n, kHugePage);
    if (p) advise_huge_pages(p.get(), n);
    return p;
  }
  void* p = map_at_huge_page(n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
  if (p == MAP_FAILED) return nullptr;
  advise_huge_pages(p, n);
  return std::shared_ptr<void>(p, [n](void* q) { ::munmap(q, n); });
}

}  // namespace lathe
