// Tokenizer throughput benchmark (`aspen bench tokenizer`): encodes a few hundred KB
// of English prose, generated deterministically from sentences in the source, with
// the tokenizer.json at `tokenizer_path`.
// Reports JSON: {"mb_per_s", "tokens_per_s", "bytes", "tokens", "threads": 1,
// "seconds", "passes", "cold_mb_per_s", "batch": {"threads", "mb_per_s",
// "tokens_per_s"}}. The single-thread figure repeats whole passes for at least
// `min_seconds` after one untimed warm-up pass (the BPE word cache is warm, as in a
// long-running trainer); "cold_mb_per_s" is that first pass. The batch figure runs
// encode_batch over the text split into paragraphs on all cores.
// Throws aspen::Error if the tokenizer cannot be loaded.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench/imports.h"

namespace aspen::bench {

nlohmann::json run_tokenizer_bench(const std::string& tokenizer_path, double min_seconds);

}  // namespace aspen::bench
