// One check the tensor- and expert-parallel rank programs share: the rollout engine over
// a model split across ranks generates what the engine over the one-process model
// generates - a seeded sampled group and a greedy request, chunked prefill and decode -
// with every rank stepping the same requests, as the ranks of one instance do.
// aspen::Error naming `where` on the first difference (tokens, or log-probs beyond
// rtol 1e-4 / atol 2e-5).
#pragma once

#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/error.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
using namespace aspen::rollout;

inline void check_paged_rollout_matches(QwenForCausalLM& reference, QwenForCausalLM& sharded,
                                        const std::string& where) {
  EngineConfig config;
  config.kv_cache_bytes = 1 << 20;
  config.max_num_batched_tokens = 6;  // prompts of 9 tokens prefill in chunks
  std::vector<GenerationRequest> requests(2);
  requests[0].id = "sampled";
  requests[0].prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5};
  requests[0].params.max_tokens = 12;
  requests[0].params.seed = 7;
  requests[0].params.ignore_eos = true;
  requests[0].n = 3;
  requests[1].id = "greedy";
  requests[1].prompt = {2, 7, 1, 8};
  requests[1].params.max_tokens = 10;
  requests[1].params.temperature = 0.0;
  requests[1].params.ignore_eos = true;
  const std::vector<Completion> want = RolloutEngine(reference, config).generate(requests);
  const std::vector<Completion> got = RolloutEngine(sharded, config).generate(requests);
  check_input(got.size() == want.size(), "completion count differs", where);
  const auto text = [](const std::vector<TokenId>& ids) {
    std::string out;
    for (TokenId id : ids) out += " " + std::to_string(id);
    return out;
  };
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string what =
        "rollout " + want[i].request_id + " sample " + std::to_string(want[i].sample_index);
    check_input(got[i].token_ids == want[i].token_ids,
                what + ": tokens" + text(got[i].token_ids) + " vs" + text(want[i].token_ids) +
                    " in one process",
                where);
    const torch::Tensor a = torch::tensor(got[i].logprobs), b = torch::tensor(want[i].logprobs);
    const double diff = a.numel() == 0 ? 0.0 : (a - b).abs().max().item<double>();
    check_input(torch::allclose(a, b, /*rtol=*/1e-4, /*atol=*/2e-5),
                what + " log-probs differ from one process by up to " + std::to_string(diff),
                where);
  }
}

}  // namespace aspen::testing
