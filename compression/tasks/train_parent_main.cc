// tailor-train-parent: trains the quickstart's hybrid parent on the eight synthetic task
// suites and writes DIR/config.json, DIR/model.safetensors and DIR/train_report.json. With
// --data it trains a language model of that shape on a JSONL dataset of token ids instead
// (docs/data.md; the vocabulary is --vocab, documents read as the jobs read a tailor-format
// parent's data: <bos> 1, <eos> 2, packed into --sequence-tokens rows, seeded epochs);
// --tokenizer puts the tokenizer of those ids in the parent's folder, so contracts can name
// text datasets for it. --debian-corpus writes the offline demo's corpus first (compression/
// data/debian_corpus.h: text, a BPE of --vocab tokens, ids) and trains on it.
// --layout nemotron-h trains a Nemotron-H hybrid (Mamba-2, attention without RoPE and
// squared-ReLU MLP layers, pattern M*-M-*M-) of the demo's width instead and writes it as a
// NemotronHForCausalLM checkpoint (hf_export_nemotron_h.h): a parent llama.cpp serves, which
// the quickstart's main contract compresses for llama.cpp.
//
//   tailor-train-parent --out DIR [--steps N] [--seed S] [--threads T] [--batch B]
//                       [--lr LR] [--eval-samples N] [--layout tailor|nemotron-h]
//                       [--data FILE.jsonl --vocab V [--sequence-tokens L]
//                        [--tokenizer tokenizer.json]]
//                       [--debian-corpus CORPUS_DIR [--vocab V] [--sequence-tokens L]]
// Exit codes: 0 ok, 1 failed, 2 usage.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "compression/data/debian_corpus.h"
#include "compression/data/parent_vocabulary.h"
#include "compression/data/text_dataset.h"
#include "compression/hf/hf_config.h"
#include "compression/hf/hf_export_nemotron_h.h"
#include "compression/hf/hf_import_nemotron_h.h"
#include "compression/model/config.h"
#include "compression/model/hybrid_lm.h"
#include "compression/tasks/suites.h"
#include "compression/tasks/tokenizer.h"
#include "compression/tasks/training.h"
#include "compression/tokenizer/byte_level_bpe.h"
#include "nlohmann/json.hpp"

namespace tailor::tasks {
namespace {

struct Flags {
  std::string out;
  int64_t steps = 1000;
  uint64_t seed = 1;
  // One intra-op thread by default: the model's matrices are small, so a second thread
  // gains little on an idle machine, and OpenMP barriers make it several times slower as
  // soon as anything else competes for the cores.
  int threads = 1;
  int64_t batch = 64;
  double lr = 2e-3;
  int64_t eval_samples = 200;
  std::string data;            // JSONL of input_ids; empty: the task suites
  int64_t vocab = 0;           // with --data
  int64_t sequence_tokens = 64;
  std::string tokenizer;      // copied into --out as tokenizer.json
  std::string debian_corpus;  // written first; then data and tokenizer are read from it
  std::string layout = "tailor";  // or "nemotron-h"
};

// The demo corpus's vocabulary when --debian-corpus has no --vocab.
constexpr int64_t kDebianCorpusVocab = 512;

constexpr char kUsage[] =
    "usage: tailor-train-parent --out DIR [--steps N] [--seed S] [--threads T] [--batch B]\n"
    "                           [--lr LR] [--eval-samples N] [--layout tailor|nemotron-h]\n"
    "                           [--data FILE.jsonl --vocab V [--sequence-tokens L]\n"
    "                            [--tokenizer tokenizer.json]]\n"
    "                           [--debian-corpus CORPUS_DIR [--vocab V] [--sequence-tokens L]]\n";

bool ParseFlags(int argc, char** argv, Flags& f, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      error = "";
      return false;
    }
    if (i + 1 >= argc) {
      error = absl::StrCat("missing value for ", arg);
      return false;
    }
    const std::string v = argv[++i];
    bool ok = true;
    if (arg == "--out") {
      f.out = v;
    } else if (arg == "--steps") {
      ok = absl::SimpleAtoi(v, &f.steps) && f.steps >= 0;
    } else if (arg == "--seed") {
      ok = absl::SimpleAtoi(v, &f.seed);
    } else if (arg == "--threads") {
      ok = absl::SimpleAtoi(v, &f.threads) && f.threads >= 1;
    } else if (arg == "--batch") {
      ok = absl::SimpleAtoi(v, &f.batch) && f.batch >= 1;
    } else if (arg == "--lr") {
      ok = absl::SimpleAtod(v, &f.lr) && f.lr > 0;
    } else if (arg == "--eval-samples") {
      ok = absl::SimpleAtoi(v, &f.eval_samples) && f.eval_samples >= 1;
    } else if (arg == "--data") {
      f.data = v;
    } else if (arg == "--vocab") {
      ok = absl::SimpleAtoi(v, &f.vocab) && f.vocab >= 3;
    } else if (arg == "--tokenizer") {
      f.tokenizer = v;
    } else if (arg == "--debian-corpus") {
      f.debian_corpus = v;
    } else if (arg == "--layout") {
      f.layout = v;
      ok = v == "tailor" || v == "nemotron-h";
    } else if (arg == "--sequence-tokens") {
      ok = absl::SimpleAtoi(v, &f.sequence_tokens) && f.sequence_tokens >= 2;
    } else {
      error = absl::StrCat("unknown flag ", arg);
      return false;
    }
    if (!ok) {
      error = absl::StrCat("bad value for ", arg, ": ", v);
      return false;
    }
  }
  if (f.out.empty()) {
    error = "--out is required";
    return false;
  }
  if (!f.debian_corpus.empty()) {
    if (!f.data.empty() || !f.tokenizer.empty()) {
      error = "--debian-corpus brings its own --data and --tokenizer";
      return false;
    }
    if (f.vocab == 0) f.vocab = kDebianCorpusVocab;
    f.data = f.debian_corpus + "/train_ids.jsonl";
    f.tokenizer = f.debian_corpus + "/tokenizer.json";
    return true;
  }
  if (f.data.empty() != (f.vocab == 0)) {
    error = "--data and --vocab go together";
    return false;
  }
  if (!f.tokenizer.empty() && f.data.empty()) {
    error = "--tokenizer goes with --data";
    return false;
  }
  return true;
}

// Language-modelling batches of `f.data`: full rows of f.sequence_tokens, each a sample whose
// every token after the first is learnt; a new seeded epoch when the data runs out.
SampleSource DataBatches(const Flags& f, const model::HybridConfig& config) {
  struct State {
    std::unique_ptr<data::TextDatasetReader> reader;
    int64_t epoch = -1;
  };
  auto state = std::make_shared<State>();
  return [&f, config, state]() -> absl::StatusOr<std::vector<Sample>> {
    std::vector<Sample> batch;
    int64_t empty_epochs = 0;
    while (static_cast<int64_t>(batch.size()) < f.batch) {
      if (state->reader == nullptr) {
        if (++empty_epochs > 2) {
          return absl::InvalidArgumentError(absl::StrCat(
              f.data, ": no sequence of ", f.sequence_tokens, " tokens to train on"));
        }
        data::TextDatasetOptions o =
            data::TailorParentVocabulary(config.vocab, config.max_seq).Options(f.sequence_tokens);
        o.shuffle_window = 256;
        o.seed = f.seed + static_cast<uint64_t>(++state->epoch);
        absl::StatusOr<std::unique_ptr<data::TextDatasetReader>> r =
            data::TextDatasetReader::Open(f.data, o, nullptr);
        if (!r.ok()) return r.status();
        state->reader = *std::move(r);
      }
      absl::StatusOr<std::optional<data::TokenSequence>> s = state->reader->Next();
      if (!s.ok()) return s.status();
      if (!s->has_value()) {
        state->reader.reset();
        continue;
      }
      if (static_cast<int64_t>((*s)->tokens.size()) != f.sequence_tokens) continue;
      empty_epochs = 0;
      Sample sample;
      sample.tokens.assign((*s)->tokens.begin(), (*s)->tokens.end());
      sample.answer_begin = 1;
      batch.push_back(std::move(sample));
    }
    return batch;
  };
}

// The demo's Nemotron-H parent: the width of DefaultParentConfig (hidden 128, 4 query and 2 KV
// heads of 32, Mamba 4 heads of 32 with a 16-wide state, MLP 256) over eight layers of the
// three kinds `nemotron_h` serves with per-layer widths. No RoPE: position comes from the
// Mamba layers, so max_position_embeddings is only the context the engines allocate.
nlohmann::json DemoNemotronHConfig(int64_t vocab) {
  return {{"architectures", {"NemotronHForCausalLM"}},
          {"model_type", "nemotron_h"},
          {"vocab_size", vocab},
          {"hidden_size", 128},
          {"hybrid_override_pattern", "M*-M-*M-"},
          {"num_hidden_layers", 8},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 32},
          {"attention_bias", false},
          {"intermediate_size", 256},
          {"mlp_hidden_act", "relu2"},
          {"mamba_num_heads", 4},
          {"mamba_head_dim", 32},
          {"ssm_state_size", 16},
          {"n_groups", 2},
          {"conv_kernel", 4},
          {"expand", 1},
          {"chunk_size", 16},
          {"use_conv_bias", true},
          {"mamba_hidden_act", "silu"},
          {"layer_norm_epsilon", 1e-5},
          {"max_position_embeddings", 256},
          {"tie_word_embeddings", false},
          {"bos_token_id", tasks::kBos},
          {"eos_token_id", tasks::kEos},
          {"pad_token_id", tasks::kPad}};
}

// The parent's internal config; for --layout nemotron-h also the config.json it is written
// with (`hf_config`).
absl::StatusOr<model::HybridConfig> ParentConfig(const Flags& f, nlohmann::json& hf_config) {
  const int64_t vocab = f.data.empty() ? kVocabSize : f.vocab;
  if (f.layout == "tailor") {
    model::HybridConfig config = DefaultParentConfig();
    config.vocab = vocab;
    return config;
  }
  hf_config = DemoNemotronHConfig(vocab);
  absl::StatusOr<hf::HfConfig> hf = hf::ParseHfConfigJson(hf_config.dump(), "config.json", "");
  if (!hf.ok()) return hf.status();
  return hf::NemotronHHybridConfig(*hf);
}

// Writes the trained parent in its layout, with the tokenizer of its ids when there is one.
absl::Status SaveParent(const Flags& f, const model::HybridLM& model,
                        const nlohmann::json& hf_config, const std::string& tokenizer_json) {
  absl::Status saved = f.layout == "tailor"
                           ? model::SaveHybridLM(model, f.out)
                           : hf::WriteNemotronHCheckpoint(model, hf_config, f.out);
  if (saved.ok() && !tokenizer_json.empty()) {
    saved = model::WriteFileAtomically(f.out + "/tokenizer.json", tokenizer_json);
  }
  return saved;
}

// The tokenizer of the training ids, checked (it loads, its ids fit --vocab) before any
// training; its bytes are what the parent's folder gets.
absl::StatusOr<std::string> ReadTokenizer(const Flags& f) {
  absl::StatusOr<std::string> bytes = model::ReadFileToString(f.tokenizer);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<tokenizer::ByteLevelBpe>> bpe =
      tokenizer::ByteLevelBpe::FromJson(*bytes, f.tokenizer);
  if (!bpe.ok()) return bpe.status();
  if ((*bpe)->vocab_size() > f.vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.tokenizer, " has ", (*bpe)->vocab_size(), " tokens; --vocab is ", f.vocab));
  }
  return bytes;
}

int Run(const Flags& f) {
  if (!f.debian_corpus.empty()) {
    data::TokenizedCorpusOptions o;
    o.vocab_size = f.vocab;
    absl::StatusOr<data::DebianCorpus> corpus =
        data::WriteTokenizedDebianCorpus(f.debian_corpus, o);
    if (!corpus.ok()) {
      std::fprintf(stderr, "error: the Debian corpus: %s\n", corpus.status().ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "corpus: %zu training and %zu held-out paragraphs, %zu prompts in %s\n",
                 corpus->train.size(), corpus->eval.size(), corpus->prompts.size(),
                 f.debian_corpus.c_str());
  }
  std::string tokenizer_json;
  if (!f.tokenizer.empty()) {
    absl::StatusOr<std::string> t = ReadTokenizer(f);
    if (!t.ok()) {
      std::fprintf(stderr, "error: --tokenizer: %s\n", t.status().ToString().c_str());
      return 1;
    }
    tokenizer_json = *std::move(t);
  }
  nlohmann::json hf_config;
  absl::StatusOr<model::HybridConfig> parent_config = ParentConfig(f, hf_config);
  if (!parent_config.ok()) {
    std::fprintf(stderr, "error: %s\n", parent_config.status().ToString().c_str());
    return 1;
  }
  const model::HybridConfig& config = *parent_config;
  absl::StatusOr<model::HybridLM> created = model::CreateHybridLM(config, f.seed);
  if (!created.ok()) {
    std::fprintf(stderr, "error: %s\n", created.status().ToString().c_str());
    return 1;
  }
  model::HybridLM model = *created;
  std::vector<std::unique_ptr<TaskSuite>> suites = AllSuites();
  std::vector<const TaskSuite*> views;
  for (const auto& s : suites) views.push_back(s.get());
  std::fprintf(stderr, "parent: %lld parameters (%lld active), %lld layers, training %lld steps\n",
               static_cast<long long>(config.ParameterCount()),
               static_cast<long long>(config.ActiveParameterCount()),
               static_cast<long long>(config.num_layers()), static_cast<long long>(f.steps));
  TrainOptions options;
  options.steps = f.steps;
  options.batch_size = f.batch;
  options.lr = f.lr;
  options.seed = f.seed;
  options.threads = f.threads;
  options.on_progress = [](const TrainProgress& p) {
    std::fprintf(stderr, "step %6lld  loss %.4f  lr %.2e  %.1fs\n", static_cast<long long>(p.step),
                 p.loss, p.lr, p.seconds);
  };
  absl::StatusOr<TrainResult> trained =
      f.data.empty() ? TrainOnTasks(model, views, options)
                     : TrainOnSamples(model, DataBatches(f, config), options);
  if (!trained.ok()) {
    std::fprintf(stderr, "error: %s\n", trained.status().ToString().c_str());
    return 1;
  }
  nlohmann::json tasks = nlohmann::json::object();
  double sum = 0;
  if (!f.data.empty()) views.clear();  // a language model of other text: no task evaluation
  for (const TaskSuite* s : views) {
    // Evaluation seed differs from the training seed; the split keeps the sets disjoint.
    absl::StatusOr<EvalResult> r = Evaluate(model, *s, f.eval_samples, f.seed + 1000 + s->id());
    if (!r.ok()) {
      std::fprintf(stderr, "error: %s\n", r.status().ToString().c_str());
      return 1;
    }
    tasks[r->task] = {{"accuracy", r->accuracy()}, {"correct", r->correct}, {"total", r->total}};
    sum += r->accuracy();
    std::fprintf(stderr, "eval %-9s %.3f (%lld/%lld)\n", r->task.c_str(), r->accuracy(),
                 static_cast<long long>(r->correct), static_cast<long long>(r->total));
  }
  const double mean = views.empty() ? 0.0 : sum / views.size();
  std::fprintf(stderr, "mean exact-match accuracy %.3f, training %.1fs\n", mean, trained->seconds);
  absl::Status saved = SaveParent(f, model, hf_config, tokenizer_json);
  if (!saved.ok()) {
    std::fprintf(stderr, "error: %s\n", saved.ToString().c_str());
    return 1;
  }
  nlohmann::json report = {
      {"steps", trained->steps},
      {"seed", f.seed},
      {"threads", f.threads},
      {"batch_size", f.batch},
      {"learning_rate", f.lr},
      {"train_seconds", trained->seconds},
      {"final_loss", trained->final_loss},
      {"parameters", config.ParameterCount()},
      {"active_parameters", config.ActiveParameterCount()},
      {"eval_samples_per_task", f.eval_samples},
      {"tasks", tasks},
      {"mean_accuracy", mean},
      {"data", f.data},
      {"vocab", config.vocab},
      {"layout", f.layout},
  };
  saved = model::WriteFileAtomically(f.out + "/train_report.json", report.dump(2) + "\n");
  if (!saved.ok()) {
    std::fprintf(stderr, "error: %s\n", saved.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", f.out.c_str());
  return 0;
}

}  // namespace
}  // namespace tailor::tasks

int main(int argc, char** argv) {
  tailor::tasks::Flags flags;
  std::string error;
  if (!tailor::tasks::ParseFlags(argc, argv, flags, error)) {
    if (!error.empty()) std::fprintf(stderr, "error: %s\n", error.c_str());
    std::fprintf(stderr, "%s", tailor::tasks::kUsage);
    return error.empty() ? 0 : 2;
  }
  return tailor::tasks::Run(flags);
}
