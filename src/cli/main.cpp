// The `lathe` command: subcommand dispatch and the one place errors become exit codes.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "backends/cpu/isa.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/version.h"
#include "shard/worker.h"

namespace {

const char* kUsage = R"(usage: lathe COMMAND [ARGS] [--help]

Runs Hugging Face checkpoints natively on CPU cores.

commands:
  generate MODEL         generate tokens from a prompt
  logits MODEL           teacher-forced logits of a token sequence, to a safetensors file
  bench MODEL            load time, time to first token, prefill and decode speed, peak memory
  inspect MODEL          architecture, parameters, memory, and whether lathe supports it
  tokenize MODEL         JSON lines of text in, token ids out (tokenizer.json)
  detokenize MODEL       JSON lines of token ids in, text out
  chat-template MODEL    JSON lines of conversations in, rendered prompts out
  pull ORG/NAME[@REV]    download a Hub model into the Hugging Face cache (docs/hub.md)
  cache status|cleanup|sync|fetch
                         the persistent compile cache (docs/compile-cache.md)
  tiny build|check       tiny test checkpoints and their comparison with transformers
  architectures          the supported architectures (--markdown: docs/architectures.md)
  lab run|report|diff|merge|catalog|serve
                         the compatibility lab: run models, compare with transformers,
                         write a Parquet dataset, serve it in the explorer (lathe lab --help)

MODEL is a checkpoint folder or a Hub id ORG/NAME[@REVISION] found in the Hugging Face cache
(fetched by lathe pull, or by --pull).

lathe help COMMAND (or lathe COMMAND --help) describes a command; lathe --version prints the
version and the commit lathe was built from; lathe --cpu-kernels the fast kernel levels this
CPU runs (LATHE_CPU_ISA=portable|avx2|avx512|avx512bf16 chooses one).

exit codes: 0 success, 1 a failure you can act on (the message names the file and field),
            2 a usage error.
)";

int dispatch(int argc, char** argv) {
  using namespace lathe;
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "generate") return cmd_generate(argc, argv);
  if (cmd == "logits") return cmd_logits(argc, argv);
  if (cmd == "bench") return cmd_bench(argc, argv);
  if (cmd == "inspect") return cmd_inspect(argc, argv);
  if (cmd == "tiny") return cmd_tiny(argc, argv);
  if (cmd == "tokenize") return cmd_tokenize(argc, argv);
  if (cmd == "detokenize") return cmd_detokenize(argc, argv);
  if (cmd == "chat-template") return cmd_chat_template(argc, argv);
  if (cmd == "architectures") return cmd_architectures(argc, argv);
  if (cmd == "lab") return cmd_lab(argc, argv);
  if (cmd == "pull") return cmd_pull(argc, argv);
  if (cmd == "cache") return cmd_cache(argc, argv);
  if (cmd == "--cpu-kernels") {  // the fast kernel levels (backends/cpu/isa.h)
    std::cout << "default: " << cpu::isa_name(cpu::default_isa())
              << "\nactive: " << cpu::isa_name(cpu::active_isa()) << "\navailable:";
    for (int i = 0; i <= static_cast<int>(cpu::detected_isa()); ++i)
      std::cout << " " << cpu::isa_name(static_cast<cpu::Isa>(i));
    std::cout << "\n";
    return 0;
  }
  if (cmd == "--version" || cmd == "-V") {
    std::cout << "lathe " << kLatheVersion << " (commit " << kLatheCommit << ")\n";
    return 0;
  }
  if (cmd == "help" && argc > 2) {
    // lathe help COMMAND [SUBCOMMAND ...] is lathe COMMAND [SUBCOMMAND ...] --help.
    std::vector<char*> args(argv, argv + argc);
    args.erase(args.begin() + 1);
    static char help[] = "--help";
    args.push_back(help);
    args.push_back(nullptr);
    return dispatch(static_cast<int>(args.size()) - 1, args.data());
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << (cmd.empty() ? "" : "lathe: unknown command \"" + cmd + "\"\n") << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lathe;
  // A worker of a sharded run says which rank it is in its errors, and records them for the
  // launcher (src/shard/worker.h).
  auto failed = [](const std::string& message) {
    shard::Worker* w = shard::Worker::current();
    const std::string rank = w ? cat("rank ", w->spec().rank, ": ") : "";
    std::cerr << "error: " << rank << message << "\n";
    if (w) w->finish(1, message);
    return 1;
  };
  try {
    if (auto request = shard::find_request(argc, argv)) {
      if (!shard::under_mpi()) return shard::launch(*request, argc, argv);
      shard::Worker::start(*request);
    }
    const int code = dispatch(argc, argv);
    if (shard::Worker* w = shard::Worker::current()) w->finish(code);
    return code;
  } catch (const shard::Relaunch& r) {  // --cores: the planner chose several ranks
    return shard::launch(r.request, argc, argv, /*add_degree=*/true);
  } catch (const UsageError& e) {
    std::cerr << e.what() << "\n";
    if (shard::Worker* w = shard::Worker::current()) w->finish(2, e.what());
    return 2;
  } catch (const Error& e) {
    return failed(e.what());
  } catch (const std::bad_alloc&) {
    return failed("out of memory");
  } catch (const std::exception& e) {
    return failed(e.what());
  }
}
