#include "lab/report.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace lathe {

std::string share_percent(int64_t part, int64_t whole) {
  if (whole == 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%",
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buf;
}

namespace {

std::string cell(const std::string& s) {
  std::string out;
  for (char c : s)
    out += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
  return out;
}

}  // namespace

Json report_json(const std::vector<LabRow>& rows) {
  std::map<std::string, int64_t> by_status;
  for (const char* s : kStatuses) by_status[s] = 0;
  std::map<std::string, std::map<std::string, int64_t>> by_arch;
  for (const auto& r : rows) {
    ++by_status[r.status];
    ++by_arch[r.architecture.empty() ? "(unknown)" : r.architecture][r.status];
  }
  Json archs = Json::array();
  int64_t seen = 0, passing = 0;
  for (const auto& [arch, counts] : by_arch) {
    int64_t models = 0;
    for (const auto& [s, n] : counts) models += n;
    const bool passes = counts.count("pass") && counts.at("pass") > 0;
    if (arch != "(unknown)") {
      ++seen;
      passing += passes;
    }
    archs.push_back(
        {{"architecture", arch}, {"models", models}, {"by_status", counts}, {"passes", passes}});
  }
  std::set<std::string> versions;
  for (const auto& r : rows)
    versions.insert(cat("lathe ", r.lathe_version, " / transformers ",
                        r.transformers_version.empty() ? "none" : r.transformers_version));
  return {{"rows", rows.size()},
          {"by_status", by_status},
          {"coverage",
           {{"architectures", seen},
            {"passing", passing},
            {"share", seen ? static_cast<double>(passing) / static_cast<double>(seen) : 0.0}}},
          {"versions", versions},
          {"architectures", archs}};
}

Json ranking_coverage_json(const Catalog& ranking, const std::vector<LabRow>& rows,
                           const std::function<bool(const std::string&)>& implemented) {
  std::set<std::string> passing_ids;
  for (const auto& r : rows)
    if (r.status == "pass") passing_ids.insert(r.model_id);
  std::map<std::string, int64_t> uses;  // architecture: ranked models
  std::set<std::string> passing_archs;
  int64_t unknown = 0, models_implemented = 0, models_pass = 0;
  for (const auto& e : ranking.models) {
    const bool pass = passing_ids.count(e.id) > 0;
    models_pass += pass;
    if (e.architecture.empty()) {
      ++unknown;
      continue;
    }
    ++uses[e.architecture];
    models_implemented += implemented(e.architecture);
    if (pass) passing_archs.insert(e.architecture);
  }
  int64_t archs_implemented = 0;
  std::vector<std::pair<int64_t, std::string>> missing;
  for (const auto& [arch, n] : uses) {
    if (implemented(arch))
      ++archs_implemented;
    else
      missing.push_back({n, arch});
  }
  std::sort(missing.begin(), missing.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  Json unimplemented = Json::array();
  for (const auto& [n, arch] : missing)
    unimplemented.push_back({{"architecture", arch}, {"models", n}});
  const auto models = static_cast<int64_t>(ranking.models.size());
  const auto archs = static_cast<int64_t>(uses.size());
  const Json shares = {
      {"models_implemented", share_percent(models_implemented, models)},
      {"models_pass", share_percent(models_pass, models)},
      {"architectures_implemented", share_percent(archs_implemented, archs)},
      {"architectures_pass", share_percent(static_cast<int64_t>(passing_archs.size()), archs)}};
  return {{"task", ranking.task},
          {"view", ranking.view},
          {"snapshot", ranking.snapshot},
          {"percent", shares},
          {"models", ranking.models.size()},
          {"models_unknown_architecture", unknown},
          {"models_implemented", models_implemented},
          {"models_pass", models_pass},
          {"architectures", uses.size()},
          {"architectures_implemented", archs_implemented},
          {"architectures_pass", passing_archs.size()},
          {"unimplemented", unimplemented}};
}

std::string report_markdown(const std::vector<LabRow>& rows) {
  return report_markdown(rows, {});
}

std::string report_markdown(const std::vector<LabRow>& rows, const std::vector<Json>& rankings) {
  const Json j = report_json(rows);
  std::string md = "# lathe lab report\n\n";
  for (const auto& v : j["versions"]) md += cat("- ", v.get<std::string>(), "\n");
  if (!rankings.empty()) {
    md +=
        "\n## Coverage of the rankings\n\nOf each ranking's models and of the architectures "
        "they use: those lathe implements, and those verified to pass by the rows below.\n\n"
        "| ranking | snapshot | models | implemented | verified pass | architectures | "
        "implemented | verified pass |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (const Json& r : rankings) {
      const Json& pc = r["percent"];
      md += cat("| ", r["task"].get<std::string>(), " / ", r["view"].get<std::string>(), " | ",
                r["snapshot"].get<std::string>(), " | ", r["models"].get<int64_t>(), " | ",
                pc["models_implemented"].get<std::string>(), " | ",
                pc["models_pass"].get<std::string>(), " | ", r["architectures"].get<int64_t>(),
                " | ", pc["architectures_implemented"].get<std::string>(), " | ",
                pc["architectures_pass"].get<std::string>(), " |\n");
    }
    for (const Json& r : rankings) {
      if (r["unimplemented"].empty()) continue;
      md += cat("\nNot implemented, ", r["task"].get<std::string>(), " / ",
                r["view"].get<std::string>(), " (ranked models): ");
      std::string list;
      for (const Json& u : r["unimplemented"])
        list += cat(list.empty() ? "" : ", ", u["architecture"].get<std::string>(), " (",
                    u["models"].get<int64_t>(), ")");
      md += list + "\n";
    }
  }
  const Json& cov = j["coverage"];
  md += cat("\n**", rankings.empty() ? "Coverage" : "Coverage of the rows' own architectures", ": ",
            cov["passing"].get<int64_t>(), " of ", cov["architectures"].get<int64_t>(),
            " architectures pass (",
            share_percent(cov["passing"].get<int64_t>(), cov["architectures"].get<int64_t>()),
            "); ", rows.size(), " models.**",
            rankings.empty() ? ""
                             : " (On the bundled catalog these "
                               "are lathe's own tiny fixtures.)",
            "\n\n");
  md += "| status | models |\n|---|---:|\n";
  for (const char* s : kStatuses)
    if (j["by_status"][s].get<int64_t>() > 0)
      md += cat("| ", s, " | ", j["by_status"][s].get<int64_t>(), " |\n");
  md +=
      "\n| architecture | models | pass | fail | error | timeout | oom | unsupported | untested "
      "|\n";
  md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& a : j["architectures"]) {
    md += cat("| ", cell(a["architecture"].get<std::string>()), " | ", a["models"].get<int64_t>());
    for (const char* s : kStatuses) md += cat(" | ", a["by_status"].value(s, int64_t{0}));
    md += " |\n";
  }
  std::string failures;
  for (const auto& r : rows)
    if (r.status != "pass")
      failures += cat("| ", cell(r.model_id), " | ", r.status, " | ", r.stage, " | ",
                      cell(r.error_type), " | ", cell(r.error_message.substr(0, 160)), " |\n");
  if (!failures.empty())
    md +=
        "\n## Not passing\n\n| model | status | stage | error | message "
        "|\n|---|---|---|---|---|\n" +
        failures;
  return md;
}

Json diff_json(const std::vector<LabRow>& a, const std::vector<LabRow>& b) {
  std::map<std::string, const LabRow*> in_a, in_b;
  for (const auto& r : a) in_a[r.key()] = &r;
  for (const auto& r : b) in_b[r.key()] = &r;
  auto brief = [](const LabRow& r) {
    return Json{{"model_id", r.model_id},
                {"revision", r.revision},
                {"task", r.task},
                {"dtype", r.dtype},
                {"architecture", r.architecture},
                {"status", r.status},
                {"stage", r.stage},
                {"error_type", r.error_type},
                {"error_message", r.error_message}};
  };
  Json regressions = Json::array(), fixes = Json::array(), only_a = Json::array(),
       only_b = Json::array();
  int64_t same = 0;
  for (const auto& [k, ra] : in_a) {
    auto it = in_b.find(k);
    if (it == in_b.end()) {
      only_a.push_back(brief(*ra));
      continue;
    }
    const LabRow& rb = *it->second;
    const bool pa = ra->status == "pass", pb = rb.status == "pass";
    if (pa && !pb)
      regressions.push_back({{"a", brief(*ra)}, {"b", brief(rb)}});
    else if (!pa && pb)
      fixes.push_back({{"a", brief(*ra)}, {"b", brief(rb)}});
    else
      ++same;
  }
  for (const auto& [k, rb] : in_b)
    if (!in_a.count(k)) only_b.push_back(brief(*rb));
  return {{"regressions", regressions},
          {"fixes", fixes},
          {"only_in_a", only_a},
          {"only_in_b", only_b},
          {"unchanged", same}};
}

std::string diff_markdown(const Json& d) {
  std::string md =
      cat("# lathe lab diff\n\n", d["regressions"].size(), " regressions, ", d["fixes"].size(),
          " fixes, ", d["unchanged"].get<int64_t>(), " unchanged, ", d["only_in_a"].size(),
          " only in A, ", d["only_in_b"].size(), " only in B.\n");
  for (const char* part : {"regressions", "fixes"}) {
    if (d[part].empty()) continue;
    md += cat("\n## ",
              part == std::string("regressions") ? "Regressions (pass in A, not in B)"
                                                 : "Fixes (pass in B, not in A)",
              "\n\n| model | A | B | B's error |\n|---|---|---|---|\n");
    for (const auto& x : d[part])
      md += cat("| ", cell(x["a"]["model_id"].get<std::string>()), " | ",
                x["a"]["status"].get<std::string>(), " | ", x["b"]["status"].get<std::string>(),
                " (", x["b"]["stage"].get<std::string>(), ") | ",
                cell(x["b"]["error_message"].get<std::string>().substr(0, 160)), " |\n");
  }
  return md;
}

}  // namespace lathe
