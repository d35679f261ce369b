// What a sweep found, summarised: coverage by architecture and status (`lathe lab report`),
// and what changed between two datasets (`lathe lab diff A B`).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "io/json.h"
#include "lab/catalog.h"
#include "lab/row.h"

namespace lathe {

// Counts per status, per architecture, and the coverage: the share of the architectures
// seen that have at least one passing model.
Json report_json(const std::vector<LabRow>& rows);
std::string report_markdown(const std::vector<LabRow>& rows);

// `part` of `whole` as a percentage with one decimal ("42.9%"), "n/a" when `whole` is 0: how
// the report and the explorer write every coverage share.
std::string share_percent(int64_t part, int64_t whole);

// Coverage of a ranking as the Hub's rankings are counted: of its models and of the distinct
// architectures they use (the catalog's architecture field, known without downloading), the
// share lathe implements (`implemented` says which architecture names) and the share verified
// pass by `rows` (a row of the same model id with status pass); and the architectures lathe
// does not implement, most used first. Models of no known architecture are counted apart.
// `percent` holds the four shares as share_percent writes them.
Json ranking_coverage_json(const Catalog& ranking, const std::vector<LabRow>& rows,
                           const std::function<bool(const std::string&)>& implemented);
// The report with each ranking's coverage first (the headline), then the rows' own coverage.
std::string report_markdown(const std::vector<LabRow>& rows, const std::vector<Json>& rankings);

// Rows matched by (model, revision, task, device kind, dtype): regressions (passed in A,
// not in B), fixes (the reverse), and models only in A or only in B.
Json diff_json(const std::vector<LabRow>& a, const std::vector<LabRow>& b);
std::string diff_markdown(const Json& diff);

}  // namespace lathe
