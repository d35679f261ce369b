// Whether this build runs under AddressSanitizer (LATHE_SANITIZE=ON or LATHE_FUZZ=ON).
#pragma once

namespace lathe {

// ASan reserves terabytes of address space for its shadow memory, so an ASan process cannot
// start under an RLIMIT_AS limit: code that sets one asks ASan to enforce the limit instead
// (lab/subprocess.cpp).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace lathe
