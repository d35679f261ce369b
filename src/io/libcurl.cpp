#include "io/libcurl.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "core/error.h"

namespace lathe {
namespace {

constexpr const char* kSoname = "libcurl.so.4";

template <class F>
void bind(void* handle, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(handle, name));
  if (!f) fail(kSoname, ": has no ", name, "; lathe needs libcurl 7.85 or later");
}

Libcurl open_libcurl() {
  // Never closed: requests are made until the process ends.
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    fail("cannot load ", kSoname, ", which lathe needs to reach the Hub (Debian: apt-get install ",
         "libcurl4): ", dlerror());
  Libcurl c{};
  bind(handle, c.easy_init, "curl_easy_init");
  bind(handle, c.easy_cleanup, "curl_easy_cleanup");
  bind(handle, c.easy_reset, "curl_easy_reset");
  bind(handle, c.easy_setopt, "curl_easy_setopt");
  bind(handle, c.easy_perform, "curl_easy_perform");
  bind(handle, c.easy_getinfo, "curl_easy_getinfo");
  bind(handle, c.easy_strerror, "curl_easy_strerror");
  bind(handle, c.slist_append, "curl_slist_append");
  bind(handle, c.slist_free_all, "curl_slist_free_all");
  decltype(&curl_global_init) global_init = nullptr;
  bind(handle, global_init, "curl_global_init");
  if (const CURLcode rc = global_init(CURL_GLOBAL_DEFAULT); rc != CURLE_OK)
    fail("libcurl: cannot initialise: ", c.easy_strerror(rc));
  return c;
}

}  // namespace

const Libcurl& libcurl() {
  static std::mutex mutex;
  static Libcurl lib{};
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (!loaded) {
    lib = open_libcurl();
    loaded = true;
  }
  return lib;
}

}  // namespace lathe
