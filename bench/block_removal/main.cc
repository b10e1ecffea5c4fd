// bench_block_removal: (1) solver time vs N (16, 32, 64, 128) at M = 25% and 50% for exact,
// annealing and tabu, with each solver's energy gap to the best known state; (2) with
// --parent DIR (repeatable, e.g. the demo parent and a >= 24-block variant), at M = 25% and
// 50%: CBO (best of k chosen by held-out loss), the ground state alone, CBO with the
// first-order term kept, staged CBO (2, 3 and M stages, gradients recomputed after each) and
// Block Influence, each by loss on a separate test set and exact-match accuracy on the 8 task
// suites, plus (when C(N, M) <= 256) the best of every M-subset. Prints a table and writes
// JSON (--json-out, default bench/out/block_removal.json). (3) --train-deep DIR [--depth D]
// [--steps S]: trains the deeper variant of the demo parent (its 8-block pattern cycled to D
// blocks, default 24) so (2) can run on it; tailor-train-parent only trains the 8-block demo
// parent. --quick (the test command's smoke mode): (1), then (3) for 2 steps at depth 8 into a
// temporary folder and (2) on that model with a few samples per set; no timing is asserted.
#include <unistd.h>

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "compression/blockremoval/gates.h"
#include "compression/blockremoval/qubo.h"
#include "compression/model/config.h"
#include "compression/tasks/training.h"
#include "bench/common/bench_report.h"
#include "nlohmann/json.hpp"

namespace br = tailor::blockremoval;

namespace {

// H = AᵀA/m for a Gaussian A with m = N + 4 rows (as in the unit tests).
br::Qubo RandomPsd(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  const int m = n + 4;
  at::Tensor a = torch::empty({m, n}, torch::kFloat64);
  auto acc = a.accessor<double, 2>();
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) acc[r][c] = g(rng);
  }
  return *br::FisherQubo(a);
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

nlohmann::json SolverBench() {
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-5s %-5s %-10s %12s %10s %14s\n", "N", "M", "solver", "seconds", "states",
              "gap_to_best");
  for (int n : {16, 32, 64, 128}) {
    for (int m : {n / 4, n / 2}) {
      const br::Qubo q = RandomPsd(n, 1000 + n);
      struct Run {
        std::string name;
        double seconds = 0, energy = 0;
        bool ok = false;
      };
      std::vector<Run> runs;
      for (auto make : {br::ExactSolver, br::AnnealingSolver, br::TabuSolver}) {
        auto solver = make();
        Run r{std::string(solver->name())};
        if (r.name == "exact" && br::Binomial(n, m) > br::kMaxExactStates) {
          runs.push_back(r);
          continue;
        }
        br::SolveOptions o;
        o.m = m;
        o.k = 8;
        const auto t0 = std::chrono::steady_clock::now();
        auto s = solver->Solve(q, o);
        r.seconds = Seconds(t0);
        r.ok = s.ok();
        if (s.ok()) r.energy = (*s)[0].energy;
        runs.push_back(r);
      }
      double best = INFINITY;
      for (const Run& r : runs) {
        if (r.ok) best = std::min(best, r.energy);
      }
      for (const Run& r : runs) {
        if (!r.ok) {
          std::printf("%-5d %-5d %-10s %12s %10.3g %14s\n", n, m, r.name.c_str(), "skipped",
                      br::Binomial(n, m), "-");
          continue;
        }
        std::printf("%-5d %-5d %-10s %12.4f %10.3g %14.3g\n", n, m, r.name.c_str(), r.seconds,
                    br::Binomial(n, m), r.energy - best);
        rows.push_back({{"n", n}, {"m", m}, {"solver", r.name}, {"seconds", r.seconds},
                        {"energy", r.energy}, {"gap_to_best", r.energy - best}});
      }
    }
  }
  return rows;
}

double Accuracy(tailor::model::HybridLM& m, int64_t per_task) {
  int64_t correct = 0, total = 0;
  for (const auto& suite : tailor::tasks::AllSuites()) {
    auto r = tailor::tasks::Evaluate(m, *suite, per_task, 77);
    if (!r.ok()) continue;
    correct += r->correct;
    total += r->total;
  }
  return total == 0 ? 0.0 : static_cast<double>(correct) / total;
}

// Samples per set and per task of the model part.
struct ModelSizes {
  int64_t calibration = 64;
  int k = 8;
  int64_t per_task = 16;
  int64_t held_out = 96;  // each of the choosing set and the test set
};

nlohmann::json ModelBench(const std::string& dir, const ModelSizes& sizes) {
  const int64_t calibration = sizes.calibration, per_task = sizes.per_task;
  const int k = sizes.k;
  nlohmann::json out = {{"parent", dir}};
  auto parent = tailor::model::LoadHybridLM(dir);
  if (!parent.ok()) {
    std::fprintf(stderr, "%s\n", parent.status().ToString().c_str());
    out["error"] = parent.status().ToString();
    return out;
  }
  const std::vector<int> layers = br::PresentLayers((*parent)->config());
  const auto cal = br::CalibrationSamples(1, calibration, tailor::tasks::Split::kTrain);
  // `held` chooses among candidates (as the campaign's evaluate_candidates does); the loss
  // reported for every method is measured on `test`, which no method saw, so choosing the
  // best of k on `held` earns no advantage in the table.
  const auto held = br::CalibrationSamples(2, sizes.held_out, tailor::tasks::Split::kEval);
  const auto test = br::CalibrationSamples(3, sizes.held_out, tailor::tasks::Split::kEval);
  auto a = br::GateGradients(*parent, cal, layers);
  auto q = br::FisherQubo(*a);
  // Variant: keep the first-order term the spec drops (second-order Taylor in the gates with
  // the Fisher for the Hessian): dL(x) ~ -gᵀx + ½ xᵀHx, with x binary folded into the
  // diagonal. On short-trained parents the mean gate gradient g is not near zero.
  br::Qubo q_linear = *q;
  const at::Tensor mean_grad = a->mean(0);
  for (int i = 0; i < q_linear.n; ++i) {
    for (int j = 0; j < q_linear.n; ++j) q_linear.h[i * q_linear.n + j] *= 0.5;
    q_linear.h[i * q_linear.n + i] -= mean_grad[i].item<double>();
  }
  auto bi = br::BlockInfluence(*parent, cal);
  std::vector<double> influence;
  for (int l : layers) influence.push_back(bi->sum[l] / bi->tokens);
  auto to_layers = [&](const std::vector<int>& vars) {
    std::vector<int> r;
    for (int v : vars) r.push_back(layers[v]);
    return r;
  };
  out["blocks"] = layers.size();
  out["parent_loss"] = *br::HeldOutLoss(*parent, test);
  out["parent_accuracy"] = Accuracy(*parent, per_task);
  std::printf("\n%s (%zu blocks): parent loss %.4f acc %.3f\n", dir.c_str(), layers.size(),
              out["parent_loss"].get<double>(), out["parent_accuracy"].get<double>());
  std::printf("%-4s %-20s %10s %10s %10s\n", "M", "method", "energy", "loss", "accuracy");
  for (int m : {static_cast<int>(layers.size()) / 4, static_cast<int>(layers.size()) / 2}) {
    br::SolveOptions o;
    o.m = m;
    o.k = k;
    // The k lowest states of `qubo`, and the index of the one with the lowest held-out loss.
    auto best_of_k = [&](const br::Qubo& qubo, std::vector<br::State>* states) {
      *states = *br::MakeSolver(br::SolverKind::kAuto, qubo, m)->Solve(qubo, o);
      size_t best = 0;
      std::vector<double> losses;
      for (const auto& s : *states) {
        auto model = br::WithoutBlocks(*parent, to_layers(s.removed));
        losses.push_back(*br::HeldOutLoss(*model, held));
        if (losses.back() < losses[best]) best = losses.size() - 1;
      }
      return best;
    };
    std::vector<br::State> states, linear_states;
    const size_t best = best_of_k(*q, &states);
    const size_t linear_best = best_of_k(q_linear, &linear_states);
    // Variant: staged. The quadratic model is a local (Taylor) one around the gates at 1, so
    // remove M in `stages` steps: at each, best of k on the current model, then recompute the
    // gate gradients on the smaller model before choosing the next blocks.
    auto staged = [&](int stages) {
      std::vector<int> removed;  // layer indices
      for (int stage = 0; stage < stages; ++stage) {
        const int step = (m - static_cast<int>(removed.size())) / (stages - stage);
        if (step == 0) continue;
        auto current = br::WithoutBlocks(*parent, removed);
        const std::vector<int> present = br::PresentLayers((*current)->config());
        auto qs = br::FisherQubo(*br::GateGradients(*current, cal, present));
        br::SolveOptions os = o;
        os.m = step;
        const auto cands = *br::MakeSolver(br::SolverKind::kAuto, *qs, step)->Solve(*qs, os);
        double best_loss = 1e300;
        std::vector<int> best_removed;
        for (const auto& st : cands) {
          std::vector<int> all = removed;
          for (int v : st.removed) all.push_back(present[v]);
          auto model = br::WithoutBlocks(*parent, all);
          const double loss = *br::HeldOutLoss(*model, held);
          if (loss < best_loss) best_loss = loss, best_removed = all;
        }
        removed = best_removed;
      }
      std::vector<int> vars;
      for (int l : removed) {
        vars.push_back(
            static_cast<int>(std::find(layers.begin(), layers.end(), l) - layers.begin()));
      }
      std::sort(vars.begin(), vars.end());
      return vars;
    };
    const std::vector<int> bi_vars = br::LowestInfluence(influence, m);
    struct Entry {
      const char* method;
      std::vector<int> vars;
    };
    std::vector<Entry> entries = {Entry{"cbo_best_of_k", states[best].removed},
                                  Entry{"ground_state", states[0].removed},
                                  Entry{"cbo_linear_best_of_k", linear_states[linear_best].removed},
                                  Entry{"cbo_2_stages", staged(2)},
                                  Entry{"cbo_3_stages", staged(3)},
                                  Entry{"cbo_m_stages", staged(m)},
                                  Entry{"block_influence", bi_vars}};
    // Where every M-subset can be evaluated, the best removal by the `held` loss: how far each
    // method is from what any selector choosing on that set could reach.
    if (br::Binomial(static_cast<int>(layers.size()), m) <= 256) {
      br::SolveOptions all = o;
      all.k = 256;
      const auto every = *br::ExactSolver()->Solve(*q, all);
      std::vector<int> oracle;
      double oracle_loss = 1e300;
      for (const auto& s : every) {
        auto model = br::WithoutBlocks(*parent, to_layers(s.removed));
        const double loss = *br::HeldOutLoss(*model, held);
        if (loss < oracle_loss) {
          oracle_loss = loss;
          oracle = s.removed;
        }
      }
      entries.push_back(Entry{"oracle_by_eval", oracle});
    }
    for (const Entry& e : entries) {
      auto model = br::WithoutBlocks(*parent, to_layers(e.vars));
      const double loss = *br::HeldOutLoss(*model, test);
      const double acc = Accuracy(*model, per_task);
      const double energy = br::Energy(*q, e.vars);
      std::printf("%-4d %-20s %10.4g %10.4f %10.3f\n", m, e.method, energy, loss, acc);
      out["rows"].push_back({{"m", m}, {"method", e.method}, {"removed_layers", to_layers(e.vars)},
                             {"energy", energy}, {"loss", loss}, {"accuracy", acc},
                             {"chosen_level", e.method == std::string("cbo_best_of_k")
                                                  ? static_cast<int>(best)
                                                  : e.method == std::string("cbo_linear_best_of_k")
                                                        ? static_cast<int>(linear_best)
                                                        : 0}});
    }
  }
  return out;
}

// The demo parent's block pattern cycled to `depth` blocks, trained like the demo parent but
// with a short schedule (the bench needs a trained deep model, not the best one).
int TrainDeep(const std::string& out, int depth, int64_t steps, int64_t batch_size = 32) {
  tailor::model::HybridConfig config = tailor::tasks::DefaultParentConfig();
  const auto pattern = config.layers;
  config.layers.clear();
  for (int i = 0; i < depth; ++i) config.layers.push_back(pattern[i % pattern.size()]);
  auto created = tailor::model::CreateHybridLM(config, 1);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    return 1;
  }
  tailor::model::HybridLM model = *created;
  auto suites = tailor::tasks::AllSuites();
  std::vector<const tailor::tasks::TaskSuite*> views;
  for (const auto& s : suites) views.push_back(s.get());
  tailor::tasks::TrainOptions o;
  o.steps = steps;
  o.batch_size = batch_size;
  o.warmup_steps = std::min<int64_t>(100, steps / 10);
  o.threads = 1;
  o.log_every = 50;
  o.on_progress = [](const tailor::tasks::TrainProgress& p) {
    std::fprintf(stderr, "step %6lld  loss %.4f  %.1fs\n", static_cast<long long>(p.step), p.loss,
                 p.seconds);
  };
  auto trained = tailor::tasks::TrainOnTasks(model, views, o);
  if (!trained.ok()) {
    std::fprintf(stderr, "%s\n", trained.status().ToString().c_str());
    return 1;
  }
  auto saved = tailor::model::SaveHybridLM(model, out);
  if (!saved.ok()) {
    std::fprintf(stderr, "%s\n", saved.ToString().c_str());
    return 1;
  }
  const nlohmann::json report = {{"depth", depth},          {"steps", trained->steps},
                                 {"batch_size", o.batch_size}, {"train_seconds", trained->seconds},
                                 {"final_loss", trained->final_loss}};
  std::ofstream(out + "/train_report.json") << report.dump(2) << "\n";
  std::printf("%s: %d blocks, %lld steps, loss %.4f, %.0fs\n", out.c_str(), depth,
              static_cast<long long>(trained->steps), trained->final_loss, trained->seconds);
  return 0;
}

}  // namespace

constexpr char kUsage[] =
    "usage: bench_block_removal [--parent DIR]... [--json-out PATH] [--calibration N]\n"
    "                           [--candidates K] [--task-samples N] [--held-out N]\n"
    "                           [--skip-solvers] [--quick]\n"
    "       bench_block_removal --train-deep DIR [--depth D] [--steps S]\n"
    "  --parent DIR       a model folder for the model part (repeatable; none: solvers only)\n"
    "  --json-out PATH    JSON report (default bench/out/block_removal.json; --json is the same)\n"
    "  --calibration N    calibration samples for H (default 64)\n"
    "  --candidates K     k lowest states, best chosen by held-out loss (default 8)\n"
    "  --task-samples N   eval samples per task suite for accuracy (default 16)\n"
    "  --held-out N       samples in the choosing set and in the test set (default 96)\n"
    "  --skip-solvers     no solver-time table\n"
    "  --quick            smoke mode (the test command's bench_block_removal_quick): solver\n"
    "                     table, then a depth-8 parent trained for 2 steps in a temporary\n"
    "                     folder (without --parent) and the model part on it with 8\n"
    "                     calibration, 2 candidates, 2 task samples, 16 held-out\n"
    "  --train-deep DIR   train the demo parent's pattern cycled to --depth blocks (default\n"
    "                     24) for --steps steps (default 400) into DIR, and nothing else\n"
    "  --help             this text\n";

int main(int argc, char** argv) {
  std::vector<std::string> parents;
  std::string json_path = "bench/out/block_removal.json", deep_out;
  int depth = 24;
  int64_t deep_steps = 400;
  ModelSizes sizes;
  bool skip_solvers = false;
  bool quick = false;
  // --quick changes the defaults, so flags given beside it still apply wherever they stand.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") {
      quick = true;
      sizes = ModelSizes{.calibration = 8, .k = 2, .per_task = 2, .held_out = 16};
    }
  }
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
    if (a == "--quick") continue;
    if (a == "--skip-solvers") {
      skip_solvers = true;
      continue;
    }
    const bool known = a == "--parent" || a == "--json" || a == "--json-out" ||
                       a == "--calibration" || a == "--candidates" || a == "--task-samples" ||
                       a == "--held-out" || a == "--train-deep" || a == "--depth" || a == "--steps";
    if (!known || i + 1 >= argc) {
      std::fprintf(stderr, "bench_block_removal: %s '%s'\n%s",
                   known ? "missing value for" : "unknown option", a.c_str(), kUsage);
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--parent") parents.push_back(v);
    else if (a == "--json" || a == "--json-out") json_path = v;
    else if (a == "--calibration") sizes.calibration = std::stoll(v);
    else if (a == "--candidates") sizes.k = std::stoi(v);
    else if (a == "--task-samples") sizes.per_task = std::stoll(v);
    else if (a == "--held-out") sizes.held_out = std::stoll(v);
    else if (a == "--train-deep") deep_out = v;
    else if (a == "--depth") depth = std::stoi(v);
    else if (a == "--steps") deep_steps = std::stoll(v);
  }
  if (!deep_out.empty()) return TrainDeep(deep_out, depth, deep_steps);
  torch::set_num_threads(2);
  nlohmann::json out;
  if (!skip_solvers) out["solvers"] = SolverBench();
  // --quick without --parent: the model part on a parent of the demo's 8-block pattern,
  // trained for 2 steps (what tailor-train-parent --steps 2 gives the e2e tests).
  std::string quick_dir;
  if (quick && parents.empty()) {
    quick_dir = (std::filesystem::temp_directory_path() /
                 ("tailor-bench-block-removal-" + std::to_string(getpid())))
                    .string();
    std::printf("\n");
    if (TrainDeep(quick_dir, 8, 2, 8) != 0) return 1;
    parents.push_back(quick_dir);
  }
  bool failed = false;
  for (const std::string& p : parents) {
    nlohmann::json m = ModelBench(p, sizes);
    failed = failed || m.contains("error");
    out["models"].push_back(m);
  }
  if (!quick_dir.empty()) std::filesystem::remove_all(quick_dir);
  if (!tailor::bench::WriteJson(out, json_path, "bench_block_removal")) return 1;
  std::printf("\nJSON: %s\n", json_path.c_str());
  return failed ? 1 : 0;
}
