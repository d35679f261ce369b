// The explorer's JSON API over a snapshot of the lab's results (docs/explorer.md lists the
// endpoints and their parameters). Pure functions of the snapshot and the query, so they are
// tested without a socket; server.cpp puts them behind HTTP.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

#include "io/json.h"
#include "serve/store.h"

namespace lathe {

// A request the API cannot answer: `status` is the HTTP status (400 bad parameter, 404 none).
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

using ApiParams = std::map<std::string, std::string>;

// Largest page of rows one request may ask for.
inline constexpr int64_t kMaxPageRows = 500;

// Answers GET /api/<endpoint>: versions, rows, row, summary, coverage, diff. Throws ApiError.
Json api_answer(const Snapshot& snap, const std::string& endpoint, const ApiParams& params);

Json api_versions(const Snapshot& snap);
Json api_rows(const Snapshot& snap, const ApiParams& params);
Json api_row(const Snapshot& snap, const ApiParams& params);
Json api_summary(const Snapshot& snap, const ApiParams& params);
// Each ranking of the task (every task for "any") as `lathe lab report` counts it
// (ranking_coverage_json over the selected rows), and the coverage of the rows' own
// architectures: all of them, and the tiny fixtures' alone (fixture coverage).
Json api_coverage(const Snapshot& snap, const ApiParams& params);
Json api_diff(const Snapshot& snap, const ApiParams& params);

}  // namespace lathe
