// `lathe lab catalog refresh`: the Hub's public model listing, read with libcurl (io/libcurl.h).

#include <memory>

#include "core/error.h"
#include "io/libcurl.h"
#include "lab/catalog.h"
#include "lab/row.h"

namespace lathe {

namespace {

// Largest listing accepted: 1000 models with their configs are ~2 MB.
constexpr size_t kMaxListingBytes = 64u << 20;

struct Body {
  std::string text;
  bool too_large = false;
};

size_t on_data(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<Body*>(user);
  const size_t n = size * count;
  if (body->text.size() + n > kMaxListingBytes) {
    body->too_large = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  body->text.append(data, n);
  return n;
}

std::string http_get(const std::string& url) {
  std::unique_ptr<CURL, void (*)(CURL*)> curl(libcurl().easy_init(), libcurl().easy_cleanup);
  if (!curl) fail("libcurl: cannot create a request");
  Body body;
  char error[CURL_ERROR_SIZE] = {};
  libcurl().easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  libcurl().easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, on_data);
  libcurl().easy_setopt(curl.get(), CURLOPT_WRITEDATA, &body);
  libcurl().easy_setopt(curl.get(), CURLOPT_ERRORBUFFER, error);
  libcurl().easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
  libcurl().easy_setopt(curl.get(), CURLOPT_MAXREDIRS, 5L);
  libcurl().easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, 20L);
  libcurl().easy_setopt(curl.get(), CURLOPT_TIMEOUT, 120L);
  libcurl().easy_setopt(curl.get(), CURLOPT_USERAGENT, "lathe-lab");
  libcurl().easy_setopt(curl.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  const CURLcode rc = libcurl().easy_perform(curl.get());
  if (body.too_large) fail(url, ": the listing is larger than ", kMaxListingBytes >> 20, " MiB");
  if (rc != CURLE_OK) fail(url, ": ", error[0] ? error : libcurl().easy_strerror(rc));
  long status = 0;
  libcurl().easy_getinfo(curl.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) fail(url, ": HTTP status ", status);
  return body.text;
}

}  // namespace

Catalog fetch_hub_listing(const std::string& endpoint, const std::string& task,
                          const std::string& view, int limit) {
  if (view != "trending" && view != "downloads")
    throw UsageError(cat("--view must be trending or downloads, got \"", view, "\""));
  if (limit < 1 || limit > 1000) throw UsageError("--limit must be between 1 and 1000");
  std::string base = endpoint;
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string url = cat(base, "/api/models?pipeline_tag=", task,
                              "&sort=", view == "trending" ? "trendingScore" : "downloads",
                              "&direction=-1&limit=", limit, "&config=true");
  const Json list = parse_json(http_get(url), url);
  if (!list.is_array()) fail(url, ": the listing must be a JSON list of models");
  Catalog c;
  c.task = task;
  c.view = view;
  c.snapshot = utc_now().substr(0, 10);
  c.source = url;
  int64_t rank = 0;
  for (size_t i = 0; i < list.size() && static_cast<int>(c.models.size()) < limit; ++i) {
    const Json& m = list[i];
    const std::string origin = cat(url, " [", i, "]");
    if (!m.is_object()) fail(origin, ": each model must be a JSON object");
    CatalogEntry e;
    const Json& id = m.contains("id") ? m["id"] : m.value("modelId", Json());
    if (!id.is_string() || id.get<std::string>().empty())
      fail(origin, ": field \"id\" must name the model");
    e.id = id.get<std::string>();
    e.task = task;
    e.revision = m.contains("sha") && m["sha"].is_string() ? m["sha"].get<std::string>() : "main";
    e.rank = ++rank;
    if (m.contains("downloads") && m["downloads"].is_number_integer())
      e.downloads = m["downloads"].get<int64_t>();
    if (m.contains("likes") && m["likes"].is_number_integer()) e.likes = m["likes"].get<int64_t>();
    if (m.contains("trendingScore") && m["trendingScore"].is_number())
      e.trending_score = m["trendingScore"].get<double>();
    if (m.contains("config") && m["config"].is_object()) {
      const Json& cfg = m["config"];
      if (cfg.contains("architectures") && cfg["architectures"].is_array() &&
          !cfg["architectures"].empty() && cfg["architectures"][0].is_string())
        e.architecture = cfg["architectures"][0].get<std::string>();
    }
    c.models.push_back(std::move(e));
  }
  return c;
}

}  // namespace lathe
