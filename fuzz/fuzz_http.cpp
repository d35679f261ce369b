// The explorer's HTTP handling from hostile bytes: the input is what a client sends on one
// connection (request lines, headers, query parameters, maybe several requests), handed to a
// cpp-httplib server set up by configure_explorer() exactly as `lathe lab serve` sets up its
// own, over a small dataset with two versions, a ranking and injection strings, and the
// connection gate's head test on the same bytes. Besides crashes, a 500 answer is a finding:
// every bad request must be refused with a 4xx.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "lab/catalog.h"
#include "lab/dataset.h"
#include "lab/row.h"
#include "serve/gate.h"
#include "serve/http.h"

namespace {

// One connection: reads come from the fuzzer's bytes, writes are kept to be checked.
class BytesStream : public httplib::Stream {
 public:
  explicit BytesStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::copy_n(in_.data() + pos_, n, ptr);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 40000;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 8080;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  bool drained() const { return pos_ == in_.size(); }
  std::string take_output() { return std::exchange(out_, {}); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
};

// process_request() is protected: the one way in without a socket.
class FuzzServer : public httplib::Server {
 public:
  bool handle_one(httplib::Stream& s) {
    bool closed = false;
    process_request(s, /*close_connection=*/false, closed, nullptr);
    return !closed;
  }
};

lathe::LabRow make_row(const std::string& id, const std::string& status,
                       const std::string& lathe_version, const std::string& tf) {
  lathe::LabRow r;
  r.model_id = id;
  r.revision = "main";
  r.task = "text-generation";
  r.architecture = "LlamaForCausalLM";
  r.status = status;
  r.stage = status == "pass" ? "done" : "compare";
  r.lathe_version = lathe_version;
  r.transformers_version = tf;
  r.finished_at = "2026-11-30T00:00:00.000000Z";
  r.error_message = "<script>alert(1)</script>";
  return r;
}

struct Explorer {
  lathe::ServeOptions opts;
  std::unique_ptr<lathe::DataStore> store;
  FuzzServer server;

  Explorer() {
    const auto dir = lathe::fuzz::scratch_dir() / "explorer";
    std::filesystem::create_directories(dir / "catalog");
    std::vector<lathe::LabRow> rows;
    const char* statuses[] = {"pass", "fail", "error", "timeout", "oom", "unsupported"};
    for (int i = 0; i < 12; ++i)
      for (const char* v : {"0.1.0", "0.2.0"})
        rows.push_back(make_row("org/model-" + std::to_string(i), statuses[(i + (v[2] - '0')) % 6],
                                v, i % 4 == 0 ? "" : "5.24.0"));
    lathe::write_parquet(rows, dir / "rows.parquet");
    lathe::Catalog c;
    c.view = "trending";
    c.snapshot = "2026-11-30";
    for (const char* id : {"org/model-3", "org/never-run", "org/model-1"}) {
      lathe::CatalogEntry e;
      e.id = id;
      e.rank = static_cast<int64_t>(c.models.size()) + 1;
      c.models.push_back(e);
    }
    lathe::write_catalog(c, dir / "catalog" / "text-generation-trending.json");
    opts.data = dir;
    opts.catalog = dir / "catalog";
    store = std::make_unique<lathe::DataStore>(opts.data, opts.catalog);
    lathe::configure_explorer(server, *store, opts);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Explorer explorer;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The gate's test for a whole head (serve/gate.h), which `lathe lab serve` runs first: a
  // length it gives ends with the blank line's '\n', within the bytes.
  if (const auto head = lathe::request_head_length(bytes);
      head && (*head < 2 || *head > size || bytes[*head - 1] != '\n')) {
    std::fprintf(stderr, "request_head_length gave %zu of %zu bytes\n", *head, size);
    std::abort();
  }
  BytesStream stream(bytes);
  // A few requests per connection, as keep-alive allows; each answer is checked on its own.
  for (int i = 0; i < 4 && !stream.drained(); ++i) {
    const bool open = explorer.server.handle_one(stream);
    const std::string out = stream.take_output();
    if (out.starts_with("HTTP/1.1 500")) {
      std::fprintf(stderr, "500 answer:\n%.2000s\n", out.c_str());
      std::abort();
    }
    if (!open) break;
  }
  return 0;
}
