#include "aspen/train/pipeline_runner.h"

#include <optional>
#include <string>

#include "aspen/parallel/pipeline_p2p.h"
#include "aspen/train/imports.h"
#include "aspen/train/pipeline_routing.h"
#include "aspen/train/pipeline_schedule.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

// What a stage keeps of a micro-batch between its forward and its backward.
struct InFlight {
  torch::Tensor input;   // the received activation (a leaf whose .grad goes back); none on stage 0
  torch::Tensor output;  // the hidden states sent on, or the last stage's loss
  MoeRoutingLog own;     // this stage's sparse layers' routing (MoE)
  torch::Tensor feedback;  // the load-balancing feedback to pass back (MoE)
};

}  // namespace

StageForward stage_forward(QwenForCausalLM model) {
  StageForward stage;
  stage.pp = model->pp;
  if (model->config.is_moe()) {
    stage.num_experts = model->config.moe.num_experts;
    stage.top_k = model->config.moe.num_experts_per_tok;
  }
  stage.forward = [model](const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                          MoeRoutingLog* log) mutable {
    return model->forward_stage(input, cu_seqlens, {}, log);
  };
  return stage;
}

StageForward stage_forward(QwenModel decoder) {
  StageForward stage;
  stage.pp = decoder->pp;
  stage.forward = [decoder](const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                            MoeRoutingLog* log) mutable {
    return decoder->checked_forward_stage(input, cu_seqlens, {}, log);
  };
  return stage;
}

void run_one_f_one_b(QwenForCausalLM& model, const std::vector<MicroBatch>& micro_batches,
                     const StageLoss& loss) {
  run_one_f_one_b(stage_forward(model), micro_batches,
                  [&](size_t index, const torch::Tensor& hidden) { return loss(model, index, hidden); });
}

void run_one_f_one_b(const StageForward& stage, const std::vector<MicroBatch>& micro_batches,
                     const HiddenLoss& loss) {
  const PipelineStages& pp = stage.pp;
  const std::string where = "pipeline stage " + std::to_string(pp.stage);
  check_input(!micro_batches.empty(), "no micro-batches to run", where);
  std::optional<ProcessGroupHandle> group;
  if (pp.enabled()) group = pp.require_group(where);
  check_input(!stage.routes() || !pp.last(),
              "the last stage of a MoE pipeline computes its load-balancing loss in a "
              "trainer's loop (PipelinePass)",
              where);
  const torch::Device device = micro_batches.front().input_ids.device();
  std::vector<InFlight> in_flight(micro_batches.size());
  std::vector<PendingWork> sends;  // waited at the end: Gloo sends complete on the peer's recv

  auto forward = [&](size_t i) {
    const MicroBatch& mb = micro_batches[i];
    InFlight& state = in_flight[i];
    torch::Tensor input = mb.input_ids;
    if (!pp.first()) {
      state.input = recv_tensor(*group, pp.stage - 1, kActivationTag, device);
      check_input(state.input.dim() == 2 && state.input.size(0) == mb.num_tokens,
                  "received activations of shape " + c10::str(state.input.sizes()) +
                      " for micro-batch " + std::to_string(i) + " of " +
                      std::to_string(mb.num_tokens) + " tokens",
                  where);
      state.input.requires_grad_(true);
      input = state.input;
    }
    // The earlier stages' routing, then this stage's layers append theirs.
    MoeRoutingLog routing;
    if (stage.routes() && !pp.first()) routing = recv_routing(*group, pp.stage - 1, mb.num_tokens, device);
    const size_t earlier = routing.layers.size();
    torch::Tensor hidden = stage.forward(input, mb.cu_seqlens, stage.routes() ? &routing : nullptr);
    if (pp.last()) {
      state.output = loss(i, hidden);
    } else {
      sends.push_back(send_tensor(*group, hidden.detach(), pp.stage + 1, kActivationTag));
      if (stage.routes()) {
        for (PendingWork& work : send_routing(*group, routing, stage.num_experts, stage.top_k,
                                              mb.num_tokens, pp.stage + 1)) {
          sends.push_back(work);
        }
        state.own.layers.assign(routing.layers.begin() + static_cast<std::ptrdiff_t>(earlier),
                                routing.layers.end());
      }
      state.output = hidden;
    }
  };

  auto backward = [&](size_t i) {
    InFlight& state = in_flight[i];
    if (pp.last()) {
      state.output.backward();
    } else {
      const torch::Tensor grad = recv_tensor(*group, pp.stage + 1, kGradientTag, device);
      check_input(grad.sizes() == state.output.sizes(),
                  "received a gradient of shape " + c10::str(grad.sizes()) + " for activations " +
                      c10::str(state.output.sizes()),
                  where);
      torch::Tensor feedback;
      if (stage.routes()) feedback = recv_tensor(*group, pp.stage + 1, kGradientTag, torch::kCPU);
      const torch::Tensor aux = feedback.defined() ? stage_aux_loss(state.own, feedback)
                                                   : torch::Tensor();
      if (aux.defined()) {
        torch::autograd::backward({state.output, aux}, {grad, torch::ones_like(aux)});
      } else {
        torch::autograd::backward({state.output}, {grad});
      }
      if (feedback.defined() && !pp.first()) {
        state.feedback = feedback;  // passed on after the activations' gradient
      }
    }
    if (!pp.first()) {
      // No path from the input to the output's graph would leave it without a gradient;
      // the previous stage still waits for one.
      torch::Tensor grad = state.input.grad().defined() ? state.input.grad()
                                                        : torch::zeros_like(state.input);
      sends.push_back(send_tensor(*group, grad, pp.stage - 1, kGradientTag));
      if (state.feedback.defined()) {
        sends.push_back(send_tensor(*group, state.feedback, pp.stage - 1, kGradientTag));
      }
    }
    state = InFlight{};  // frees the activations (the sends keep their own references)
  };

  const auto count = static_cast<int64_t>(micro_batches.size());
  for (const PipelineStep& step : one_f_one_b_order(pp.size, pp.stage, count)) {
    if (step.op == PipelineOp::kForward) {
      forward(static_cast<size_t>(step.micro_batch));
    } else {
      backward(static_cast<size_t>(step.micro_batch));
    }
  }
  for (PendingWork& work : sends) work.wait();
}

void sum_tied_embedding_gradient(QwenForCausalLM& model) {
  const PipelineStages& pp = model->pp;
  if (!pp.enabled() || !model->config.tie_word_embeddings || !(pp.first() || pp.last())) return;
  torch::Tensor weight = model->model->embed_tokens->weight;
  if (!weight.requires_grad()) return;  // frozen (LoRA): neither copy trains
  check_input(weight.grad().defined(),
              "the tied embedding has no gradient: run the micro-batches first",
              "pipeline stage " + std::to_string(pp.stage));
  torch::Tensor grad = weight.mutable_grad();
  pp.sum_tied_gradient(grad);
}

}  // namespace aspen::train
