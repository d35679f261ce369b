#include "lab/reference.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "io/durable.h"
#include "io/json.h"
#include "lab/subprocess.h"

namespace lathe {
namespace fs = std::filesystem;

namespace {
// The golden format of tools/reference/make_tiny.py: 2 adds decode_logits; 1 is still read.
constexpr int64_t kReferenceFormat = 2;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      fail("SHA-256: cannot initialise OpenSSL's digest");
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md.data(), &n);
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) {
      out.push_back(digits[md[i] >> 4]);
      out.push_back(digits[md[i] & 15]);
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

std::string ids_text(const std::vector<int32_t>& ids) {
  return Json(ids).dump();
}

std::vector<int32_t> id_list(const JsonFields& f, const std::string& key) {
  const Json& v = f.at(key);
  if (!v.is_array()) fail(f.origin(), ": field \"", key, "\" must be a list of token ids");
  std::vector<int32_t> ids;
  for (const Json& x : v) {
    if (!x.is_number_integer()) fail(f.origin(), ": field \"", key, "\" must hold token ids");
    ids.push_back(x.get<int32_t>());
  }
  return ids;
}

// Moves a finished entry folder into place under `key_dir`, named by its versions.
fs::path install_entry(const fs::path& tmp, const fs::path& key_dir) {
  const Json j = read_json_file(tmp / "reference.json");
  JsonFields made(j.at("made_by"), (tmp / "reference.json").string() + " made_by");
  const fs::path dest = key_dir / cat("transformers-", made.get<std::string>("transformers"),
                                      "_torch-", made.get<std::string>("torch"));
  fsync_file(tmp / "reference.json");
  fsync_file(tmp / "reference.safetensors");
  std::error_code ec;
  fs::remove_all(dest, ec);
  fs::rename(tmp, dest, ec);
  if (ec) fail(dest.string(), ": cannot store the reference: ", ec.message());
  fsync_dir(key_dir);
  return dest;
}

// Fills the temporary entry `tmp` with `fill` and installs it: on any failure (a full disk)
// the temporary entry is removed and the cache is left as it was.
template <typename Fill>
fs::path store_entry(const fs::path& tmp, const fs::path& key_dir, Fill fill) {
  try {
    fill();
    return install_entry(tmp, key_dir);
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    fail(key_dir.string(), ": cannot store the reference in the cache: ", e.what());
  }
}

fs::path fresh_tmp(const fs::path& key_dir) {
  fs::create_directories(key_dir);
  const fs::path tmp = key_dir / cat(".tmp-", ::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  return tmp;
}

}  // namespace

std::string model_content_hash(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors.index.json"})
    if (fs::exists(dir / name)) files.push_back(dir / name);
  std::vector<fs::path> weights;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") weights.push_back(e.path());
  std::sort(weights.begin(), weights.end());
  files.insert(files.end(), weights.begin(), weights.end());
  Sha256 h;
  std::vector<char> buf(1 << 20);
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) fail(f.string(), ": cannot read file");
    h.update(cat(f.filename().string(), "\n", fs::file_size(f), "\n"));
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      h.update(buf.data(), static_cast<size_t>(in.gcount()));
    }
  }
  return h.hex();
}

fs::path reference_key_dir(const fs::path& cache_root, const std::string& model_hash,
                           const std::vector<int32_t>& prompt_ids, int64_t max_new_tokens) {
  Sha256 h;
  h.update(cat(ids_text(prompt_ids), "\nmax_new_tokens=", max_new_tokens, "\ngreedy\n"));
  return cache_root / cat(model_hash.substr(0, 24), "-", h.hex().substr(0, 16));
}

Reference read_reference(const fs::path& entry, const std::string& source) {
  const fs::path json_path = entry / "reference.json";
  const Json j = read_json_file(json_path);
  JsonFields g(j, json_path.string());
  const int64_t format = g.get<int64_t>("format");
  if (format < 1 || format > kReferenceFormat)
    fail(g.origin(), ": reference format ", format, ", this lathe reads 1 to ", kReferenceFormat);
  Reference r;
  r.source = source;
  r.dir = entry;
  JsonFields made(g.at("made_by"), g.origin() + " made_by");
  r.transformers_version = made.get<std::string>("transformers");
  r.torch_version = made.get<std::string>("torch");
  r.prompt_ids = id_list(g, "prompt_ids");
  r.greedy_tokens = id_list(g, "greedy_tokens");
  r.teacher_forced_ids = id_list(g, "teacher_forced_ids");
  for (const Json& m : g.at("greedy_margins"))
    if (m.is_number()) r.greedy_margins.push_back(m.get<double>());
  r.script = g.get_or<std::string>("script", "");
  r.file.emplace(SafetensorsFile::open(entry / "reference.safetensors"));
  r.logits = r.file->tensor("logits").to(DType::F32);
  if (r.logits.rank() != 2 || r.logits.dim(0) != static_cast<int64_t>(r.teacher_forced_ids.size()))
    fail(entry.string(), "/reference.safetensors: logits must be [teacher_forced_ids, vocab]");
  if (format >= 2) {
    r.decode_logits = r.file->tensor("decode_logits").to(DType::F32);
    if (r.decode_logits.rank() != 2 || r.decode_logits.dim(0) < 1 ||
        r.decode_logits.dim(0) > static_cast<int64_t>(r.greedy_tokens.size()) ||
        r.decode_logits.dim(1) != r.logits.dim(1))
      fail(entry.string(),
           "/reference.safetensors: decode_logits must be [steps, vocab], at most one step per "
           "greedy token");
  }
  if (r.file->contains("hidden_states") && g.has("hidden_state_names")) {
    const Tensor hidden = r.file->tensor("hidden_states").to(DType::F32);
    const Json& names = g.at("hidden_state_names");
    if (hidden.rank() == 3 && hidden.dim(0) == static_cast<int64_t>(names.size())) {
      const int64_t per = hidden.dim(1) * hidden.dim(2);
      for (size_t i = 0; i < names.size(); ++i) {
        Tensor t = Tensor::zeros(DType::F32, {hidden.dim(1), hidden.dim(2)});
        std::copy_n(hidden.data<float>() + static_cast<int64_t>(i) * per, per, t.mut<float>());
        r.hidden.emplace_back(names[i].get<std::string>(), std::move(t));
      }
    }
  }
  return r;
}

std::optional<Reference> lookup_reference(const fs::path& key_dir) {
  std::error_code ec;
  if (!fs::is_directory(key_dir, ec)) return std::nullopt;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(key_dir, ec))
    if (fs::exists(e.path() / "reference.json") && e.path().filename().string()[0] != '.')
      entries.push_back(e.path());
  if (entries.empty()) return std::nullopt;
  // Newest transformers first: names are "transformers-X.Y.Z_torch-...".
  std::sort(entries.begin(), entries.end(), [](const fs::path& a, const fs::path& b) {
    auto version = [](const fs::path& p) {
      std::vector<int> v;
      std::string s = p.filename().string().substr(13);
      for (size_t i = 0; i < s.size() && s[i] != '_';) {
        int x = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
          x = x * 10 + (s[i++] - '0');
        v.push_back(x);
        while (i < s.size() && s[i] != '_' && !std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
      }
      return v;
    };
    return version(a) > version(b);
  });
  return read_reference(entries.front(), "cache");
}

void import_golden(const fs::path& fixture, const fs::path& key_dir) {
  Json golden = read_json_file(fixture / "goldens.json");
  const fs::path tmp = fresh_tmp(key_dir);
  // The goldens were made by make_tiny.py with transformers f32 on CPU (versions in made_by).
  golden["script"] = cat("python tools/reference/make_tiny.py --only ", fixture.filename().string(),
                         "   # needs torch and transformers; writes tests/fixtures/tiny/",
                         fixture.filename().string(), "/goldens.*");
  store_entry(tmp, key_dir, [&] {
    write_file_atomic(tmp / "reference.json", golden.dump(1) + "\n");
    fs::copy_file(fixture / "goldens.safetensors", tmp / "reference.safetensors",
                  fs::copy_options::overwrite_existing);
  });
}

Reference run_bridge(const BridgeOptions& opts, const fs::path& model_dir,
                     const std::vector<int32_t>& prompt_ids, int64_t max_new_tokens,
                     const fs::path& key_dir) {
  const fs::path tmp = fresh_tmp(key_dir);
  ProcessOptions p;
  p.argv = {opts.python,
            opts.script,
            model_dir.string(),
            "--prompt-ids",
            ids_text(prompt_ids),
            "--max-new-tokens",
            std::to_string(max_new_tokens),
            "--out",
            tmp.string()};
  p.log_file = tmp / "bridge.log";
  p.lift_memory_limit = true;  // the reference is not what the lab measures
  p.timeout_seconds = opts.timeout_seconds;
  ProcessResult r;
  try {
    r = run_process(p);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  if (r.timed_out || r.exit_code != 0 || !fs::exists(tmp / "reference.json")) {
    const std::string tail = file_tail(p.log_file, 1500);
    fs::remove_all(tmp);
    fail("the reference bridge (", opts.script, ") failed",
         r.timed_out ? cat(" after its timeout of ", opts.timeout_seconds, " s")
         : r.signal  ? cat(" with signal ", *r.signal)
                     : cat(" with exit code ", r.exit_code.value_or(-1)),
         ": ", tail);
  }
  fs::remove(tmp / "bridge.log");
  return read_reference(store_entry(tmp, key_dir, [] {}), "bridge");
}

}  // namespace lathe
