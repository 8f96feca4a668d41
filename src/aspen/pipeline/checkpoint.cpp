#include "aspen/pipeline/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "aspen/io/model_dir.h"
#include "aspen/io/safetensors.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/pipeline/checkpoint_manifest.h"
#include "aspen/pipeline/checkpoint_shards.h"
#include "aspen/pipeline/checkpoint_state.h"
#include "aspen/pipeline/stage_gather.h"
#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "aspen/util/log.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "iter_";
// The sharded states of a tensor-parallel run (pipeline/checkpoint_shards.h).
constexpr const char* kShardedOptimizer = "actor_optimizer";
constexpr const char* kShardedReference = "reference";

fs::path checkpoints_root(const std::string& run_dir) {
  return fs::path(run_dir) / "checkpoints";
}

std::string iteration_name(int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof(name), "%s%06lld", kPrefix, static_cast<long long>(iteration));
  return name;
}

// N of a complete checkpoint's name "iter_NNNNNN" (zero-padded, at least 6 digits);
// nothing for any other name.
std::optional<int64_t> iteration_of_name(const std::string& name) {
  const std::string digits = name.rfind(kPrefix, 0) == 0
                                 ? name.substr(std::char_traits<char>::length(kPrefix))
                                 : std::string();
  if (digits.size() < 6 || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::stoll(digits);
}

// Complete checkpoints (no .tmp suffix), oldest first.
std::vector<fs::path> list_checkpoints(const std::string& run_dir) {
  std::vector<fs::path> found;
  const fs::path root = checkpoints_root(run_dir);
  if (!fs::is_directory(root)) return found;
  for (const auto& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind(kPrefix, 0) != 0 ||
        name.find('.') != std::string::npos) {
      continue;
    }
    if (fs::exists(entry.path() / "state.json")) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());  // zero-padded names sort by iteration
  return found;
}

std::vector<std::pair<std::string, torch::Tensor>> module_tensors(const torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    tensors.emplace_back(item.key(), item.value().detach());
  }
  return tensors;
}

// Fault injection for tests: ASPEN_FAULT_CHECKPOINT_DELAY_MS=M pauses M ms in the
// middle of every checkpoint write (policy written, optimizer state not yet), so a
// test's SIGKILL can land there.
void checkpoint_fault_delay() {
  static const int64_t delay_ms = [] {
    const char* value = std::getenv("ASPEN_FAULT_CHECKPOINT_DELAY_MS");
    return value != nullptr ? std::max<int64_t>(0, std::atoll(value)) : int64_t{0};
  }();
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
}

// "PREFIX-RRRRR-of-PPPPP.safetensors": share R of P of an optimizer state, PREFIX
// "actor_optimizer" (EP rank or pipeline stage R) or "critic_optimizer" (stage R).
std::string share_file(const std::string& prefix, int rank, int size) {
  char name[64];
  std::snprintf(name, sizeof(name), "-%05d-of-%05d.safetensors", rank, size);
  return prefix + name;
}
std::string actor_optimizer_file(int rank, int size) {
  return share_file("actor_optimizer", rank, size);
}

// An optimizer state from every share of a checkpoint, by name; aspen::Error naming
// the checkpoint when a share is missing or two shares disagree on their count; empty
// when `optional` and there is no share.
std::map<std::string, torch::Tensor> load_optimizer_shares(const fs::path& root,
                                                           const std::string& prefix,
                                                           bool optional = false) {
  std::map<int, fs::path> shares;
  int size = -1;
  for (const auto& entry : fs::directory_iterator(root)) {
    int r = 0, p = 0;
    char tail[32] = {0};
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), (prefix + "-%5d-of-%5d%31s").c_str(), &r, &p, tail) != 3 ||
        std::string(tail) != ".safetensors" || name != share_file(prefix, r, p)) {
      continue;
    }
    check_input(size == -1 || size == p,
                "holds actor optimizer shares of " + std::to_string(size) + " and of " +
                    std::to_string(p) + " ranks",
                root.string());
    size = p;
    shares[r] = entry.path();
  }
  if (optional && size == -1) return {};
  check_input(size > 0, "has no optimizer state (" + prefix + "-*.safetensors)", root.string());
  std::map<std::string, torch::Tensor> state;
  for (int r = 0; r < size; ++r) {
    check_input(shares.count(r) == 1, "lacks " + share_file(prefix, r, size), root.string(),
                "an expert-parallel checkpoint has one optimizer file per EP rank, a "
                "pipeline-parallel one per stage");
    for (auto& [name, tensor] : load_safetensors(shares.at(r).string())) {
      // The step counter is in every share; a parameter's state in exactly one.
      check_input(state.emplace(name, tensor).second || name == "optimizer.step_count",
                  "holds the state of " + name + " twice", root.string());
    }
  }
  return state;
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, int64_t iteration, const RlSetup& setup,
                            RlWorkers& workers, const nlohmann::json& schedule_state,
                            int64_t keep_last, const ExpertParallel& experts) {
  const fs::path final_dir = checkpoints_root(run_dir) / iteration_name(iteration);
  const fs::path tmp = final_dir.string() + ".tmp";
  // The ranks that write: the actor's first TP group under tensor parallelism (which
  // is its EP group too when train.ep = train.tp), else the first EP group. Their rank
  // 0 is the run's rank 0: it owns the directory and writes all that is not sharded.
  // Under pipeline parallelism the first replica's stages, stage 0 the run's rank 0;
  // with EP too (PP x EP) the stages of the first EP group's replicas.
  const QwenForCausalLM& actor = workers.actor->model();
  const TensorParallel& tp = actor->tp;
  const PipelineStages& pp = actor->pp;
  const bool sharded = tp.enabled();
  const bool staged = pp.enabled();
  // PP x TP: the first replica's every stage and TP rank; stage 0's TP rank 0 leads.
  // PP x EP: stage 0's EP rank 0 leads.
  const bool leader = sharded ? tp.rank == 0 && pp.stage == 0
                              : (staged ? pp.stage : 0) == 0 && experts.rank == 0;
  // A stage's ranks: its TP group, or its EP group (EP alone: the one group).
  std::optional<ProcessGroupHandle> group =
      sharded ? tp.group : experts.enabled() ? experts.group : pp.group;
  // Under PP x TP and PP x EP no one group spans the writers: a barrier over the
  // pipeline group (a TP or EP index's stages) and one over `group` (a stage's ranks),
  // in the order that orders every writer after the leader (sync_ranks) or the leader
  // after every writer (sync_ranks with `after_writes`).
  const auto sync_ranks = [&](bool after_writes) {
    if (staged && (sharded || experts.enabled())) {
      ProcessGroupHandle stages = *pp.group;
      if (after_writes) group->barrier();
      stages.barrier();
      if (!after_writes) group->barrier();
    } else if (group) {
      group->barrier();
    }
  };
  if (leader) {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    // setup.model holds the whole policy on every layout (under TP, EP and PP the run
    // driver has the trainers gather it before a checkpoint: rl_run.cpp), so the
    // policy is one HF directory that loads at any layout.
    export_policy(setup, (tmp / "policy").string());
    checkpoint_fault_delay();
  }
  // Under LoRA the reference is the policy's base, saved with the policy.
  const bool reference = workers.reference && workers.reference->holds_copy();
  if (reference && !sharded) {
    // Collective under EP: the reference's experts are spread like the actor's; under
    // PP its layers like the actor's stages (frozen: gathered only here); PP x EP both.
    std::vector<std::pair<std::string, torch::Tensor>> whole;
    if (staged) {
      for (auto& item : gather_pipeline_stages(workers.reference->model())) whole.push_back(item);
    } else if (experts.enabled()) {
      whole = gather_expert_parallel_state(workers.reference->model());
    } else {
      whole = workers.reference->model()->hf_state();
    }
    if (leader) write_safetensors((tmp / "reference.safetensors").string(), whole);
  }
  sync_ranks(false);  // the directory exists
  if (sharded) {
    // Each TP rank its own shards (and experts): nothing is gathered. Stages write a
    // directory each, their own layers (the tied embedding once).
    const auto state_dir = [&](const char* name) {
      const std::string dir = (tmp / name).string();
      return staged ? stage_shards_dir(dir, pp.stage, pp.size) : dir;
    };
    std::function<bool(const std::string&)> mine;
    if (staged) mine = [actor](const std::string& name) { return stage_writes(actor, name); };
    if (reference) {
      const QwenForCausalLM& frozen = workers.reference->model();
      std::vector<std::pair<std::string, torch::Tensor>> held;
      for (auto& item : frozen->hf_state()) {
        if (!mine || mine(item.first)) held.push_back(item);
      }
      write_rank_shards(state_dir(kShardedReference), held, parameter_holding(frozen), tp.rank,
                        tp.size);
    }
    write_rank_shards(state_dir(kShardedOptimizer), workers.actor->optimizer().checkpoint_state(mine),
                      optimizer_state_holding(actor), tp.rank, tp.size);
  } else {
    // EP rank 0: everything it holds, another EP rank its experts; stage s of P its
    // stage's parameters (the tied embedding once, from the first stage), as share s.
    // PP x EP: both - EP rank e of stage s of P writes share s * ep + e of P * ep, its
    // stage's parameters (EP rank 0) or its stage's experts (the others). The names are
    // global (an expert's its index over all EP ranks), so a reader of any layout takes
    // what it holds from the union of the shares.
    const bool others_experts = experts.enabled() && experts.rank > 0;
    std::function<bool(const std::string&)> mine;
    if (staged) {
      mine = [actor, others_experts](const std::string& name) {
        return stage_writes(actor, name) && (!others_experts || is_expert_parameter(name));
      };
    } else if (!leader) {
      mine = is_expert_parameter;
    }
    const int share = (staged ? pp.stage : 0) * experts.size + experts.rank;
    write_safetensors((tmp / actor_optimizer_file(share, (staged ? pp.size : 1) * experts.size))
                          .string(),
                      workers.actor->optimizer().checkpoint_state(mine));
  }
  // A critic on stages (ppo under PP): its layers gathered to the leader, its
  // optimizer state a share per stage, the embedding's from the first stage only (a
  // tied model's last critic stage may hold an unused copy).
  std::vector<std::pair<std::string, torch::Tensor>> critic;
  if (workers.critic && staged) {
    for (auto& item : gather_stage_tensors(pp, module_tensors(*workers.critic->model())))
      critic.push_back(item);
    write_safetensors((tmp / share_file("critic_optimizer", pp.stage, pp.size)).string(),
                      workers.critic->optimizer().checkpoint_state(
                          [actor](const std::string& name) { return stage_writes(actor, name); }));
  } else if (workers.critic) {
    critic = module_tensors(*workers.critic->model());
  }
  sync_ranks(true);  // every share is written
  if (!leader) return final_dir.string();
  if (workers.critic) {
    write_safetensors((tmp / "critic.safetensors").string(), critic);
    if (!staged) workers.critic->optimizer().save((tmp / "critic_optimizer.safetensors").string());
  }
  const nlohmann::json state = {{"iteration", iteration}, {"schedule", schedule_state}};
  write_file_atomic((tmp / "state.json").string(), state.dump(1));
  // Last: the checksums of everything above (every EP rank's share included).
  write_checkpoint_manifest(tmp.string());
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);

  if (keep_last > 0) {
    std::vector<fs::path> all = list_checkpoints(run_dir);
    const int64_t excess = static_cast<int64_t>(all.size()) - keep_last;
    for (int64_t i = 0; i < excess; ++i) fs::remove_all(all[static_cast<size_t>(i)]);
  }
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  const std::vector<fs::path> all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back().string();
}

LoadedCheckpoint load_checkpoint(const std::string& dir, RlSetup& setup) {
  LoadedCheckpoint loaded;
  loaded.dir = dir;
  const fs::path root(dir);
  const std::string state_path = (root / "state.json").string();
  check_input(fs::exists(state_path), "not a checkpoint (no state.json)", dir);
  // state.json's own checks first (its iteration against the directory's name among
  // them): they say what is wrong with a hand-edited state, where the checksum below
  // would only say that it changed.
  CheckpointState state = read_checkpoint_state(read_file(state_path), state_path,
                                                iteration_of_name(root.filename().string()));
  // Every file is checked before a tensor is read. A checkpoint of an Aspen that wrote
  // no manifest still resumes (as the legacy optimizer formats do), with a warning:
  // refusing it would strand the runs started before the upgrade.
  if (!verify_checkpoint_manifest(dir)) {
    log_warn("checkpoint ", dir, " has no ", kCheckpointManifest,
             " (written before Aspen recorded checksums): its files load unverified");
  }
  loaded.iteration = state.iteration;
  loaded.schedule_state = std::move(state.schedule);
  setup.model->load_state(load_model_weights((root / "policy").string()),
                          (root / "policy").string());
  if (fs::exists(root / "reference.safetensors")) {
    loaded.workers.reference = load_safetensors((root / "reference.safetensors").string());
  } else if (fs::is_directory(root / kShardedReference)) {
    // Whole: the reference model's load_state takes this rank's shards of it.
    loaded.workers.reference =
        read_rank_shards((root / kShardedReference).string(), whole_holding());
  }
  if (fs::exists(root / "critic.safetensors")) {
    loaded.workers.critic = load_safetensors((root / "critic.safetensors").string());
  }
  return loaded;
}

void restore_optimizers(const LoadedCheckpoint& checkpoint, RlWorkers& workers) {
  const fs::path root(checkpoint.dir);
  const QwenForCausalLM& actor = workers.actor->model();
  Optimizer& optimizer = workers.actor->optimizer();
  if (fs::exists(root / "actor_optimizer.pt")) {  // written before the named format
    check_input(!actor->tp.enabled(),
                "holds optimizer state of the format before named state (actor_optimizer.pt), "
                "which resumes only over the same parameters",
                checkpoint.dir, "resume it with placement.train.tp=1");
    optimizer.load((root / "actor_optimizer.pt").string());
  } else if (fs::is_directory(root / kShardedOptimizer)) {  // a tensor-parallel run's
    optimizer.restore_state(
        read_rank_shards((root / kShardedOptimizer).string(), optimizer_state_holding(actor)),
        (root / kShardedOptimizer).string());
  } else {
    // Whole tensors by name: cut into this rank's shards under TP.
    optimizer.restore_state(
        as_held(load_optimizer_shares(root, "actor_optimizer"), optimizer_state_holding(actor),
                checkpoint.dir),
        checkpoint.dir);
  }
  if (workers.reference && workers.reference->holds_copy()) {
    check_input(!checkpoint.workers.reference.empty(),
                "the run needs a reference model but the checkpoint has none", checkpoint.dir);
  }
  if (workers.critic) {
    const fs::path named = root / "critic_optimizer.safetensors";
    const fs::path legacy = root / "critic_optimizer.pt";
    // A run on stages wrote a share per stage; each stage takes its parameters' state.
    const auto shares = load_optimizer_shares(root, "critic_optimizer", /*optional=*/true);
    check_input(fs::exists(named) || fs::exists(legacy) || !shares.empty(),
                "the run trains a critic but the checkpoint has none", checkpoint.dir);
    if (!shares.empty()) {
      workers.critic->optimizer().restore_state(shares, checkpoint.dir);
    } else {
      workers.critic->optimizer().load((fs::exists(named) ? named : legacy).string());
    }
  }
}

}  // namespace aspen::pipeline
