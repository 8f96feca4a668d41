#include "aspen/model/qwen_model.h"

#include "aspen/model/imports.h"
#include "aspen/model/packing.h"
#include "aspen/model/rope_frequencies.h"
#include "aspen/model/tp_layout.h"
#include "aspen/model/vocab_parallel_embedding.h"
#include "aspen/model/vocab_parallel_logprobs.h"
#include "aspen/util/error.h"

namespace aspen::model {

QwenModelImpl::QwenModelImpl(const ModelConfig& config, const TensorParallel& tp,
                             const ExpertParallel& ep, const PipelineStages& pp)
    : config(config), tp(tp), pp(pp) {
  layer_range = pp.layers(config.num_hidden_layers, "pipeline stages (num_hidden_layers)");
  const ShardRange vocab = shard_range(qwen_shard_spec("model.embed_tokens.weight", config),
                                       config.vocab_size, tp.rank, tp.size, "vocab_size");
  vocab_begin = vocab.begin;
  // The last stage of a tied model keeps the embedding as its head (qwen_model.h).
  if (pp.first() || (pp.last() && config.tie_word_embeddings)) {
    embed_tokens =
        register_module("embed_tokens", torch::nn::Embedding(vocab.length, config.hidden_size));
  }
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    // A placeholder keeps the ModuleList's index = the HF layer index, so the stage's
    // parameters have their global names ("model.layers.{i}...").
    if (layer_range.contains(i)) {
      layers->push_back(QwenDecoderLayer(config, tp, i, ep));
    } else {
      layers->push_back(std::make_shared<torch::nn::Module>("AnotherStagesLayer"));
    }
  }
  if (pp.last()) norm = register_module("norm", RMSNorm(config.hidden_size, config.rms_norm_eps));
}

std::vector<QwenDecoderLayerImpl*> QwenModelImpl::stage_layers() const {
  std::vector<QwenDecoderLayerImpl*> held;
  for (int64_t i = layer_range.begin; i < layer_range.end; ++i) {
    held.push_back(layers->ptr(static_cast<size_t>(i))->as<QwenDecoderLayer>());
  }
  return held;
}

torch::Tensor QwenModelImpl::forward_stage(const torch::Tensor& input,
                                           const torch::Tensor& cu_seqlens,
                                           const torch::Tensor& positions, MoeRoutingLog* log) {
  // One cos/sin table per forward, shared by every layer's q and k.
  const RopeTable rope = model_rope_table(config, positions);
  torch::Tensor h = pp.first() ? embed(input) : input;
  for (QwenDecoderLayerImpl* layer : stage_layers()) h = layer->forward(h, rope, cu_seqlens, log);
  return pp.last() ? norm(h) : h;
}

torch::Tensor QwenModelImpl::forward(const torch::Tensor& input_ids,
                                     const torch::Tensor& cu_seqlens,
                                     const torch::Tensor& positions, MoeRoutingLog* log) {
  check_input(!pp.enabled(), "a pipeline stage holds part of the model: use forward_stage",
              "QwenModel::forward");
  return forward_stage(input_ids, cu_seqlens, positions, log);
}

torch::Tensor QwenModelImpl::checked_forward_stage(const torch::Tensor& input,
                                                   const torch::Tensor& cu_seqlens,
                                                   const torch::Tensor& positions,
                                                   MoeRoutingLog* log) {
  const std::string where = "pipeline stage " + std::to_string(pp.stage) + " input";
  std::vector<int64_t> offsets;
  if (pp.first()) {
    offsets = check_packed_batch(input, cu_seqlens, config.vocab_size);
  } else {
    check_input(input.dim() == 2 && input.size(1) == config.hidden_size,
                "expected hidden states [T, " + std::to_string(config.hidden_size) + "], got " +
                    c10::str(input.sizes()),
                where);
    // The ids only size the check: every id 0 is valid.
    offsets = check_packed_batch(
        torch::zeros({input.size(0)}, torch::TensorOptions(torch::kLong).device(input.device())),
        cu_seqlens, config.vocab_size);
  }
  if (!positions.defined()) {
    return forward_stage(input, cu_seqlens, packed_positions(offsets, input.device()), log);
  }
  check_input(positions.dim() == 1 && positions.scalar_type() == torch::kLong &&
                  positions.size(0) == input.size(0),
              "expected [T] int64 positions, one per token", "positions");
  return forward_stage(input, cu_seqlens, positions, log);
}

torch::Tensor QwenModelImpl::embed(const torch::Tensor& input_ids) {
  return vocab_parallel_embedding(input_ids, embed_tokens->weight, vocab_begin, tp);
}

torch::Tensor QwenModelImpl::forward_paged(const torch::Tensor& input_ids,
                                           const torch::Tensor& positions,
                                           const PagedBatch& batch, MoeRoutingLog* log) {
  const RopeTable rope = model_rope_table(config, positions);
  torch::Tensor h = embed(input_ids);  // vocab-parallel under TP
  int64_t index = 0;
  for (const auto& layer : *layers) {
    h = layer->as<QwenDecoderLayer>()->forward_paged(h, rope, batch, index++, log);
  }
  return norm(h);
}

QwenForCausalLMImpl::QwenForCausalLMImpl(const ModelConfig& config, const TensorParallel& tp,
                                         const ExpertParallel& ep, const PipelineStages& pp)
    : config(config), tp(tp), ep(ep), pp(pp) {
  config.validate("model config");
  validate_tp_size(config, tp.size);
  tp.validate("tensor parallel context");
  ep.validate("expert parallel context");
  check_input(!ep.enabled() || config.is_moe(), "expert parallelism needs a MoE model",
              "expert parallel context");
  pp.validate("pipeline parallel context");
  // PP x TP: every stage is a TP model over its own TP group; nothing in a stage's
  // layers differs from the whole TP model's. PP x EP likewise over the stage's EP
  // group (its sparse layers' experts split, their all-to-alls within the stage).
  model = register_module("model", QwenModel(config, tp, ep, pp));
  if (!config.tie_word_embeddings && pp.last()) {
    const int64_t vocab_rows = shard_range(qwen_shard_spec("lm_head.weight", config),
                                           config.vocab_size, tp.rank, tp.size, "vocab_size")
                                   .length;
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, vocab_rows).bias(false)));
  }
}

torch::Tensor QwenForCausalLMImpl::forward(const torch::Tensor& input_ids,
                                           const torch::Tensor& cu_seqlens,
                                           const torch::Tensor& positions) {
  require_whole_model("forward");
  const std::vector<int64_t> offsets = check_packed_batch(input_ids, cu_seqlens, config.vocab_size);
  if (!positions.defined()) {
    return model(input_ids, cu_seqlens, packed_positions(offsets, input_ids.device()));
  }
  check_input(positions.dim() == 1 && positions.scalar_type() == torch::kLong &&
                  positions.size(0) == input_ids.size(0),
              "expected [T] int64 positions, one per token", "positions");
  return model(input_ids, cu_seqlens, positions);
}

torch::Tensor QwenForCausalLMImpl::forward_stage(const torch::Tensor& input,
                                                 const torch::Tensor& cu_seqlens,
                                                 const torch::Tensor& positions,
                                                 MoeRoutingLog* log) {
  return model->checked_forward_stage(input, cu_seqlens, positions, log);
}

void QwenForCausalLMImpl::require_whole_model(const std::string& method) const {
  check_input(!pp.enabled(),
              "this model is pipeline stage " + std::to_string(pp.stage) + " of " +
                  std::to_string(pp.size) + " and holds only part of the layers",
              "QwenForCausalLM::" + method);
}

bool QwenForCausalLMImpl::on_other_stage(const std::string& hf_name) const {
  if (!pp.enabled()) return false;
  const std::string prefix = "model.layers.";
  if (hf_name.compare(0, prefix.size(), prefix) == 0) {
    const size_t dot = hf_name.find('.', prefix.size());
    if (dot == std::string::npos) return false;
    try {
      return !model->layer_range.contains(std::stoll(hf_name.substr(prefix.size(), dot)));
    } catch (const std::exception&) {
      return false;  // not a layer index: an unexpected key
    }
  }
  if (hf_name == "model.embed_tokens.weight") return !model->embed_tokens;
  if (hf_name == "model.norm.weight") return !pp.last();
  if (hf_name == "lm_head.weight") return !pp.last();
  return false;
}

void QwenForCausalLMImpl::fuse_projections() {
  for (QwenDecoderLayerImpl* layer : model->stage_layers()) layer->fuse_projections();
}

torch::Tensor QwenForCausalLMImpl::lm_head_weight() const {
  check_input(pp.last(), "only the last pipeline stage holds the head",
              "pipeline stage " + std::to_string(pp.stage));
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

int64_t QwenForCausalLMImpl::local_kv_heads() const {
  const ShardSpec spec = qwen_shard_spec("model.layers.0.self_attn.k_proj.weight", config);
  return shard_range(spec, config.num_key_value_heads * config.head_dim, tp.rank, tp.size,
                     "num_key_value_heads")
             .length /
         config.head_dim;
}

TokenLogprobs QwenForCausalLMImpl::head_logprobs(const torch::Tensor& hidden,
                                                 const torch::Tensor& targets,
                                                 const LogprobHeadOptions& options) {
  if (!tp.enabled()) return chunked_logprobs(hidden, lm_head_weight(), targets, options);
  return vocab_parallel_logprobs(hidden, lm_head_weight(), targets, model->vocab_begin, options,
                                 tp);
}

TokenLogprobs QwenForCausalLMImpl::token_logprobs(const torch::Tensor& input_ids,
                                                  const torch::Tensor& cu_seqlens,
                                                  const LogprobHeadOptions& options) {
  require_whole_model("token_logprobs");
  const std::vector<int64_t> offsets = check_packed_batch(input_ids, cu_seqlens, config.vocab_size);
  torch::Tensor hidden =
      model(input_ids, cu_seqlens, packed_positions(offsets, input_ids.device()));
  torch::Tensor rows = next_token_rows(offsets, input_ids.device());
  torch::Tensor targets = input_ids.index_select(0, rows + 1);
  return head_logprobs(hidden.index_select(0, rows), targets, options);
}

std::vector<std::pair<std::string, torch::Tensor>> QwenForCausalLMImpl::hf_state() const {
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    state.emplace_back(item.key(), item.value());
  }
  return state;
}

void QwenForCausalLMImpl::attach_lora(const LoraOptions& options) {
  options.validate("train.lora");
  check_input(options.enabled(), "rank must be > 0 to attach adapters", "train.lora.rank");
  check_input(!has_lora(), "the model already has LoRA adapters", "train.lora");
  for (QwenDecoderLayerImpl* layer : model->stage_layers()) {
    layer->attach_lora(options, lora_switch_, config);
  }
  lora_options = options;
  for (auto& item : named_parameters(/*recurse=*/true)) {
    if (is_lora_parameter(item.key())) continue;
    item.value().set_requires_grad(false);
    // A gradient left by earlier full training (an SFT warm-up) must not reach the
    // adapters' optimizer, its clipping or its grad-norm metric.
    item.value().mutable_grad() = torch::Tensor();
  }
}

void QwenForCausalLMImpl::set_lora_enabled(bool enabled) {
  lora_switch_->on.store(enabled, std::memory_order_relaxed);
}

bool QwenForCausalLMImpl::lora_enabled() const {
  return has_lora() && lora_switch_->on.load(std::memory_order_relaxed);
}

std::vector<std::pair<std::string, torch::Tensor>> QwenForCausalLMImpl::lora_state() const {
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (is_lora_parameter(item.key())) state.emplace_back(item.key(), item.value());
  }
  return state;
}

std::vector<std::pair<std::string, torch::Tensor>> QwenForCausalLMImpl::merged_state() const {
  torch::NoGradGuard no_grad;
  const auto params = named_parameters(/*recurse=*/true);
  const double scaling = lora_options.scaling();
  std::vector<std::pair<std::string, torch::Tensor>> merged;
  for (const auto& item : params) {
    const std::string& name = item.key();
    if (is_lora_parameter(name)) continue;
    torch::Tensor value = item.value().detach().clone();
    const std::string weight = ".weight";
    if (has_lora() && name.size() > weight.size() &&
        name.compare(name.size() - weight.size(), weight.size(), weight) == 0) {
      const std::string module = name.substr(0, name.size() - weight.size());
      const torch::Tensor* a = params.find(module + ".lora_A.weight");
      if (a != nullptr) {
        // Under TP both factors are this rank's: B_local A (column-parallel) or B A_local
        // (row-parallel) is exactly this rank's shard of the merged weight.
        const torch::Tensor& b = params[module + ".lora_B.weight"];
        value += (torch::matmul(b.to(torch::kFloat), a->to(torch::kFloat)) * scaling)
                     .to(value.scalar_type());
      }
    }
    merged.emplace_back(name, std::move(value));
  }
  return merged;
}

bool is_frozen_parameter(const std::string& hf_name) {
  const std::string suffix = ".mlp.gate.e_score_correction_bias";
  return hf_name.size() >= suffix.size() &&
         hf_name.compare(hf_name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace aspen::model
