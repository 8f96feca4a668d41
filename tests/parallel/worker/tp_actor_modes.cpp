// Tensor-parallel actor rank program (TP group = the whole world):
//   tp_actor CASE...  for each CASE builds the same seeded tiny model at TP = 1 (on
//                     every rank, no collectives) and at TP = world, runs one
//                     ActorTrainer update on one seeded batch through both - two
//                     optimizer steps (mini-batches), gradient clipping active, KL to
//                     reference log-probs in the loss, activation recompute on - and
//                     checks that the two report the same grad norm and that every
//                     updated TP parameter equals its shard of the updated TP = 1
//                     parameter. Prints "rank R tp_actor CASE ok" for each case.
//     gqa             Qwen2 with biases, 4 heads / 2 kv heads
//     kv_replicated   1 kv head, replicated on every rank (its clip-norm share counted once)
//     tied            Qwen3 (q/k norms) with a tied embedding/head
//     lora_gqa, lora_kv_replicated
//                     gqa and kv_replicated with LoRA adapters on all seven projections
//                     (random A and B): the adapters update like TP = 1 and every base
//                     parameter stays as loaded on both sides (activation recompute
//                     on: the frozen embedding still gives the layers a grad path)
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/model/tp_layout.h"
#include "aspen/model/weights_init.h"
#include "aspen/train/actor.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
namespace {

bool is_lora_case(const std::string& name) {
  return name.rfind("lora_", 0) == 0;
}

ModelConfig actor_case(const std::string& case_name) {
  const std::string name = is_lora_case(case_name) ? case_name.substr(5) : case_name;
  // The tensor-parallel programs' sizes (support/tiny_model_configs.h), at the default
  // rope_theta.
  ModelConfig c =
      tiny_model_config(name == "tied" ? ModelFamily::kQwen3 : ModelFamily::kQwen2,
                        {96, 32, 64, 2, 4, name == "kv_replicated" ? 1 : 2, 8});
  c.tie_word_embeddings = name == "tied";
  check_input(name == "gqa" || name == "kv_replicated" || name == "tied", "unknown case",
              "tp_actor " + case_name);
  return c;
}

TrainBatch seeded_batch(int64_t vocab) {
  torch::manual_seed(21);
  TrainBatch batch;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 5}, {4, 2}, {2, 7}, {5, 4}};
  int64_t tokens = 0;
  for (const auto& [prompt, response] : shapes) {
    auto draw = [&](int64_t n) {
      const torch::Tensor ids = torch::randint(vocab, {n}, torch::kLong);
      return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + n);
    };
    batch.prompts.push_back(draw(prompt));
    batch.responses.push_back(draw(response));
    tokens += response;
  }
  batch.token_columns[columns::kAdvantages] = torch::randn({tokens});
  return batch;
}

ActorOptions actor_options() {
  ActorOptions options;
  // A large eps makes AdamW's step ~ lr * g / eps for these small (clipped) gradients:
  // proportional to the gradient, so the weights reflect the clip scale, and rounding
  // noise in gradients that are zero in exact arithmetic (a key bias; directions a
  // q/k norm ignores) is not blown up to full lr-sized steps as with eps = 1e-8.
  options.trainer.optimizer.eps = 1e-2;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.optimizer.weight_decay = 0.01;
  options.trainer.optimizer.max_grad_norm = 0.05;  // far below the norm: clipping acts
  options.trainer.recompute = true;
  options.head.chunk_size = 7;  // several vocabulary chunks per rank
  return options;
}

int run_tp_actor(ProcessGroupHandle& group, const std::vector<std::string>& cases) {
  const TensorParallel tp = TensorParallel::over(group);
  for (const std::string& name : cases) {
    const std::string where = "tp_actor " + name;
    const ModelConfig config = actor_case(name);
    const bool lora = is_lora_case(name);
    QwenForCausalLM full(config);
    init_weights(full, /*seed=*/31, /*initializer_range=*/0.2);
    if (lora) {
      LoraOptions options;
      options.rank = 4;
      options.alpha = 8.0;
      full->attach_lora(options);
      // B is zero at PEFT's init: random A and B make every adapter gradient live.
      torch::manual_seed(32);
      torch::NoGradGuard no_grad;
      for (const auto& [key, tensor] : full->lora_state()) {
        tensor.copy_(0.1 * torch::randn_like(tensor));
      }
    }
    std::map<std::string, torch::Tensor> weights;
    for (const auto& [key, tensor] : full->hf_state()) weights[key] = tensor.detach().clone();
    QwenForCausalLM sharded(config, tp);
    if (lora) sharded->attach_lora(full->lora_options);
    sharded->load_state(weights, "full weights");

    // With activation recompute as actor_options() sets it: a frozen embedding (LoRA)
    // still gives the checkpointed layers a grad path (train/recompute.cpp).
    ActorOptions options = actor_options();
    ActorTrainer one(full, options);
    ActorTrainer many(sharded, options);
    TrainBatch batch = seeded_batch(config.vocab_size);
    const torch::Tensor old_logprobs = one.compute_logprobs(batch).logprobs;
    const torch::Tensor sharded_old = many.compute_logprobs(batch).logprobs;
    check_input(torch::allclose(sharded_old, old_logprobs, 1e-4, 2e-5),
                "log-probs of the TP model differ from TP = 1", where);
    batch.token_columns[columns::kOldLogprobs] = old_logprobs;
    batch.token_columns[columns::kRefLogprobs] =
        old_logprobs + 0.1 * torch::randn_like(old_logprobs);

    ActorUpdateOptions update;
    update.mini_batch_size = 2;  // two optimizer steps
    update.kl_coef = 0.1;
    const ActorMetrics want = one.update(batch, update);
    const ActorMetrics got = many.update(batch, update);
    check_input(want.steps == 2 && got.steps == 2, "expected two optimizer steps", where);
    check_input(std::abs(got.grad_norm - want.grad_norm) <= 1e-4 * want.grad_norm,
                "grad norm " + std::to_string(got.grad_norm) + " vs " +
                    std::to_string(want.grad_norm) + " at TP = 1",
                where);
    check_input(want.grad_norm > 10 * actor_options().trainer.optimizer.max_grad_norm,
                "the case must clip", where);
    std::map<std::string, torch::Tensor> updated;
    for (const auto& [key, tensor] : full->hf_state()) updated[key] = tensor.detach();
    for (const auto& [key, local] : sharded->hf_state()) {
      const torch::Tensor expected =
          take_shard(updated.at(key), qwen_shard_spec(key, config), tp.rank, tp.size, key);
      const double diff = (local - expected).abs().max().item<double>();
      const double atol = 2e-6;  // the updates themselves are ~1e-3
      check_input(torch::allclose(local, expected, 0.0, atol),
                  key + " differs from TP = 1 after the update by " + std::to_string(diff), where);
      if (lora && is_lora_parameter(key)) {
        check_input(!torch::equal(updated.at(key), weights.at(key)),
                    "the adapter " + key + " did not move at TP = 1", where);
      } else if (lora) {
        check_input(torch::equal(updated.at(key), weights.at(key)),
                    "the base parameter " + key + " moved at TP = 1", where);
        check_input(!local.requires_grad() && !local.grad().defined(),
                    "the base parameter " + key + " trains at TP = " + std::to_string(tp.size),
                    where);
      }
    }
    std::printf("rank %d tp_actor %s ok\n", group.rank(), name.c_str());
    std::fflush(stdout);
  }
  return 0;
}

const RegisterWorkerMode kTpActor{{"tp_actor", "tp_actor CASE...", run_tp_actor}};

}  // namespace
}  // namespace aspen::testing
