// Model ids (ORG/NAME[@REVISION]) and the Hugging Face cache layout huggingface_hub uses,
// read without any network: docs/hub.md.
//
//   CACHE/models--ORG--NAME/blobs/<sha256 of an LFS file, or the git blob id of another>
//   CACHE/models--ORG--NAME/snapshots/<commit>/<file>  -> ../../blobs/<blob> (relative links)
//   CACHE/models--ORG--NAME/refs/<revision>            the commit a branch or tag names
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace lathe::hub {

// A model on the Hub and the revision wanted (a branch, a tag or a commit; "main" when none
// is given).
struct ModelRef {
  std::string id;  // ORG/NAME
  std::string revision = "main";
  bool revision_given = false;  // the text said @REVISION
  // ORG/NAME, or ORG/NAME@REVISION when a revision was given.
  std::string text() const { return revision_given ? id + "@" + revision : id; }
};

// ORG/NAME[@REVISION] when `text` has that shape (each of ORG and NAME 1 to 96 characters
// of letters, digits, '-', '_' and '.', neither "--" nor ".." inside, not starting or ending
// with '-' or '.'; a revision of 1 to 255 characters of the same and '/', without ".."),
// else nullopt.
std::optional<ModelRef> parse_model_ref(std::string_view text);

// The cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
// else ~/.cache/huggingface/hub (as huggingface_hub).
std::filesystem::path cache_dir();

// CACHE/models--ORG--NAME.
std::filesystem::path repo_dir(const std::filesystem::path& cache, const std::string& id);

// True when the revision is a full commit hash (40 lowercase hex digits).
bool is_commit_hash(std::string_view revision);

// The snapshot folder of `ref` in the cache: refs/<revision> names its commit, or the
// revision is itself a commit; nullopt when the cache holds no such snapshot with a
// config.json in it.
std::optional<std::filesystem::path> cached_snapshot(const std::filesystem::path& cache,
                                                     const ModelRef& ref);

// HF_HUB_OFFLINE set to 1, ON, YES or TRUE (any case).
bool offline_from_env();

// $HF_ENDPOINT without trailing slashes, else https://huggingface.co.
std::string endpoint_from_env();

// The token to send: $HF_TOKEN, else the first line of $HF_TOKEN_PATH, else of
// $HF_HOME/token (~/.cache/huggingface/token), as huggingface_hub reads it; nullopt when none.
std::optional<std::string> token_from_env();

}  // namespace lathe::hub
