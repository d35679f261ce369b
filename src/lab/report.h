// What a sweep found, summarised: coverage by architecture and status (`lathe lab report`),
// and what changed between two datasets (`lathe lab diff A B`).
#pragma once

#include <string>
#include <vector>

#include "io/json.h"
#include "lab/row.h"

namespace lathe {

// Counts per status, per architecture, and the coverage: the share of the architectures
// seen that have at least one passing model.
Json report_json(const std::vector<LabRow>& rows);
std::string report_markdown(const std::vector<LabRow>& rows);

// Rows matched by (model, revision, task, device kind, dtype): regressions (passed in A,
// not in B), fixes (the reverse), and models only in A or only in B.
Json diff_json(const std::vector<LabRow>& a, const std::vector<LabRow>& b);
std::string diff_markdown(const Json& diff);

}  // namespace lathe
