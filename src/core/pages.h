// Pages: giving back the pages of a mapped checkpoint that a copy has replaced (a quantized
// matrix, a rank's slice), so they stop counting in this process's resident memory; and asking
// for 2 MiB pages where weights and caches are large.
#pragma once

#include <cstddef>
#include <memory>

// LATHE_ASAN: whether AddressSanitizer is built in (GCC says so with __SANITIZE_ADDRESS__,
// clang with __has_feature).
#if defined(__SANITIZE_ADDRESS__)
#define LATHE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LATHE_ASAN 1
#endif
#endif
#ifndef LATHE_ASAN
#define LATHE_ASAN 0
#endif

namespace lathe {

// Transparent huge pages. Decode and prefill stream every weight once per step; on 4 KiB pages
// that is a TLB miss every 4 KiB of each stream, dearer still in a virtual machine, where a
// miss walks two page tables (measured in docs/performance-log.md, "Huge pages for the weights").
constexpr size_t kHugePage = size_t{1} << 21;

// Asks the kernel to back the whole 2 MiB pages inside [p, p + n) with huge pages
// (MADV_HUGEPAGE: needed where transparent huge pages are "madvise", the common default; a
// no-op where they are "never" or the kernel lacks them). Memory outside whole 2 MiB pages
// keeps 4 KiB pages, so that nothing is resident that was not asked for.
void advise_huge_pages(const void* p, size_t n);

// Maps `len` bytes (`prot`, `flags` and `fd` as mmap takes them, the offset 0) at a 2 MiB
// boundary, taking no more address space than that; MAP_FAILED (errno set) if it cannot.
void* map_at_huge_page(size_t len, int prot, int flags, int fd);

// n bytes (n > 0) of writable memory, freed when the last owner goes; null when out of
// memory. From 2 MiB up: mapped on their own from a 2 MiB boundary, huge pages advised, and
// no more address space than the pages hold (an aligned heap allocation would waste up to
// 2 MiB of it each, which an address-space limit such as the lab's counts); below: 64-byte
// aligned on the heap (and large ones too under AddressSanitizer, which checks the bounds of
// heap blocks only). Fresh pages read as zero; heap memory does not.
std::shared_ptr<void> allocate_pages(size_t n);

// Gives back the whole pages of [p, p + n) when they are a private file mapping (a view of a
// checkpoint): MADV_DONTNEED drops them from this process, and a later read faults them in
// again from the file. Never on anonymous memory, which MADV_DONTNEED would zero.
void page_out(const void* p, size_t n);

}  // namespace lathe
