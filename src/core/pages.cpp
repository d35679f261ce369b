#include "core/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
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

}  // namespace lathe
