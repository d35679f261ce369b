// libcurl, opened with dlopen the first time lathe makes a request, so the commands that never
// touch the network neither load nor map it and the dozen libraries it links (TLS, HTTP/2,
// LDAP, Kerberos). libcurl.so.4 is the soname of libcurl's stable ABI; its header gives the
// types. The calls are the library's own, through pointers: `libcurl().easy_setopt(...)`.
#pragma once

#include <curl/curl.h>

namespace lathe {

struct Libcurl {
  decltype(&curl_easy_init) easy_init;
  decltype(&curl_easy_cleanup) easy_cleanup;
  decltype(&curl_easy_reset) easy_reset;
  decltype(&curl_easy_setopt) easy_setopt;
  decltype(&curl_easy_perform) easy_perform;
  decltype(&curl_easy_getinfo) easy_getinfo;
  decltype(&curl_easy_strerror) easy_strerror;
  decltype(&curl_slist_append) slist_append;
  decltype(&curl_slist_free_all) slist_free_all;
};

// libcurl, loaded and initialised (curl_global_init) on the first call. Throws lathe::Error,
// one line naming libcurl.so.4, when it cannot be loaded or initialised.
const Libcurl& libcurl();

}  // namespace lathe
