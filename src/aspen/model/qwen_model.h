// Qwen2 / Qwen2.5 / Qwen3 / Qwen3-MoE decoder-only language model over packed batches.
//
// Shapes: T = packed tokens, B = sequences, C = hidden_size, V = vocab_size,
// L = num_hidden_layers.
//
// named_parameters() are exactly the HF checkpoint keys, in HF order:
//   model.embed_tokens.weight [V, C]
//   model.layers.{i}.input_layernorm.weight [C]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias with attention_bias)
//   model.layers.{i}.self_attn.{q,k}_norm.weight [D]              (Qwen3)
//   model.layers.{i}.post_attention_layernorm.weight [C]
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight               (dense layers)
//   model.layers.{i}.mlp.gate.weight [E, C], mlp.experts.{j}.{gate,up,down}_proj.weight
//                                                      (Qwen3-MoE sparse layers)
//   model.norm.weight [C]
//   lm_head.weight [V, C]        absent with tie_word_embeddings (the embedding is the head)
//
// Compute dtype = parameter dtype: build (fp32), then ->to(torch::kBFloat16) or
// ->to(device) as for any torch module. RMSNorm statistics, RoPE, attention
// softmax and the log-prob head run in fp32 regardless.
//
// Tensor parallelism: built with a TensorParallel of size t > 1 (one model per TP
// rank, all ranks calling the same methods in the same order), every parameter is
// this rank's shard per model/tp_layout.h - same HF names, local shapes (e.g.
// embed_tokens/lm_head [V/t, C], q_proj [H/t*D, C]). Attention runs on the local
// heads, the MLP is column- then row-parallel, the embedding and the head are
// vocab-parallel; forward's hidden and token_logprobs' outputs are the full results,
// identical on every rank, and each parameter's gradient is the shard of the
// single-process gradient. The default context (size 1) computes exactly what this
// model computed before TP existed. forward_paged (rollout) runs under TP too: the
// paged KV cache then holds this rank's kv heads (local_kv_heads()) and the hidden
// states are the full ones; the caller gathers the vocab-parallel logits.
//
// Expert parallelism (a MoE model built with an ExpertParallel of size p > 1,
// parallel/expert_parallel.h): every sparse layer holds E/p of its experts and
// exchanges tokens with the other EP ranks by all-to-all (qwen_moe_block.h); all other
// parameters are whole. EP ranks run their own batches but must call every forward
// and backward together.
//
// Pipeline parallelism (built with a PipelineStages of size p > 1,
// parallel/pipeline_stages.h): the model is one stage. It holds the decoder layers of
// pp.layers() only (under their global HF names: the other layers are parameterless
// placeholders in `layers`), the embedding on the first stage, the final norm and the
// head on the last; with tied embeddings the last stage holds embed_tokens as its head
// (the caller keeps the two copies equal by pp.sum_tied_gradient on its gradient,
// train/pipeline_runner.h). A stage computes forward_stage; the whole-model methods
// (forward, token_logprobs, forward_paged) refuse, since no stage can run them alone.
// load_state takes a whole checkpoint and copies this stage's part. With TP too (a
// grid of PP x TP ranks) a stage is a TP model of its layers: the TP group spans the
// stage's ranks, the pipeline group the same TP rank of every stage, and the
// activations between stages are the full (replicated) hidden states.
//
// Thread safety: forward/token_logprobs mutate nothing and may run concurrently
// (e.g. under torch::NoGradGuard in several rollout threads); load_state and
// ->to() must not overlap with them.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/logprob_head.h"
#include "aspen/model/imports.h"
#include "aspen/model/lora.h"
#include "aspen/model/qwen_decoder_layer.h"
#include "aspen/model/rms_norm_layer.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

// HF Qwen{2,3}Model: embeddings, layers and the final norm.
struct QwenModelImpl : torch::nn::Module {
  explicit QwenModelImpl(const ModelConfig& config, const TensorParallel& tp = {},
                         const ExpertParallel& ep = {}, const PipelineStages& pp = {});

  // input_ids [T] int64, cu_seqlens [B+1] int64, positions [T] int64 (RoPE only;
  // masking always follows cu_seqlens) -> hidden [T, C] after the final norm.
  // `log`: where the sparse (MoE) layers record their routing, for the
  // load-balancing loss (null: not recorded).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& cu_seqlens,
                        const torch::Tensor& positions, MoeRoutingLog* log = nullptr);
  // One pipeline stage's part of forward: `input` is input_ids [T] on the first stage,
  // the previous stage's hidden [T, C] on the others; returns hidden [T, C] after this
  // stage's layers (and the final norm on the last stage). With one stage: forward.
  torch::Tensor forward_stage(const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                              const torch::Tensor& positions, MoeRoutingLog* log = nullptr);
  // forward_stage with the batch checked (ids in range on the first stage, [T, C]
  // hidden states elsewhere, offsets that pack T tokens; aspen::Error otherwise) and
  // undefined `positions` meaning 0, 1, ... restarting at every sequence. `log`: where
  // this stage's sparse layers record their routing (appended to what it holds).
  torch::Tensor checked_forward_stage(const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                                      const torch::Tensor& positions = {},
                                      MoeRoutingLog* log = nullptr);
  // The decoder layers this model runs, in order: all of them, or its stage's.
  std::vector<QwenDecoderLayerImpl*> stage_layers() const;
  // The token embedding, input_ids [T] -> [T, C]: vocab-parallel under TP (one
  // all-reduce). Callers that run the layers themselves (activation recompute) must
  // use this instead of embed_tokens(), which only knows this rank's rows.
  torch::Tensor embed(const torch::Tensor& input_ids);
  // Rollout step over the paged KV cache: input_ids/positions [T] of the new
  // tokens -> hidden [T, C]; k/v of the new tokens are written into the cache.
  // Under TP the cache (batch) holds this rank's kv heads and the step issues the
  // layers' all-reduces: every TP rank must run the same step.
  torch::Tensor forward_paged(const torch::Tensor& input_ids, const torch::Tensor& positions,
                              const PagedBatch& batch, MoeRoutingLog* log = nullptr);

  ModelConfig config;
  TensorParallel tp;
  PipelineStages pp;
  LayerRange layer_range;   // the decoder layers this stage holds (all without PP)
  int64_t vocab_begin = 0;  // first vocabulary row of embed_tokens (and lm_head) on this rank
  torch::nn::Embedding embed_tokens{nullptr};  // [V/t, C]; null on a stage without it
  torch::nn::ModuleList layers{nullptr};       // [L]; other stages' layers are placeholders
  RMSNorm norm{nullptr};                       // null except on the last stage
};
TORCH_MODULE(QwenModel);

// HF Qwen{2,3}ForCausalLM.
struct QwenForCausalLMImpl : torch::nn::Module {
  // aspen::Error for an invalid config, a TP size the config cannot split
  // (validate_tp_size names the field) or an inconsistent TP context.
  // aspen::Error too for a PP size the layers cannot split. PP with TP (or EP): each
  // stage is a TP (EP) model over its own TP (EP) group.
  explicit QwenForCausalLMImpl(const ModelConfig& config, const TensorParallel& tp = {},
                               const ExpertParallel& ep = {}, const PipelineStages& pp = {});

  // input_ids [T] int64, cu_seqlens [B+1] int64 -> hidden [T, C] after the final
  // norm. positions [T] int64 drive RoPE; undefined (the default) means 0, 1, ...
  // restarting at every sequence. Attention never crosses cu_seqlens boundaries
  // either way. Bad ids/offsets/positions: aspen::Error. (One forward with a
  // default argument, not overloads: ModuleHolder::operator() needs a unique forward.)
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& cu_seqlens,
                        const torch::Tensor& positions = {});
  // This pipeline stage's forward (QwenModelImpl::forward_stage), batch checked as in
  // forward; positions undefined means 0, 1, ... per sequence.
  torch::Tensor forward_stage(const torch::Tensor& input, const torch::Tensor& cu_seqlens,
                              const torch::Tensor& positions = {}, MoeRoutingLog* log = nullptr);
  // Rollout step over the paged KV cache (see QwenModelImpl::forward_paged).
  // Inference only; ids are trusted (the engine validated them on admission).
  // `log`: the sparse layers' routing of the step's tokens (null: not recorded).
  torch::Tensor forward_paged(const torch::Tensor& input_ids, const torch::Tensor& positions,
                              const PagedBatch& batch, MoeRoutingLog* log = nullptr) {
    require_whole_model("forward_paged");
    return model->forward_paged(input_ids, positions, batch, log);
  }
  // aspen::Error naming `method` on a pipeline stage (which holds part of the model).
  void require_whole_model(const std::string& method) const;
  // Whether `hf_name` (a key of a whole checkpoint) is a parameter another pipeline
  // stage holds: never without PP.
  bool on_other_stage(const std::string& hf_name) const;
  // Lays each layer's q/k/v and gate/up projections out in one weight matrix, so an
  // inference forward (no gradient wanted) runs one GEMM for each group
  // (model/fused_projection.h). Names, shapes and autograd identity of the parameters
  // are unchanged; in-place updates (weight publish, optimizer) keep the layout, a
  // dtype/device change undoes it (the separate GEMMs then run) until it is called
  // again. Idempotent; not thread-safe (call before the model is shared).
  void fuse_projections();

  // The [V, C] head matrix: lm_head.weight, or the embedding when tied. Under TP,
  // this rank's rows [model->vocab_begin, model->vocab_begin + V/t). Under PP the
  // last stage's only (aspen::Error on the others).
  torch::Tensor lm_head_weight() const;
  // Key/value heads this rank holds (K / t, or 1 when kv heads are replicated): the
  // heads its paged KV cache stores.
  int64_t local_kv_heads() const;

  // The log-prob head on rows of forward's hidden: hidden [R, C] (the same on every
  // TP rank), targets [R] int64 in [0, V) -> [R] fp32 logprobs (+ entropy). Under TP
  // the vocab-parallel head (model/vocab_parallel_logprobs.h), else chunked_logprobs.
  // This is the one head every caller that scores hidden states should use.
  TokenLogprobs head_logprobs(const torch::Tensor& hidden, const torch::Tensor& targets,
                              const LogprobHeadOptions& options = {});

  // log p(next token) for every token but the last of each sequence, in packed
  // order: [T - B'] fp32 (B' = non-empty sequences), entropy likewise when
  // options.with_entropy. Never materialises [T, V] (kernels/logprob_head.h).
  TokenLogprobs token_logprobs(const torch::Tensor& input_ids, const torch::Tensor& cu_seqlens,
                               const LogprobHeadOptions& options = {});

  // Copies (casting dtype, moving device) every parameter from `weights`, keyed by
  // HF name. aspen::Error naming `source` and the key for a missing key, an
  // unexpected key or a wrong shape; nothing is copied unless all keys check out.
  // Under TP each tensor may be either FULL (the HF shape: this rank takes its shard
  // with take_shard) or already this rank's shard (exactly the local shape).
  // Tolerated extras: lm_head.weight of a tied model (some exports keep it),
  // rotary_emb.inv_freq buffers (older exports) and, under expert parallelism, the
  // experts other EP ranks hold.
  void load_state(const std::map<std::string, torch::Tensor>& weights,
                  const std::string& source = "weights");

  // (HF name, parameter) in HF order, for saving a checkpoint. Under TP these are
  // this rank's shards (local shapes), not full tensors: gather them (tp_layout.h
  // says along which dim) for an HF checkpoint. Under EP only this rank's experts.
  std::vector<std::pair<std::string, torch::Tensor>> hf_state() const;

  // LoRA (model/lora.h). attach_lora registers adapters on the projections `options`
  // targets and freezes every base parameter (requires_grad false), so the optimizer
  // and the gradients see the adapters only (their stale gradients are dropped); once per model (aspen::Error naming the
  // option for a second call or an invalid option). After it, named_parameters(),
  // hf_state() and load_state() include the adapters' names (".lora_A.weight",
  // ".lora_B.weight") beside the base's.
  void attach_lora(const LoraOptions& options);
  bool has_lora() const { return lora_options.enabled(); }
  // The adapters on (default) or off for every caller: off, the model computes its base
  // (e.g. a rollout instance that merged the adapters into its weights). For one
  // thread's scope use LoraDisabled (model/lora.h); lora_enabled() ignores that.
  void set_lora_enabled(bool enabled);
  bool lora_enabled() const;
  // (name, parameter) of the adapters only, in HF order (this rank's shards under TP).
  std::vector<std::pair<std::string, torch::Tensor>> lora_state() const;
  // Copies the adapters' values from `weights`, which must hold exactly the adapters'
  // names (full or this rank's shards under TP, as load_state); aspen::Error naming
  // `source` and the key otherwise, with nothing copied.
  void load_lora_state(const std::map<std::string, torch::Tensor>& weights,
                       const std::string& source = "adapter");
  // The base parameters with every adapter merged into its target (W + scaling B A), in
  // HF order and the base's dtype, as new tensors: a plain HF checkpoint of what the
  // model computes with its adapters on. Without LoRA: hf_state() cloned.
  std::vector<std::pair<std::string, torch::Tensor>> merged_state() const;

  ModelConfig config;
  TensorParallel tp;
  ExpertParallel ep;
  PipelineStages pp;
  LoraOptions lora_options;  // rank 0 until attach_lora
  QwenModel model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // [V/t, C]; null when config.tie_word_embeddings

 private:
  std::shared_ptr<LoraSwitch> lora_switch_ = std::make_shared<LoraSwitch>();
};
TORCH_MODULE(QwenForCausalLM);

// Parameters that are part of the checkpoint but never train (requires_grad false
// wherever a model is built or copied): DeepSeek-V3's router bias
// (mlp.gate.e_score_correction_bias, qwen_moe_block.h).
bool is_frozen_parameter(const std::string& hf_name);

}  // namespace aspen::model
