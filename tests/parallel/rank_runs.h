// The `aspen train` configurations the multi-rank tests run (as key=value overrides),
// shared so every such test trains the same small models.
#pragma once

#include <string>

namespace aspen::testing {

// A 1-layer model that SFT brings to ~30% on 1-digit addition, so rewards vary within
// groups and every update has a real gradient (not Adam-amplified rounding noise).
inline std::string tiny_rank_run(const std::string& extra = "") {
  return "model.hidden_size=32 model.num_layers=1 model.head_dim=8 model.intermediate_size=64 "
         "train.sft_steps=300 train.sft_lr=5e-3 train.sft_batch_size=8 train.iterations=3 "
         "rollout.n=4 rollout.prompts_per_iteration=4 data.train_size=200 data.eval_size=16 "
         "'data.task_options={digits: 1}' logging.console=false logging.eval_every=0 "
         "train.lr=1e-3 " +
         extra;
}

// A 2-layer model on 2-digit addition whose vocabulary is padded to 320 rows (the
// built-in tokenizer has 259 tokens), so TP 2 can split heads, MLP and vocabulary.
inline std::string tp_rank_run(const std::string& extra = "") {
  return "model.hidden_size=64 model.num_layers=2 model.head_dim=16 model.intermediate_size=128 "
         "model.vocab_multiple=64 train.sft_steps=500 train.sft_batch_size=16 train.sft_lr=5e-3 "
         "train.iterations=3 rollout.n=4 rollout.prompts_per_iteration=4 data.train_size=2000 "
         "data.eval_size=16 logging.console=false logging.eval_every=0 train.lr=1e-3 "
         "algorithm.kl_coef=0.01 " +
         extra;
}

}  // namespace aspen::testing
