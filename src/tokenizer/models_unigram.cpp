// Unigram model: tokenizers/src/models/unigram/model.rs (encode_optimized). Viterbi over a
// byte trie of the pieces; characters no piece covers get the unk score (min score - 10);
// consecutive unknowns fuse; byte_fallback then spells unknowns as <0xXX> pieces.
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/components.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace lathe::tok {

namespace {

class Unigram : public Model {
 public:
  Unigram(const JsonFields& f, const Where& where) {
    const Json& arr = array_field(f, "vocab");
    if (arr.size() > static_cast<size_t>(INT32_MAX)) where.fail("field \"vocab\" is too large");
    scores_.reserve(arr.size());
    nodes_.push_back(Node{});
    double min_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < arr.size(); ++i) {
      const Json& e = arr[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number())
        where.fail("field \"vocab\"[", i, "] must be [piece, score], found ", e.dump());
      const std::string piece = e[0].get<std::string>();
      const double score = e[1].get<double>();
      const auto id = static_cast<int32_t>(i);
      vocab_.add(piece, id);
      scores_.push_back(score);
      min_score = std::min(min_score, score);
      insert(piece, id);
    }
    unk_score_ = min_score - 10.0;
    if (f.has("unk_id")) {
      const int32_t u = read_id(f.at("unk_id"), where.str(), "field \"unk_id\"");
      if (static_cast<size_t>(u) >= arr.size())
        where.fail("field \"unk_id\": ", u, " is outside the vocabulary of ", arr.size());
      unk_id_ = u;
    }
    byte_fallback_ = f.get_or<bool>("byte_fallback", false);
  }

  void tokenize(std::string_view s, std::vector<int32_t>& out) const override {
    if (s.empty()) return;
    struct Best {
      double score = 0;
      int64_t start = -1;
      int32_t id = 0;
    };
    std::vector<Best> best(s.size() + 1);
    size_t at = 0;
    while (at < s.size()) {
      const double base = best[at].score;
      const size_t mblen = cp_len(static_cast<unsigned char>(s[at]));
      bool has_single = false;
      int32_t node = 0;
      for (size_t k = at; k < s.size(); ++k) {
        node = child(node, static_cast<unsigned char>(s[k]));
        if (node < 0) break;
        const int32_t id = nodes_[node].id;
        if (id < 0) continue;
        const size_t end = k + 1;
        const double cand = scores_[id] + base;
        if (best[end].start < 0 || cand > best[end].score)
          best[end] = {cand, static_cast<int64_t>(at), id};
        if (end - at == mblen) has_single = true;
      }
      if (!has_single) {
        if (!unk_id_)
          fail("Unigram: the input contains a character the vocabulary lacks and unk_id is null");
        const size_t end = std::min(at + mblen, s.size());
        const double cand = unk_score_ + base;
        if (best[end].start < 0 || cand > best[end].score)
          best[end] = {cand, static_cast<int64_t>(at), *unk_id_};
      }
      at += mblen;
    }
    // Backtrack; pieces are (start, end, is_unk) in reverse order.
    struct Seg {
      size_t b, e;
      int32_t id;
      bool unk;
    };
    std::vector<Seg> segs;
    size_t end = s.size();
    while (end > 0) {
      const Best& n = best[end];
      const auto b = static_cast<size_t>(n.start);
      const bool unk = unk_id_ && n.id == *unk_id_;
      if (unk && !segs.empty() && segs.back().unk)
        segs.back().b = b;  // fuse unknowns
      else
        segs.push_back({b, end, n.id, unk});
      end = b;
    }
    for (size_t k = segs.size(); k-- > 0;) {
      const Seg& g = segs[k];
      const std::string_view piece = s.substr(g.b, g.e - g.b);
      if (!g.unk) {
        out.push_back(g.id);
        continue;
      }
      if (auto id = vocab_.find(piece)) {  // a fused run may spell a real piece
        out.push_back(*id);
        continue;
      }
      if (byte_fallback_) {
        std::vector<int32_t> bytes;
        bool all = true;
        for (unsigned char c : piece) {
          auto id = vocab_.find(byte_token(c));
          if (!id) {
            all = false;
            break;
          }
          bytes.push_back(*id);
        }
        if (all) {
          out.insert(out.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      out.push_back(*unk_id_);
    }
  }

  std::optional<int32_t> token_to_id(std::string_view t) const override { return vocab_.find(t); }
  const std::string* id_to_token(int32_t id) const override { return vocab_.token(id); }
  void for_each_token(const std::function<void(const std::string&, int32_t)>& f) const override {
    vocab_.for_each(f);
  }

 private:
  struct Node {
    int32_t id = -1;
    std::vector<std::pair<unsigned char, int32_t>> kids;  // sorted by byte
  };
  int32_t child(int32_t n, unsigned char c) const {
    const auto& k = nodes_[n].kids;
    auto it = std::lower_bound(k.begin(), k.end(), std::make_pair(c, INT32_MIN));
    return it != k.end() && it->first == c ? it->second : -1;
  }
  void insert(const std::string& piece, int32_t id) {
    int32_t n = 0;
    for (unsigned char c : piece) {
      int32_t nx = child(n, c);
      if (nx < 0) {
        nx = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(Node{});
        auto& k = nodes_[n].kids;
        k.insert(std::lower_bound(k.begin(), k.end(), std::make_pair(c, INT32_MIN)), {c, nx});
      }
      n = nx;
    }
    nodes_[n].id = id;  // a later duplicate wins, like upstream's id map
  }

  Vocab vocab_;
  std::vector<double> scores_;
  std::vector<Node> nodes_;
  double unk_score_ = 0;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_ = false;
};

}  // namespace

std::unique_ptr<Model> make_unigram(const JsonFields& f, const Where& where) {
  return std::make_unique<Unigram>(f, where);
}

}  // namespace lathe::tok
