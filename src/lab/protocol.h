// The lab protocol for one model, run inside its own process (`lathe lab run-one`):
//   fetch      build the tiny checkpoint (later: download from the Hub)
//   inspect    config.json: is the architecture supported?
//   plan       memory: does it fit the limit? (the cores: --threads, times the ranks of a
//              sharded run, --tp or --ep, whose workers each run this protocol)
//   load       open the safetensors files and build the model
//   compile    the compiled mode's modules for the prompt's step and the decode step, read
//              from the compile cache or compiled into it (nothing with --eager); the row's
//              compile_seconds is all the compiling and module reading of the run
//   generate   32 greedy tokens through the static KV cache
//   reference  transformers f32 on CPU: the cache, else the bridge
//   compare    tokens, teacher-forced logits and the first diverging layer, the logits of the
//              first decode steps (format 2 references); the judge
// Each stage's end is recorded in seconds from the start.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "lab/catalog.h"
#include "lab/reference.h"
#include "lab/row.h"
#include "lab/tolerances.h"

namespace lathe {

// The verdict on a compared row: sets row.status to "pass" or "fail" and returns why. Fails
// on tokens that differ (in bf16, unless they part after a reference near-tie), a logit NMSE
// over the tolerance or NaN, a decode logit NMSE over it, and in f32 on any teacher-forced
// argmax that differs, any named intermediate past the tolerance (row.first_diverging_layer)
// or any decode step past it (row.decode_first_diverging_step).
std::string judge(LabRow& row, const Reference& ref, bool f32);

struct ProtocolOptions {
  std::filesystem::path work_dir;         // tiny checkpoints are built here
  std::filesystem::path reference_cache;  // reference.h's cache
  std::optional<BridgeOptions> bridge;    // unset: cache only
  std::string dtype = "f32";              // "f32" or "bf16"
  int threads = 1;
  int64_t max_new_tokens = 32;
  std::string prompt_text = "The capital of France is";
  int64_t memory_limit_bytes = 0;       // the plan stage refuses models that cannot fit
  std::filesystem::path progress_file;  // each stage's name is appended as it starts
  // The compiled mode (docs/compile-cache.md), the lab's default: modules kept in
  // compile_cache (empty: the default root); rows name cache_remote (else compile_cache) in
  // their fetch command.
  bool compiled = true;
  std::filesystem::path compile_cache;
  std::string cache_remote;
  // Sharded runs (docs/sharding.md): each model's process runs as `tp` (or `ep`) workers
  // under mpirun, each of `threads` threads; rows record the degree and the cores.
  int tp = 1, ep = 1;
  // The planner (docs/sharding.md) picks each model's degree when max_cores > 0: the fewest
  // ranks, up to max_cores, whose memory each fits core_memory; more than one relaunches the
  // model's process as that many workers (shard::Relaunch) in the plan stage.
  int max_cores = 0;
  uint64_t core_memory = 0;
  // The fluency judge of sharded runs (src/lab/fluency.h): its model; empty or absent: the
  // row says the judge did not run.
  std::filesystem::path judge_model;
};

// Runs the protocol and returns its row; every failure becomes a row, never an exception
// (except when the progress or work folders cannot be written).
LabRow run_protocol(const CatalogEntry& entry, const ProtocolOptions& opts);

// The fields every row of `entry` carries, whatever happened: identity, stack, run script.
LabRow base_row(const CatalogEntry& entry, const ProtocolOptions& opts);

// Versions of everything below the result: lathe, compiler, C library, OS, CPU, libraries.
std::map<std::string, std::string> stack_versions();

}  // namespace lathe
