#include "aspen/sim/model_cost.h"

#include <string>

#include "aspen/sim/imports.h"
#include "aspen/util/error.h"

namespace aspen::sim {
namespace {

// Weights of one decoder layer's attention block (norms included).
void attention_weights(const ModelConfig& c, double& all, double& matmul, double& pair_flops,
                       double& kv_elements) {
  const auto h = static_cast<double>(c.hidden_size);
  const auto heads = static_cast<double>(c.num_attention_heads);
  if (c.is_mla()) {
    const MlaConfig& m = c.mla;
    const auto qk = static_cast<double>(m.qk_head_dim());
    const auto latent = static_cast<double>(m.kv_lora_rank);
    const auto rope = static_cast<double>(m.qk_rope_head_dim);
    const auto v = static_cast<double>(m.v_head_dim);
    double mm = 0;
    if (m.q_lora_rank > 0) {
      const auto q_rank = static_cast<double>(m.q_lora_rank);
      mm += h * q_rank + q_rank * heads * qk;
      all += q_rank;  // q_a_layernorm
    } else {
      mm += h * heads * qk;
    }
    mm += h * (latent + rope);                                       // kv_a_proj_with_mqa
    mm += latent * heads * (static_cast<double>(m.qk_nope_head_dim) + v);  // kv_b_proj
    mm += heads * v * h;                                             // o_proj
    all += latent;                                                   // kv_a_layernorm
    matmul += mm;
    all += mm;
    pair_flops += 2.0 * heads * (qk + v);
    kv_elements += latent + rope;
    return;
  }
  const auto kv = static_cast<double>(c.num_key_value_heads);
  const auto d = static_cast<double>(c.head_dim);
  const double mm = h * heads * d + 2.0 * h * kv * d + heads * d * h;
  matmul += mm;
  all += mm;
  if (c.attention_bias) all += heads * d + 2.0 * kv * d;
  if (c.has_qk_norm()) all += 2.0 * d;
  pair_flops += 2.0 * heads * (d + d);
  kv_elements += 2.0 * kv * d;
}

// Adapter parameters r (in + out) of an MLP of width `width` (gate, up, down) on the
// targeted projections.
double mlp_adapters(const LoraShape& lora, double h, double width) {
  const auto r = static_cast<double>(lora.rank);
  double n = 0;
  for (const std::string& target : lora.targets) {
    if (target == "gate_proj" || target == "up_proj" || target == "down_proj") n += r * (h + width);
  }
  return n;
}

// Adapter parameters of one layer's attention projections (q, k, v, o).
double attention_adapters(const ModelConfig& c, const LoraShape& lora) {
  const auto r = static_cast<double>(lora.rank);
  const auto h = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.num_attention_heads) * static_cast<double>(c.head_dim);
  const double kv = static_cast<double>(c.num_key_value_heads) * static_cast<double>(c.head_dim);
  double n = 0;
  for (const std::string& target : lora.targets) {
    const bool attention =
        target == "q_proj" || target == "k_proj" || target == "v_proj" || target == "o_proj";
    if (!attention) continue;
    check_input(!c.is_mla(),
                "targets " + target +
                    ", but multi-head latent attention (deepseek_v3) has no LoRA layout",
                "train.lora.targets", "target the MLP projections only");
    n += r * (h + (target == "q_proj" || target == "o_proj" ? q : kv));
  }
  return n;
}

void count_adapters(const ModelConfig& config, const LoraShape& lora, ModelCost& cost) {
  if (lora.rank <= 0) return;
  const auto h = static_cast<double>(config.hidden_size);
  const MoeConfig& moe = config.moe;
  double all = 0, matmul = 0;
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    const double attention = attention_adapters(config, lora);
    all += attention;
    matmul += attention;
    if (config.is_moe() && config.is_sparse_layer(layer)) {
      const auto m = static_cast<double>(moe.moe_intermediate_size);
      const double shared =
          moe.n_shared_experts > 0
              ? mlp_adapters(lora, h, static_cast<double>(moe.n_shared_experts) * m)
              : 0.0;
      const double expert = lora.experts ? mlp_adapters(lora, h, m) : 0.0;
      all += shared + static_cast<double>(moe.num_experts) * expert;
      matmul += shared + static_cast<double>(moe.num_experts_per_tok) * expert;
    } else {
      const double mlp = mlp_adapters(lora, h, static_cast<double>(config.intermediate_size));
      all += mlp;
      matmul += mlp;
    }
  }
  cost.adapter_parameters = all;
  cost.adapter_matmul_parameters = matmul;
}

}  // namespace

ModelCost model_cost(const ModelConfig& config, const LoraShape& lora) {
  config.validate("simulated model");
  ModelCost cost;
  cost.layers = config.num_hidden_layers;
  cost.hidden = config.hidden_size;
  const auto h = static_cast<double>(config.hidden_size);
  const auto vocab = static_cast<double>(config.vocab_size);
  const MoeConfig& moe = config.moe;
  double all = vocab * h + h;  // embedding, final norm
  all += config.tie_word_embeddings ? 0.0 : vocab * h;
  double matmul = vocab * h;  // the head, once even when tied
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    all += 2.0 * h;  // input and post-attention norms
    attention_weights(config, all, matmul, cost.attention_flops_per_pair,
                      cost.kv_elements_per_token);
    if (config.is_moe() && config.is_sparse_layer(layer)) {
      const auto experts = static_cast<double>(moe.num_experts);
      const double expert = 3.0 * h * static_cast<double>(moe.moe_intermediate_size);
      const double shared = static_cast<double>(moe.n_shared_experts) * expert;
      const double router = h * experts;
      all += experts * expert + shared + router;
      if (moe.scoring == RouterScoring::kSigmoidGroupLimited) all += experts;  // score bias
      matmul += static_cast<double>(moe.num_experts_per_tok) * expert + shared + router;
    } else {
      const double mlp = 3.0 * h * static_cast<double>(config.intermediate_size);
      all += mlp;
      matmul += mlp;
    }
  }
  cost.parameters = all;
  cost.matmul_parameters = matmul;
  count_adapters(config, lora, cost);
  return cost;
}

double causal_pairs(double length, double context) {
  return length * context + length * (length + 1.0) / 2.0;
}

}  // namespace aspen::sim
