// Pipeline-parallel rank program (pipeline group = the whole world, stage = rank):
//   pp_check CASE...  runs each CASE in turn and prints "rank R pp CASE ok" for each.
//     p2p                    send_tensor/recv_tensor between neighbouring stages: empty,
//                            2-d fp32, 3-d int64 and bf16 tensors arrive with their shape,
//                            dtype and values, forward and back.
//     qwen3_dense:M, qwen2_tied:M
//                            a seeded 3-layer model (Qwen3 dense; Qwen2 with tied
//                            embeddings), loaded whole at every stage, runs M balanced
//                            micro-batches of packed variable-length rows through the
//                            1F1B schedule (train/pipeline_runner.h); the last stage's
//                            summed loss and every stage's parameter gradients must
//                            equal one process's (the same model and micro-batches,
//                            forward and backward one after another), within the TP
//                            tests' tolerances. Also checks which parameters each stage
//                            holds, that a seeded init gives every stage its part of
//                            the one-process model, and that a stage refuses
//                            token_logprobs (a whole-model method).
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"
#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/pipeline_runner.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"
#include "tensor_checks.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::train;
// Named, not anonymous: the unity build compiles this file with tp_modes.cpp, whose
// anonymous namespace has helpers of the same names.
namespace pipeline_check {

void expect(bool ok, const std::string& what, const std::string& where) {
  check_input(ok, what, where);
}

void expect_close(const torch::Tensor& got, const torch::Tensor& want, const std::string& what,
                  const std::string& where) {
  expect_close_to(got, want, what, where, "one process");
}

// ------------------------------------------------------------------------- p2p

void check_p2p(ProcessGroupHandle& group) {
  const std::string where = "pp_check p2p";
  const std::vector<torch::Tensor> messages = {
      torch::zeros({0}),
      torch::arange(15, torch::kFloat).reshape({3, 5}),
      torch::arange(24, torch::kLong).reshape({2, 3, 4}) - 7,
      torch::linspace(-2, 2, 7).to(torch::kBFloat16)};
  const int rank = group.rank();
  const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
  if (peer >= group.world_size()) return;  // the odd one out of an odd world
  // Even ranks send first, odd ranks answer with what they received.
  for (const torch::Tensor& message : messages) {
    if (rank % 2 == 0) {
      send_tensor(group, message, peer, kActivationTag).wait();
      const torch::Tensor back = recv_tensor(group, peer, kGradientTag, torch::kCPU);
      expect(back.scalar_type() == message.scalar_type() && torch::equal(back, message * 2),
             "the answer to a " + c10::str(message.sizes()) + " message", where);
    } else {
      const torch::Tensor got = recv_tensor(group, peer, kActivationTag, torch::kCPU);
      expect(got.scalar_type() == message.scalar_type() && torch::equal(got, message),
             "a " + c10::str(message.sizes()) + " " + c10::toString(message.scalar_type()) +
                 " message arrived as " + c10::str(got.sizes()) + " " +
                 c10::toString(got.scalar_type()),
             where);
      send_tensor(group, got * 2, peer, kGradientTag).wait();
    }
  }
}

// ---------------------------------------------------------------- model cases

// 3 layers: over 2 stages, stage 0 runs layers 0 and 1, stage 1 layer 2; over 3
// stages one layer each.
ModelConfig case_config(const std::string& name) {
  ModelConfig c = name == "qwen2_tied"
                      ? tiny_parallel_config(ModelFamily::kQwen2, 4, 2, 8, /*tied=*/true)
                      : tiny_parallel_config(ModelFamily::kQwen3, 4, 2, 12, /*tied=*/false);
  check_input(name == "qwen2_tied" || name == "qwen3_dense", "unknown case", "pp_check " + name);
  c.num_hidden_layers = 3;
  return c;
}

// Seeded weights with logits of order 1 and norms moved off 1, as tp_modes.cpp's.
std::map<std::string, torch::Tensor> reference_weights(const ModelConfig& config) {
  QwenForCausalLM model(config);
  init_weights(model, /*seed=*/11, /*initializer_range=*/0.2);
  torch::manual_seed(12);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, param] : model->hf_state()) {
    torch::Tensor w = param.detach().clone();
    if (w.dim() == 1) w += 0.3 * torch::randn_like(w);
    weights[name] = w;
  }
  return weights;
}

// 8 rows of unequal lengths (52 tokens); a budget of 64 tokens packs them into one
// micro-batch, 16 into four of 13 tokens each.
std::vector<MicroBatch> micro_batches(int64_t count, int64_t vocab) {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{3, 4}, {2, 3}, {5, 4}, {1, 3},
                                                           {4, 2}, {6, 2}, {2, 1}, {7, 3}};
  torch::manual_seed(13);
  TrainBatch batch;
  for (const auto& [prompt, response] : shapes) {
    const torch::Tensor ids = torch::randint(vocab, {prompt + response}, torch::kLong);
    const int64_t* p = ids.data_ptr<int64_t>();
    batch.prompts.emplace_back(p, p + prompt);
    batch.responses.emplace_back(p + prompt, p + prompt + response);
  }
  std::vector<int64_t> rows(shapes.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  auto planned = make_micro_batches(batch, rows, count == 1 ? 64 : 16, torch::kCPU);
  check_input(static_cast<int64_t>(planned.size()) == count,
              "the micro-batcher made " + std::to_string(planned.size()) + " micro-batches",
              "pp_check batch");
  return planned;
}

// The trainer's way: each micro-batch's loss scaled by its share of the step (here,
// per response token over all of them), with per-token weights so every term matters.
torch::Tensor micro_batch_loss(QwenForCausalLM& model, const MicroBatch& mb,
                               const torch::Tensor& hidden, int64_t total_tokens) {
  LogprobHeadOptions options;
  options.with_entropy = true;
  options.chunk_size = 5;
  TokenLogprobs head =
      model->head_logprobs(hidden.index_select(0, mb.hidden_index), mb.target_ids, options);
  const torch::Tensor position = mb.batch_token_index.to(torch::kFloat);
  const torch::Tensor a = torch::cos(position) + 0.5;
  const torch::Tensor b = torch::sin(position) * 0.3;
  return ((head.logprobs * a).sum() + (head.entropy * b).sum()) / total_tokens;
}

void check_model_case(ProcessGroupHandle& group, const std::string& spec) {
  const std::string where = "pp_check " + spec;
  const size_t colon = spec.find(':');
  check_input(colon != std::string::npos, "expected NAME:MICRO_BATCHES", where);
  const ModelConfig config = case_config(spec.substr(0, colon));
  const int64_t count = std::stoll(spec.substr(colon + 1));
  const std::map<std::string, torch::Tensor> full = reference_weights(config);
  const std::vector<MicroBatch> mbs = micro_batches(count, config.vocab_size);
  int64_t total_tokens = 0;
  for (const MicroBatch& mb : mbs) total_tokens += mb.num_response_tokens;

  // One process: forward and backward one micro-batch after another.
  QwenForCausalLM reference(config);
  reference->load_state(full, "reference");
  double want_loss = 0.0;
  for (const MicroBatch& mb : mbs) {
    torch::Tensor loss = micro_batch_loss(reference, mb, reference->forward(mb.input_ids, mb.cu_seqlens),
                                          total_tokens);
    loss.backward();
    want_loss += loss.item<double>();
  }

  const PipelineStages pp = PipelineStages::over(group);
  QwenForCausalLM stage(config, TensorParallel{}, ExpertParallel{}, pp);
  stage->load_state(full, "whole checkpoint");
  // A stage cannot run the whole model.
  bool refused = false;
  try {
    stage->token_logprobs(mbs[0].input_ids, mbs[0].cu_seqlens);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("pipeline stage") != std::string::npos;
  }
  expect(refused, "token_logprobs on a stage is refused, naming the stage", where);
  double got_loss = 0.0;
  run_one_f_one_b(stage, mbs, [&](QwenForCausalLM& model, size_t i, const torch::Tensor& hidden) {
    torch::Tensor loss = micro_batch_loss(model, mbs[i], hidden, total_tokens);
    got_loss += loss.item<double>();
    return loss;
  });
  sum_tied_embedding_gradient(stage);

  if (pp.last()) {
    expect(std::abs(got_loss - want_loss) <= 1e-5 * (1.0 + std::abs(want_loss)),
           "loss " + std::to_string(got_loss) + ", one process " + std::to_string(want_loss), where);
  }
  // This stage's parameters: its layers, the embedding first (and last when tied), the
  // norm and head last.
  const LayerRange layers = pp.layers(config.num_hidden_layers, where);
  std::set<std::string> expected;
  for (const auto& [key, param] : reference->hf_state()) {
    const std::string prefix = "model.layers.";
    bool held;
    if (key.compare(0, prefix.size(), prefix) == 0) {
      held = layers.contains(std::stoll(key.substr(prefix.size())));
    } else if (key == "model.embed_tokens.weight") {
      held = pp.first() || (pp.last() && config.tie_word_embeddings);
    } else {
      held = pp.last();
    }
    if (held) expected.insert(key);
  }
  std::map<std::string, torch::Tensor> reference_grads;
  for (const auto& [key, param] : reference->hf_state()) reference_grads[key] = param.grad();
  std::set<std::string> held;
  for (const auto& [key, param] : stage->hf_state()) {
    held.insert(key);
    expect(param.grad().defined(), "no gradient for " + key, where);
    expect_close(param.grad(), reference_grads.at(key), "gradient of " + key, where);
  }
  expect(held == expected, "stage " + std::to_string(pp.stage) + " holds " +
                               std::to_string(held.size()) + " parameters, expected " +
                               std::to_string(expected.size()),
         where);

  // A seed gives every stage its part of the one-process model.
  QwenForCausalLM seeded_full(config);
  init_weights(seeded_full, 5);
  QwenForCausalLM seeded_stage(config, TensorParallel{}, ExpertParallel{}, pp);
  init_weights(seeded_stage, 5);
  std::map<std::string, torch::Tensor> seeded;
  for (const auto& [key, param] : seeded_full->hf_state()) seeded[key] = param;
  for (const auto& [key, param] : seeded_stage->hf_state()) {
    expect(torch::equal(param, seeded.at(key)), "init_weights of a stage differs: " + key, where);
  }
}

int pp_check(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(!args.empty(), "expected CASE... (p2p or NAME:MICRO_BATCHES)", "pp_check");
  for (const std::string& name : args) {
    if (name == "p2p") {
      check_p2p(group);
    } else {
      check_model_case(group, name);
    }
    std::printf("rank %d pp %s ok\n", group.rank(), name.c_str());
  }
  return 0;
}

const RegisterWorkerMode kPpCheck({"pp_check", "pp_check CASE...", pp_check});

}  // namespace pipeline_check
}  // namespace aspen::testing
