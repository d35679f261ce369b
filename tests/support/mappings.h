// Test helpers: what /proc/self says about this process's memory.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace lathe::testing {

// The VmFlags of the mapping that holds `p` (/proc/self/smaps), e.g. "rd wr mr mw me ac hg";
// empty when no mapping holds it. "hg": huge pages advised (MADV_HUGEPAGE).
inline std::string vm_flags(const void* p) {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {  // a mapping's first line: "lo-hi perms offset dev inode path"
      const uintptr_t lo = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t hi = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line.substr(8);
    }
  }
  return "";
}

// Whether the mapping that holds `p` has huge pages advised.
inline bool huge_pages_advised(const void* p) {
  std::istringstream flags(vm_flags(p));
  for (std::string f; flags >> f;)
    if (f == "hg") return true;
  return false;
}

// Whether this kernel has transparent huge pages (and they are not turned off).
inline bool kernel_has_huge_pages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(in, modes);
  return !modes.empty() && modes.find("[never]") == std::string::npos;
}

// VmSize (address space, what the lab's RLIMIT_AS counts) of this process, in KiB.
inline int64_t vm_size_kib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7));
  return -1;
}

}  // namespace lathe::testing
