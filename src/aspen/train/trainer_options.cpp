#include "aspen/train/trainer_options.h"

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {

void TrainerOptions::validate() const {
  optimizer.validate();
  check_input(compute_dtype == torch::kFloat || compute_dtype == torch::kBFloat16 ||
                  compute_dtype == torch::kDouble || compute_dtype == torch::kHalf,
              "compute dtype must be float32, bfloat16, float16 or float64",
              "trainer.compute_dtype");
  check_input(max_tokens_per_micro_batch >= 1, "must be >= 1",
              "trainer.max_tokens_per_micro_batch");
}

}  // namespace aspen::train
