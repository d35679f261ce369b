// The explorer's HTTP handling, apart from the socket: serve() and the fuzz target
// (fuzz/fuzz_http.cpp) set up a cpp-httplib server with the same handlers.
#pragma once

#include <httplib.h>

#include "serve/server.h"
#include "serve/store.h"

namespace lathe {

// Limits and security headers on `svr`, the checks made before routing (method, target
// length, body, Host) and the handlers of the API and the page, over `store`. `store` and
// `opts` must outlive `svr`.
void configure_explorer(httplib::Server& svr, DataStore& store, const ServeOptions& opts);

}  // namespace lathe
