#include "aspen/rollout/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "aspen/rollout/decode_graphs.h"
#include "aspen/rollout/device_sampler.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/sampler.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/seconds_since.h"

namespace aspen::rollout {
namespace {

// The group sample index of a request's j-th sample.
int64_t sample_of(const GenerationRequest& request, int64_t j) {
  return request.sample_indices.empty() ? j : request.sample_indices[static_cast<size_t>(j)];
}

uint64_t mix_seed(uint64_t seed, uint64_t sample) {
  uint64_t x = seed + 0x9E3779B97F4A7C15ULL * (sample + 1);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

torch::ScalarType parameter_dtype(QwenForCausalLM& model) {
  return model->lm_head_weight().scalar_type();
}

}  // namespace

RolloutEngine::RolloutEngine(QwenForCausalLM model, EngineConfig config,
                             std::shared_ptr<const Tokenizer> tokenizer)
    : config_(std::move(config)), tokenizer_(std::move(tokenizer)), seed_stream_(config_.seed) {
  // Under tensor parallelism the cache holds this rank's kv heads; every TP rank of the
  // instance derives the same block count, so their schedulers decide alike.
  ModelConfig model_config = model->config;
  model_config.num_key_value_heads = model->local_kv_heads();
  if (config_.max_model_len <= 0) config_.max_model_len = model_config.max_position_embeddings;
  // A padded vocabulary (Qwen checkpoints, the built-in model under TP): rows past the
  // tokenizer's vocabulary have no text, so they are never sampled.
  if (tokenizer_ != nullptr) {
    for (int64_t id = tokenizer_->vocab_size(); id < model_config.vocab_size; ++id) {
      padded_ids_.push_back(static_cast<TokenId>(id));
    }
  }
  const torch::ScalarType dtype = parameter_dtype(model);
  if (config_.num_blocks <= 0) {
    config_.num_blocks =
        KvCache::blocks_for_budget(model_config, config_.block_size, dtype, config_.kv_cache_bytes);
  }
  // CUDA graphs pad a decode batch to its bucket; the padding rows use one extra cache
  // block past the pool's (decode_graphs.h).
  // With device_code_path off CUDA, the padded decode steps run eagerly (no capture).
  const std::string graphs_unsupported =
      DecodeGraphs::unsupported_reason(model, /*require_cuda=*/!config_.device_code_path);
  const bool decode_graphs = config_.cuda_graphs && graphs_unsupported.empty();
  if (config_.cuda_graphs && model->lm_head_weight().is_cuda() && !decode_graphs) {
    log_info("rollout: decode steps run eagerly, without CUDA graphs: " + graphs_unsupported);
  }
  cache_ = std::make_unique<KvCache>(model_config, config_.num_blocks + (decode_graphs ? 1 : 0),
                                     config_.block_size, dtype, model->lm_head_weight().device());
  pool_ = std::make_unique<BlockPool>(config_.num_blocks);
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerConfig{config_.block_size, config_.max_num_seqs, config_.max_num_batched_tokens,
                      config_.enable_prefix_caching},
      *pool_);
  model->eval();
  // A dense model has no routing to record (and completions then carry none).
  config_.record_routed_experts = config_.record_routed_experts && model->config.is_moe();
  runner_ = std::make_unique<ModelRunner>(std::move(model), *cache_, config_.record_routed_experts,
                                          config_.device_code_path);
  if (decode_graphs) runner_->enable_decode_graphs(config_.num_blocks, config_.max_num_seqs);
}

void RolloutEngine::add_request(GenerationRequest request) {
  const std::string source =
      "request " + (request.id.empty() ? std::to_string(next_request_index_) : request.id);
  request.params.validate(source);
  check_input(request.n >= 1, "n must be >= 1", source);
  check_input(!request.prompt.empty(), "the prompt has no tokens", source);
  const int64_t vocab = runner_->model()->config.vocab_size;
  for (TokenId id : request.prompt) {
    check_input(id >= 0 && id < vocab,
                "prompt token id " + std::to_string(id) + " is outside the vocabulary", source);
  }
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  check_input(prompt_len < config_.max_model_len,
              "prompt of " + std::to_string(prompt_len) + " tokens does not fit max_model_len " +
                  std::to_string(config_.max_model_len),
              source);
  const int64_t longest = std::min(prompt_len + request.params.max_tokens, config_.max_model_len);
  check_input((longest + config_.block_size - 1) / config_.block_size <= config_.num_blocks,
              "one sample of " + std::to_string(longest) +
                  " tokens needs more KV blocks than the cache has (" +
                  std::to_string(config_.num_blocks) + ")",
              source, "raise kv_cache_bytes or lower max_tokens");
  check_input(request.params.stop.empty() || tokenizer_ != nullptr, "stop strings need a tokenizer",
              source);
  if (!request.sample_indices.empty()) {
    check_input(static_cast<int64_t>(request.sample_indices.size()) == request.n,
                std::to_string(request.sample_indices.size()) +
                    " sample indices for n = " + std::to_string(request.n),
                source);
    std::vector<int64_t> sorted = request.sample_indices;
    std::sort(sorted.begin(), sorted.end());
    check_input(
        sorted.front() >= 0 && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
        "sample indices must be distinct and >= 0", source);
  }

  const GeneratedPrefix& prefix = request.resume_from;
  const auto prefix_len = static_cast<int64_t>(prefix.tokens.size());
  const bool resumes = !prefix.empty();  // `prefix` moves into the record below
  if (resumes) {
    check_input(request.n == 1, "a request continuing generated output has one sample, not " +
                                    std::to_string(request.n), source);
    check_input(prefix.logprobs.size() == prefix.tokens.size() &&
                    prefix.policy_versions.size() == prefix.tokens.size() &&
                    (prefix.sampling_logprobs.empty() ||
                     prefix.sampling_logprobs.size() == prefix.tokens.size()),
                "the generated output's log-probs and versions must have one entry per token (" +
                    std::to_string(prefix_len) + ")",
                source);
    check_input(prefix.routed_experts.size() % prefix.tokens.size() == 0,
                std::to_string(prefix.routed_experts.size()) + " routed expert ids for " +
                    std::to_string(prefix_len) + " generated tokens",
                source);
    for (TokenId id : prefix.tokens) {
      check_input(id >= 0 && id < vocab,
                  "generated token id " + std::to_string(id) + " is outside the vocabulary", source);
    }
    check_input(prefix_len < request.params.max_tokens &&
                    prompt_len + prefix_len < config_.max_model_len,
                "the generated output (" + std::to_string(prefix_len) +
                    " tokens) leaves nothing to generate under max_tokens " +
                    std::to_string(request.params.max_tokens) + " / max_model_len " +
                    std::to_string(config_.max_model_len),
                source);
  }

  auto record = std::make_unique<RequestRecord>();
  record->index = next_request_index_++;
  record->remaining_samples = request.n;
  record->request = std::move(request);
  if (!record->request.params.seed) record->request.params.seed = seed_stream_();

  auto sequence = std::make_unique<Sequence>();
  sequence->id = next_sequence_id_++;
  sequence->request_index = record->index;
  sequence->request_id = record->request.id;
  sequence->sample_index = sample_of(record->request, 0);
  sequence->fanout = record->request.n;
  sequence->params = &record->request.params;
  sequence->seed =
      mix_seed(*record->request.params.seed, static_cast<uint64_t>(sequence->sample_index));
  sequence->tokens = record->request.prompt;
  sequence->prompt_len = prompt_len;
  if (resumes) {
    // Prefilled with the prompt like one (chunked, prefix cache); sampling resumes at
    // output position prefix_len of the sample's seed stream.
    const GeneratedPrefix& given = record->request.resume_from;
    sequence->tokens.insert(sequence->tokens.end(), given.tokens.begin(), given.tokens.end());
    sequence->policy_logprobs = given.logprobs;
    sequence->sampling_logprobs =
        given.sampling_logprobs.empty()
            ? std::vector<float>(given.tokens.size(), std::numeric_limits<float>::quiet_NaN())
            : given.sampling_logprobs;
    sequence->policy_versions = given.policy_versions;
    if (config_.record_routed_experts) sequence->routed_experts = given.routed_experts;
    if (!sequence->params->stop.empty()) sequence->text = tokenizer_->decode(given.tokens);
  }
  requests_[record->index] = std::move(record);
  scheduler_->add(std::move(sequence));
}

bool RolloutEngine::has_unfinished() const {
  return !scheduler_->running().empty() || !scheduler_->waiting().empty();
}

bool RolloutEngine::abort_request(const std::string& request_id) {
  for (auto it = requests_.begin(); it != requests_.end(); ++it) {
    if (it->second->request.id != request_id) continue;
    scheduler_->remove_request(it->first);
    requests_.erase(it);
    return true;
  }
  return false;
}

std::vector<Completion> RolloutEngine::cut_request(const std::string& request_id) {
  std::vector<Completion> cut;
  for (auto it = requests_.begin(); it != requests_.end(); ++it) {
    if (it->second->request.id != request_id) continue;
    const GenerationRequest& request = it->second->request;
    for (auto& sequence : scheduler_->take_request(it->first)) {
      // A group prompt not forked yet stands for `fanout` samples with no output.
      const int64_t fanout = sequence->fanout;
      Completion completion = to_completion(*sequence);
      for (int64_t j = 1; j < fanout; ++j) {
        Completion sibling = completion;
        sibling.sample_index = sample_of(request, j);
        cut.push_back(std::move(sibling));
      }
      cut.push_back(std::move(completion));
    }
    requests_.erase(it);
    break;
  }
  std::sort(cut.begin(), cut.end(), [](const Completion& a, const Completion& b) {
    return a.sample_index < b.sample_index;
  });
  return cut;
}

int64_t RolloutEngine::longest_output(const std::string& request_id) const {
  int64_t longest = -1;
  auto visit = [&](const Sequence& s) {
    if (s.request_id == request_id && !s.finished()) {
      longest = std::max(longest, s.num_output_tokens());
    }
  };
  for (const auto& s : scheduler_->running()) visit(*s);
  for (const auto& s : scheduler_->waiting()) visit(*s);
  return longest;
}

void RolloutEngine::fork_group(Sequence& parent, std::vector<Sequence*>& samples) {
  const RequestRecord& record = *requests_.at(parent.request_index);
  const int64_t block_size = config_.block_size;
  const int64_t full_blocks = parent.num_computed_tokens / block_size;
  const bool has_partial = parent.num_computed_tokens % block_size != 0;
  for (int64_t j = 1; j < parent.fanout; ++j) {
    auto child = std::make_unique<Sequence>();
    child->id = next_sequence_id_++;
    child->request_index = parent.request_index;
    child->request_id = parent.request_id;
    child->sample_index = sample_of(record.request, j);
    child->params = parent.params;
    child->seed = mix_seed(*record.request.params.seed, static_cast<uint64_t>(child->sample_index));
    child->tokens = parent.tokens;
    child->prompt_len = parent.prompt_len;
    for (int64_t b = 0; b < full_blocks; ++b) {
      pool_->retain(parent.block_table[b]);
      child->block_table.push_back(parent.block_table[b]);
    }
    child->block_hashes.assign(
        parent.block_hashes.begin(),
        parent.block_hashes.begin() + std::min<size_t>(full_blocks, parent.block_hashes.size()));
    child->num_computed_tokens = full_blocks * block_size;
    if (has_partial) {
      // Copy-on-write of the shared tail block; without a free block the child
      // recomputes the few tail tokens instead.
      if (auto copy = pool_->allocate()) {
        cache_->copy_block(parent.block_table[full_blocks], *copy);
        child->block_table.push_back(*copy);
        child->num_computed_tokens = parent.num_computed_tokens;
      }
    }
    samples.push_back(child.get());
    scheduler_->add_running(std::move(child));
    ++stats_.forks;
  }
  parent.fanout = 1;
}

std::vector<TokenId> RolloutEngine::suppressed_tokens(const Sequence& sequence) const {
  std::vector<TokenId> suppressed = padded_ids_;
  if (sequence.num_output_tokens() >= sequence.params->min_tokens) return suppressed;
  const auto& stops = sequence.params->stop_token_ids;
  suppressed.insert(suppressed.end(), stops.begin(), stops.end());
  if (!sequence.params->ignore_eos) {
    suppressed.insert(suppressed.end(), config_.eos_token_ids.begin(), config_.eos_token_ids.end());
  }
  return suppressed;
}

void RolloutEngine::append_token(Sequence& sequence, TokenId token, float policy_logprob,
                                 float sampling_logprob) {
  const SamplingParams& params = *sequence.params;
  sequence.tokens.push_back(token);
  sequence.policy_logprobs.push_back(policy_logprob);
  sequence.sampling_logprobs.push_back(sampling_logprob);
  sequence.policy_versions.push_back(version_);
  ++stats_.generated_tokens;

  const bool past_min = sequence.num_output_tokens() > params.min_tokens;
  const bool is_eos =
      !params.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                                      token) != config_.eos_token_ids.end();
  const bool is_stop_id = std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(),
                                    token) != params.stop_token_ids.end();
  if (past_min && (is_eos || is_stop_id)) {
    sequence.finish_reason = FinishReason::kStop;
    return;
  }
  if (!params.stop.empty() && past_min) {
    const std::vector<TokenId> output(sequence.tokens.begin() + sequence.prompt_len,
                                      sequence.tokens.end());
    std::string text = tokenizer_->decode(output);
    size_t longest_stop = 0;
    for (const auto& stop : params.stop) longest_stop = std::max(longest_stop, stop.size());
    // Only the tail can hold a new match: the previous text had none.
    const size_t search_from =
        sequence.text.size() > longest_stop + 4 ? sequence.text.size() - longest_stop - 4 : 0;
    size_t cut = std::string::npos;
    for (const auto& stop : params.stop) cut = std::min(cut, text.find(stop, search_from));
    if (cut != std::string::npos) {
      sequence.text = text.substr(0, cut);
      sequence.matched_stop_string = true;
      sequence.finish_reason = FinishReason::kStop;
      return;
    }
    sequence.text = std::move(text);
  }
  if (sequence.num_output_tokens() >= params.max_tokens ||
      static_cast<int64_t>(sequence.tokens.size()) >= config_.max_model_len) {
    sequence.finish_reason = FinishReason::kLength;
  }
}

Completion RolloutEngine::to_completion(Sequence& sequence) {
  Completion completion;
  completion.request_id = sequence.request_id;
  completion.request_index = sequence.request_index;
  completion.sample_index = sequence.sample_index;
  completion.prompt_token_ids.assign(sequence.tokens.begin(),
                                     sequence.tokens.begin() + sequence.prompt_len);
  completion.token_ids.assign(sequence.tokens.begin() + sequence.prompt_len, sequence.tokens.end());
  completion.logprobs = std::move(sequence.policy_logprobs);
  completion.sampling_logprobs = std::move(sequence.sampling_logprobs);
  completion.policy_versions = std::move(sequence.policy_versions);
  completion.routed_experts = std::move(sequence.routed_experts);
  completion.finish_reason = sequence.finish_reason;
  completion.num_preemptions = sequence.num_preemptions;
  if (tokenizer_) {
    completion.text = sequence.matched_stop_string
                          ? sequence.text
                          : tokenizer_->decode(completion.token_ids, /*skip_special_tokens=*/true);
  }
  return completion;
}

std::vector<Completion> RolloutEngine::step() {
  std::vector<Completion> finished;
  if (!has_unfinished()) return finished;
  // Busy time, for the pipeline's idle and skewness accounting.
  struct BusyTimer {
    double& total;
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~BusyTimer() {
      total += seconds_since(start);
    }
  } busy{stats_.busy_seconds};
  const SchedulerStep step = scheduler_->schedule();
  stats_.preemptions += step.num_preempted;
  stats_.prefix_hit_tokens += step.num_prefix_hit_tokens;
  if (step.empty()) return finished;
  ++stats_.steps;
  stats_.scheduled_tokens += step.num_tokens;

  const StepLogits logits = runner_->run(step);
  scheduler_->complete(step);

  // One sampling row per sample; a completed group prompt yields n rows from one logits row.
  std::vector<Sequence*> samples;
  std::vector<int64_t> logits_rows;
  for (size_t r = 0; r < logits.chunk_indices.size(); ++r) {
    Sequence& sequence = *step.chunks[logits.chunk_indices[r]].sequence;
    const size_t before = samples.size();
    samples.push_back(&sequence);
    if (sequence.fanout > 1) fork_group(sequence, samples);
    for (size_t i = before; i < samples.size(); ++i) logits_rows.push_back(static_cast<int64_t>(r));
  }
  if (!samples.empty()) {
    std::vector<SamplingRow> rows;
    rows.reserve(samples.size());
    for (Sequence* sample : samples) {
      rows.push_back(
          {sample->params, sample->seed, sample->num_output_tokens(), suppressed_tokens(*sample)});
    }
    // One logits row per sample: a copy only when a group prompt fans out.
    bool one_per_row = static_cast<int64_t>(logits_rows.size()) == logits.logits.size(0);
    for (size_t i = 0; one_per_row && i < logits_rows.size(); ++i)
      one_per_row = logits_rows[i] == static_cast<int64_t>(i);
    const torch::Tensor row_logits =
        one_per_row ? logits.logits
                    : logits.logits.index_select(
                          0, torch::tensor(logits_rows, torch::kInt64).to(logits.logits.device()));
    // Logits on a device are sampled there: only ids and log-probs come back.
    const std::vector<SampledToken> sampled =
        row_logits.is_cpu() && !config_.device_code_path
            ? sample_tokens(row_logits, rows)
            : sample_tokens_on_device(row_logits, rows);
    for (size_t i = 0; i < samples.size(); ++i) {
      if (logits.routed_experts.defined()) {
        const torch::Tensor row = logits.routed_experts[logits_rows[i]].contiguous();
        const int32_t* ids = row.data_ptr<int32_t>();
        samples[i]->routed_experts.insert(samples[i]->routed_experts.end(), ids, ids + row.numel());
      }
      append_token(*samples[i], sampled[i].token, sampled[i].policy_logprob,
                   sampled[i].sampling_logprob);
      if (token_listener_) {
        token_listener_(samples[i]->request_id, samples[i]->sample_index, sampled[i].token,
                        sampled[i].policy_logprob);
      }
    }
  }

  for (auto& sequence : scheduler_->take_finished()) {
    finished.push_back(to_completion(*sequence));
    auto record = requests_.find(sequence->request_index);
    if (record != requests_.end() && --record->second->remaining_samples == 0)
      requests_.erase(record);
  }
  return finished;
}

int64_t RolloutEngine::decode_graphs_captured() const {
  const DecodeGraphs* graphs = runner_->decode_graphs();
  return graphs == nullptr ? 0 : graphs->graphs_captured();
}

std::vector<Completion> RolloutEngine::generate(std::vector<GenerationRequest> requests) {
  for (auto& request : requests) add_request(std::move(request));
  std::vector<Completion> completions;
  while (has_unfinished()) {
    for (auto& completion : step()) completions.push_back(std::move(completion));
  }
  std::sort(completions.begin(), completions.end(), [](const Completion& a, const Completion& b) {
    return std::tie(a.request_index, a.sample_index) < std::tie(b.request_index, b.sample_index);
  });
  return completions;
}

void RolloutEngine::load_weights(int64_t version,
                                 const std::map<std::string, torch::Tensor>& weights) {
  const std::string source = "weights version " + std::to_string(version);
  QwenForCausalLM& model = runner_->model();
  // A set of the adapters alone (LoRA's adapter-only sync): the base stays as it is.
  const bool adapters_only =
      model->has_lora() && !weights.empty() &&
      std::all_of(weights.begin(), weights.end(),
                  [](const auto& entry) { return is_lora_parameter(entry.first); });
  if (adapters_only) {
    model->load_lora_state(weights, source);
  } else {
    model->load_state(weights, source);
  }
  version_ = version;
  pool_->reset_prefix_cache();
  if (config_.interrupt_on_weight_update) scheduler_->recompute_all();
}

QueueState RolloutEngine::queue_state() const {
  QueueState state;
  state.free_blocks = pool_->num_free();
  state.total_blocks = pool_->num_blocks();
  auto outstanding = [](const Sequence& s) {
    const int64_t to_generate = std::max<int64_t>(0, s.params->max_tokens - s.num_output_tokens());
    return s.num_pending_tokens() + to_generate * s.fanout;
  };
  for (const auto& s : scheduler_->running()) {
    state.running += 1;
    state.outstanding_tokens += outstanding(*s);
  }
  for (const auto& s : scheduler_->waiting()) {
    state.waiting += s->fanout;
    state.outstanding_tokens += outstanding(*s);
  }
  return state;
}

}  // namespace aspen::rollout
