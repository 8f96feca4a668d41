// Tensor-parallel rank program (TP group = the whole world):
//   tp_check CASE...  runs each CASE in turn and prints "rank R tp CASE ok" for each.
//     collectives            copy_to/reduce_from_tp_region and sum_replica_grads:
//                            forward and backward values on hand-computable inputs
//                            (with 4 ranks this includes replicated blocks, blocks > 1)
//     qwen2_bias, kv_replicated, qwen3_tied, qwen3_kv_replicated, qwen3_attention_bias,
//     qwen3_moe (tp_cases below)
//                            builds the same seeded tiny model at TP = 1 (reference)
//                            and at TP = world, runs forward, token_logprobs with
//                            entropy and the backward of a loss of both on one packed
//                            batch, and checks hidden, logprobs, entropy and every
//                            parameter gradient (against the shard of the TP = 1
//                            gradient); then the rollout engine over both models must
//                            generate the same tokens (sampled and greedy, chunked
//                            prefill) with the same log-probs.
//     lora_kv_split, lora_kv_replicated, lora_qwen3_tied (tp_cases below)
//                            the same with LoRA adapters on all seven projections
//                            (random A and B, so every adapter term is live): hidden,
//                            logprobs and entropy as above; every adapter gradient
//                            equals its shard of the TP = 1 one, and no base parameter
//                            gets a gradient on either side.
// Several cases per launch: process start-up and rendezvous dominate the run time.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/tp_collectives.h"
#include "aspen/util/error.h"
#include "paged_rollout_check.h"
#include "support/tiny_model_configs.h"
#include "tensor_checks.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
namespace {

void expect(bool ok, const std::string& what, const std::string& where) {
  check_input(ok, what, where);
}

// ------------------------------------------------------------------- collectives

void check_collectives(const TensorParallel& tp) {
  const std::string where = "tp_check collectives";
  const float r = static_cast<float>(tp.rank + 1);  // this rank's value: 1..W
  const float world_sum = static_cast<float>(tp.size * (tp.size + 1) / 2);
  auto leaf = [&] { return torch::full({3}, r, torch::requires_grad()); };
  auto all = [](const torch::Tensor& t, float v) { return torch::equal(t, torch::full({3}, v)); };

  torch::Tensor x = leaf();
  torch::Tensor y = reduce_from_tp_region(x, tp);
  expect(all(y, world_sum), "reduce_from_tp_region forward sums", where);
  y.backward(torch::full({3}, r));
  expect(all(x.grad(), r), "reduce_from_tp_region backward is the identity", where);

  x = leaf();
  y = copy_to_tp_region(x, tp);
  expect(all(y, r), "copy_to_tp_region forward is the identity", where);
  y.backward(torch::full({3}, r));
  expect(all(x.grad(), world_sum), "copy_to_tp_region backward sums", where);

  x = leaf();
  sum_replica_grads(x, ShardSpec{}, tp).backward(torch::full({3}, r));
  expect(all(x.grad(), world_sum), "fully replicated: gradient summed over all ranks", where);

  // Half as many blocks as ranks (at 4 ranks: {0, 1} hold block 0, {2, 3} block 1):
  // each rank's gradient is summed with its partner's only.
  const int64_t blocks = tp.size / 2;
  x = leaf();
  torch::Tensor z = sum_replica_grads(x, ShardSpec{0, blocks}, tp);
  expect(all(z, r), "sum_replica_grads forward is the identity", where);
  z.backward(torch::full({3}, r));
  const int first_holder = tp.rank / 2 * 2;
  expect(all(x.grad(), static_cast<float>(2 * first_holder + 3)),
         "replicated block: summed over its holders", where);

  // As many blocks as ranks: nothing is replicated, no collective runs.
  x = leaf();
  sum_replica_grads(x, ShardSpec{0, tp.size}, tp).backward(torch::full({3}, r));
  expect(all(x.grad(), r), "unreplicated: gradient untouched", where);
}

// ---------------------------------------------------------------------- tp_check

struct TpCase {
  ModelConfig config;
  bool load_sharded = false;  // load this rank's shards instead of full tensors
  bool lora = false;          // adapters on every target (lora_options below)
};

// Rank 4 on all seven projections (the default targets), scaling alpha / r = 2.
LoraOptions lora_options() {
  LoraOptions options;
  options.rank = 4;
  options.alpha = 8.0;
  return options;
}

ModelConfig with_attention_bias(ModelConfig c) {
  c.attention_bias = true;
  return c;
}

// Vocabulary 96, 4 query heads (support/tiny_model_configs.h).
ModelConfig tiny(ModelFamily family, int64_t kv_heads, int64_t head_dim, bool tied) {
  return tiny_parallel_config(family, /*heads=*/4, kv_heads, head_dim, tied);
}

std::map<std::string, TpCase> tp_cases() {
  return {
      {"qwen2_bias", {tiny(ModelFamily::kQwen2, 2, 8, /*tied=*/false)}},
      {"kv_replicated", {tiny(ModelFamily::kQwen2, 1, 8, /*tied=*/false)}},
      // head_dim 12: H * D != C, and q/k norms; loads shards, not full tensors.
      {"qwen3_tied", {tiny(ModelFamily::kQwen3, 2, 12, /*tied=*/true), /*load_sharded=*/true}},
      // At 4 ranks: 2 kv heads each replicated on 2 ranks, q/k norms on 1 head per rank.
      {"qwen3_kv_replicated", {tiny(ModelFamily::kQwen3, 2, 8, /*tied=*/false)}},
      // Qwen3 with attention_bias: q/k/v biases and an o_proj bias, which the
      // row-parallel o_proj must add once, after the reduction.
      {"qwen3_attention_bias", {with_attention_bias(tiny(ModelFamily::kQwen3, 2, 8, false))}},
      // Qwen3-MoE: 4 experts of width 16, top-2, layer 1 dense: every expert is split
      // over its width like the dense MLP, the router replicated.
      {"qwen3_moe", {tiny_parallel_moe_config(/*layers=*/2)}},
      // LoRA: K = 2 kv heads split over 2 ranks (k/v's B split by heads), K = 1
      // replicated (k/v's B replicated: its gradient summed over its holders), Qwen3
      // loaded from shards (the adapters' shards too).
      {"lora_kv_split", {tiny(ModelFamily::kQwen2, 2, 8, /*tied=*/false), false, true}},
      {"lora_kv_replicated", {tiny(ModelFamily::kQwen2, 1, 8, /*tied=*/false), false, true}},
      {"lora_qwen3_tied", {tiny(ModelFamily::kQwen3, 2, 12, /*tied=*/true), true, true}},
  };
}

// The full reference weights: seeded init with logits of order 1 (the default
// 0.02 would make every softmax nearly uniform), then norms and biases moved off
// 1 and 0 so that a wrong shard of them shows.
// With `lora`, adapters too, A and B random (B is zero at PEFT's init, which would
// leave A's gradient zero and the adapters' output untested).
std::map<std::string, torch::Tensor> reference_weights(const ModelConfig& config, bool lora) {
  QwenForCausalLM model(config);
  init_weights(model, /*seed=*/11, /*initializer_range=*/0.2);
  if (lora) model->attach_lora(lora_options());
  torch::manual_seed(12);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, param] : model->hf_state()) {
    torch::Tensor w = param.detach().clone();
    if (w.dim() == 1) w += 0.3 * torch::randn_like(w);
    if (is_lora_parameter(name)) w = 0.1 * torch::randn_like(w);
    weights[name] = w;
  }
  return weights;
}

// A packed batch of sequences of different lengths (one of length 1: no target).
struct PackedBatch {
  torch::Tensor input_ids;
  torch::Tensor cu_seqlens;
};
PackedBatch packed_batch(int64_t vocab) {
  const std::vector<int64_t> lengths = {5, 1, 9, 3, 6};
  std::vector<int64_t> offsets = {0};
  for (int64_t n : lengths) offsets.push_back(offsets.back() + n);
  torch::manual_seed(13);
  return {torch::randint(vocab, {offsets.back()}, torch::kLong), torch::tensor(offsets)};
}

struct Outputs {
  torch::Tensor hidden;
  TokenLogprobs head;
};

// forward, then token_logprobs and the backward of a loss using both of its
// outputs with unequal per-token weights (so every gradient term matters).
Outputs run_step(QwenForCausalLM& model, const PackedBatch& batch) {
  Outputs out;
  {
    torch::NoGradGuard no_grad;
    out.hidden = model->forward(batch.input_ids, batch.cu_seqlens);
  }
  LogprobHeadOptions options;
  options.with_entropy = true;
  options.chunk_size = 7;  // several chunks per rank, the last one partial
  options.temperature = 0.8;
  out.head = model->token_logprobs(batch.input_ids, batch.cu_seqlens, options);
  const int64_t n = out.head.logprobs.size(0);
  const torch::Tensor a = torch::linspace(-1.0, 1.5, n);
  const torch::Tensor b = torch::linspace(0.7, -0.4, n);
  ((out.head.logprobs * a).sum() + (out.head.entropy * b).sum()).backward();
  return out;
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what,
                  const std::string& where) {
  expect_close_to(got, want, what, where, "TP = 1");
}

void check_model_case(const TensorParallel& tp, const std::string& name, const TpCase& tp_case) {
  const std::string where = "tp_check " + name;
  const ModelConfig& config = tp_case.config;
  const std::map<std::string, torch::Tensor> full = reference_weights(config, tp_case.lora);
  const PackedBatch batch = packed_batch(config.vocab_size);

  QwenForCausalLM reference(config);
  if (tp_case.lora) reference->attach_lora(lora_options());
  reference->load_state(full, "reference");
  const Outputs want = run_step(reference, batch);

  QwenForCausalLM sharded(config, tp);
  if (tp_case.lora) sharded->attach_lora(lora_options());
  if (tp_case.load_sharded) {
    std::map<std::string, torch::Tensor> shards;
    for (const auto& [key, tensor] : full) {
      shards[key] = take_shard(tensor, qwen_shard_spec(key, config), tp.rank, tp.size, key);
    }
    sharded->load_state(shards, "shards");
  } else {
    sharded->load_state(full, "full weights");
  }
  const Outputs got = run_step(sharded, batch);

  expect_close(got.hidden, want.hidden, "hidden", where);
  expect_close(got.head.logprobs, want.head.logprobs, "logprobs", where);
  expect_close(got.head.entropy, want.head.entropy, "entropy", where);
  std::map<std::string, torch::Tensor> reference_grads;
  for (const auto& [key, param] : reference->hf_state()) reference_grads[key] = param.grad();
  for (const auto& [key, param] : sharded->hf_state()) {
    if (tp_case.lora && !is_lora_parameter(key)) {
      // Frozen under LoRA: only the adapters train.
      expect(!param.requires_grad() && !param.grad().defined() &&
                 !reference_grads.at(key).defined(),
             "a gradient for the base parameter " + key, where);
      continue;
    }
    if (!param.grad().defined() && !reference_grads.at(key).defined()) {
      // A MoE expert no token chose: in neither graph.
      expect(key.find(".mlp.experts.") != std::string::npos, "no gradient for " + key, where);
      continue;
    }
    expect(param.grad().defined(), "no gradient for " + key, where);
    const torch::Tensor want_grad =
        take_shard(reference_grads.at(key), qwen_shard_spec(key, config), tp.rank, tp.size, key);
    expect_close(param.grad(), want_grad, "gradient of " + key, where);
  }

  // A seed gives the same model at every TP size: init at TP = world is the shards.
  // (Base weights only: these models have no adapters.)
  QwenForCausalLM seeded_full = make_random_model(config, 5);
  QwenForCausalLM seeded_tp = make_random_model(config, 5, torch::kFloat, torch::kCPU, tp);
  std::map<std::string, torch::Tensor> seeded;
  for (const auto& [key, param] : seeded_full->hf_state()) seeded[key] = param;
  for (const auto& [key, param] : seeded_tp->hf_state()) {
    expect(torch::equal(param, take_shard(seeded.at(key), qwen_shard_spec(key, config), tp.rank,
                                          tp.size, key)),
           "init_weights at TP " + std::to_string(tp.size) + " is not the shard of TP 1: " + key,
           where);
  }
  // The engine over the TP model (local kv heads in its paged cache, vocab-parallel
  // logits gathered).
  check_paged_rollout_matches(reference, sharded, where);
}

int tp_check(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  const auto cases = tp_cases();
  const TensorParallel tp = TensorParallel::over(group);
  check_input(tp.size > 1 && tp.size % 2 == 0, "needs an even number of ranks", "tp_check");
  check_input(!args.empty(), "expected CASE... (collectives or a name in tp_cases)", "tp_check");
  for (const std::string& name : args) {
    if (name == "collectives") {
      check_collectives(tp);
    } else {
      check_input(cases.count(name) == 1, "unknown case", "tp_check " + name);
      check_model_case(tp, name, cases.at(name));
    }
    std::printf("rank %d tp %s ok\n", tp.rank, name.c_str());
  }
  return 0;
}

const RegisterWorkerMode kTpCheck({"tp_check", "tp_check CASE...", tp_check});

}  // namespace
}  // namespace aspen::testing
