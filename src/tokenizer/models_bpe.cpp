// BPE model: tokenizers/src/models/bpe/{model,word}.rs. Merges are applied lowest rank first,
// leftmost first among equal ranks, with a min-heap over adjacent symbol pairs.
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace lathe::tok {

int32_t read_id(const Json& v, const std::string& origin, const std::string& what) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    fail(origin, ": ", what, " must be an integer id in [0, 2^31), found ", v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

void Vocab::read_object(const JsonFields& f, const std::string& key) {
  const Json& v = f.at(key);
  if (!v.is_object())
    fail(f.origin(), ": field \"", key, "\" must be an object, found ", v.type_name());
  ids_.reserve(v.size());
  for (auto it = v.begin(); it != v.end(); ++it)
    add(it.key(),
        read_id(it.value(), f.origin(), cat("field \"", key, "\" entry \"", it.key(), "\"")));
}

void Vocab::add(std::string token, int32_t id) {
  tokens_[id] = token;
  ids_[std::move(token)] = id;
}

std::string byte_token(unsigned char b) {
  static const char* hex = "0123456789ABCDEF";
  std::string s = "<0x";
  s += hex[b >> 4];
  s += hex[b & 15];
  s += '>';
  return s;
}

namespace {

class Bpe : public Model {
 public:
  Bpe(const JsonFields& f, const Where& where) {
    vocab_.read_object(f, "vocab");
    if (f.has("dropout")) {
      const double d = f.get<double>("dropout");
      if (d != 0.0 && d != 1.0)
        where.fail("field \"dropout\": BPE dropout ", d, " is not supported (only null)");
    }
    if (f.has("unk_token")) {
      const std::string unk = f.get<std::string>("unk_token");
      unk_id_ = vocab_.find(unk);
      if (!unk_id_) where.fail("field \"unk_token\": \"", unk, "\" is not in the vocabulary");
    }
    prefix_ = f.get_or<std::string>("continuing_subword_prefix", "");
    suffix_ = f.get_or<std::string>("end_of_word_suffix", "");
    fuse_unk_ = f.get_or<bool>("fuse_unk", false);
    byte_fallback_ = f.get_or<bool>("byte_fallback", false);
    ignore_merges_ = f.get_or<bool>("ignore_merges", false);
    for (int b = 0; b < 256; ++b) {
      const auto id = vocab_.find(byte_token(static_cast<unsigned char>(b)));
      byte_ids_[b] = id ? *id : -1;
    }
    const Json& merges = array_field(f, "merges");
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const Json& m = merges[rank];
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          where.fail("field \"merges\"[", rank, "]: \"", s,
                     "\" is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        where.fail("field \"merges\"[", rank, "] must be \"a b\" or [\"a\", \"b\"], found ",
                   m.dump());
      }
      const auto ida = vocab_.find(a), idb = vocab_.find(b);
      if (!ida)
        where.fail("field \"merges\"[", rank, "]: token \"", a, "\" is not in the vocabulary");
      if (!idb)
        where.fail("field \"merges\"[", rank, "]: token \"", b, "\" is not in the vocabulary");
      const size_t cut = prefix_.size() <= b.size() && b.compare(0, prefix_.size(), prefix_) == 0
                             ? prefix_.size()
                             : 0;
      const std::string merged = a + b.substr(cut);
      const auto idm = vocab_.find(merged);
      if (!idm)
        where.fail("field \"merges\"[", rank, "]: merged token \"", merged,
                   "\" is not in the vocabulary");
      // Later duplicates overwrite earlier ones, as upstream's HashMap::insert does.
      merges_[key(*ida, *idb)] = {static_cast<int32_t>(rank), *idm};
    }
  }

  void tokenize(std::string_view word, std::vector<int32_t>& out) const override {
    if (word.empty()) return;
    if (ignore_merges_) {
      if (auto id = vocab_.find(word)) {
        out.push_back(*id);
        return;
      }
    }
    if (word.size() <= kCacheMaxWord) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      auto it = cache_.find(std::string(word));
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> ids;
    merge_word(word, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (word.size() <= kCacheMaxWord) {
      std::lock_guard<std::mutex> lock(cache_mu_);
      if (cache_.size() >= kCacheCapacity) cache_.clear();
      cache_.emplace(std::string(word), std::move(ids));
    }
  }

  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  void for_each_token(const std::function<void(const std::string&, int32_t)>& f) const override {
    vocab_.for_each(f);
  }

 private:
  static constexpr size_t kCacheMaxWord = 256;
  static constexpr size_t kCacheCapacity = 1 << 16;

  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  struct Cand {
    int32_t rank, pos, new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };

  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void merge_word(std::string_view w, std::vector<int32_t>& out) const {
    std::vector<Symbol> sym;
    sym.reserve(w.size());
    auto push = [&](int32_t id) {
      sym.push_back({id, static_cast<int32_t>(sym.size()) - 1, -1, true});
    };
    int32_t pending_unk = -1;  // an unk waiting to be pushed (fuse_unk joins runs)
    size_t i = 0;
    std::string s;
    while (i < w.size()) {
      const size_t b = i;
      next_cp(w, i);
      s.clear();
      if (b != 0) s += prefix_;
      s.append(w.substr(b, i - b));
      if (i == w.size()) s += suffix_;
      if (auto id = vocab_.find(s)) {
        if (pending_unk >= 0) push(pending_unk), pending_unk = -1;
        push(*id);
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : s) all = all && byte_ids_[c] >= 0;
        if (all) {
          // Upstream keeps a pending unk across byte-fallback pieces.
          for (unsigned char c : s) push(byte_ids_[c]);
          continue;
        }
      }
      if (unk_id_) {
        if (pending_unk >= 0 && !fuse_unk_) push(pending_unk);
        pending_unk = *unk_id_;
      }
    }
    if (pending_unk >= 0) push(pending_unk);
    for (size_t k = 0; k + 1 < sym.size(); ++k) sym[k].next = static_cast<int32_t>(k + 1);

    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
    auto consider = [&](int32_t pos) {
      const int32_t nx = sym[pos].next;
      if (nx < 0) return;
      auto it = merges_.find(key(sym[pos].id, sym[nx].id));
      if (it != merges_.end()) queue.push({it->second.first, pos, it->second.second});
    };
    for (int32_t k = 0; k + 1 < static_cast<int32_t>(sym.size()); ++k) consider(k);
    while (!queue.empty()) {
      const Cand top = queue.top();
      queue.pop();
      Symbol& cur = sym[top.pos];
      if (!cur.alive || cur.next < 0) continue;
      const int32_t nx = cur.next;
      auto it = merges_.find(key(cur.id, sym[nx].id));
      if (it == merges_.end() || it->second.second != top.new_id) continue;
      cur.id = top.new_id;
      cur.next = sym[nx].next;
      sym[nx].alive = false;
      if (cur.next >= 0) sym[cur.next].prev = top.pos;
      if (cur.prev >= 0) consider(cur.prev);
      consider(top.pos);
    }
    for (const auto& x : sym)
      if (x.alive) out.push_back(x.id);
  }

  Vocab vocab_;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, new id)
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Model> make_bpe(const JsonFields& f, const Where& where) {
  return std::make_unique<Bpe>(f, where);
}

}  // namespace lathe::tok
