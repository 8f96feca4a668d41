#include "aspen/sim/simulated_instance.h"

#include <algorithm>
#include <limits>
#include <string>

#include "aspen/sim/imports.h"
#include "aspen/util/error.h"

namespace aspen::sim {

SimulatedInstance::SimulatedInstance(const CostModel& costs, int64_t max_num_seqs,
                                     int64_t max_num_batched_tokens, const ToolModel* tools)
    : costs_(costs),
      max_num_seqs_(max_num_seqs),
      max_num_batched_tokens_(max_num_batched_tokens),
      kv_capacity_(costs.kv_capacity_tokens()),
      tools_(tools != nullptr && tools->multi_turn() ? tools : nullptr) {
  check_input(max_num_seqs >= 1 && max_num_batched_tokens >= 1,
              "max_num_seqs " + std::to_string(max_num_seqs) + ", max_num_batched_tokens " +
                  std::to_string(max_num_batched_tokens),
              "rollout.max_num_seqs / rollout.max_num_batched_tokens", "both >= 1");
}

void SimulatedInstance::add_unit(int64_t unit, int64_t prompt_tokens,
                                 const std::vector<int64_t>& lengths, int64_t version,
                                 int64_t group, std::vector<int64_t> samples) {
  check_input(!lengths.empty() && prompt_tokens >= 1, "a unit of " +
                  std::to_string(lengths.size()) + " samples and a " +
                  std::to_string(prompt_tokens) + "-token prompt",
              "simulated rollout instance", "at least one sample and one prompt token");
  check_input(prompt_tokens + 1 <= kv_capacity_,
              "a " + std::to_string(prompt_tokens) + "-token prompt", "simulated rollout instance",
              "its KV cache holds " + std::to_string(kv_capacity_) + " tokens");
  Unit u;
  u.id = unit;
  u.prompt = prompt_tokens;
  u.version = version;
  u.unfinished = static_cast<int64_t>(lengths.size());
  for (int64_t length : lengths) u.targets.push_back(std::max<int64_t>(1, length));
  u.lengths.assign(lengths.size(), 0);
  u.group = group;
  if (samples.empty()) {
    for (size_t i = 0; i < lengths.size(); ++i) samples.push_back(static_cast<int64_t>(i));
  }
  u.samples = std::move(samples);
  if (tools_ != nullptr) {
    for (int64_t target : u.targets) u.ends.push_back(tools_->turn_ends(target));
  }
  size_t slot = units_.size();
  if (!free_units_.empty()) {
    slot = free_units_.back();
    free_units_.pop_back();
    units_[slot] = std::move(u);
  } else {
    units_.push_back(std::move(u));
  }
  Seq seq;
  seq.unit = slot;
  seq.fanout = static_cast<int64_t>(lengths.size());
  waiting_.push_back(seq);
}

void SimulatedInstance::resume_unit(int64_t unit, int64_t prompt_tokens,
                                    const std::vector<int64_t>& lengths,
                                    const std::vector<int64_t>& generated, int64_t version,
                                    int64_t group, std::vector<int64_t> samples) {
  check_input(generated.size() == lengths.size(),
              std::to_string(generated.size()) + " progress entries for " +
                  std::to_string(lengths.size()) + " samples",
              "simulated rollout instance", "one per sample");
  add_unit(unit, prompt_tokens, lengths, version, group, std::move(samples));
  // Replace the unit's one prompt sequence by one sequence per unfinished sample.
  const Seq prompt_seq = waiting_.back();
  waiting_.pop_back();
  Unit& u = units_[prompt_seq.unit];
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (generated[i] >= u.targets[i]) {
      u.lengths[i] = generated[i];
      u.unfinished -= 1;
      continue;
    }
    Seq seq;
    seq.unit = prompt_seq.unit;
    seq.index = static_cast<int64_t>(i);
    seq.generated = generated[i];
    if (tools_ != nullptr) {
      // Its finished turns' observations come back with it (the cut output holds them).
      const std::vector<int64_t>& ends = u.ends[i];
      while (seq.turn + 1 < static_cast<int64_t>(ends.size()) &&
             ends[static_cast<size_t>(seq.turn)] <= seq.generated) {
        seq.turn += 1;
        seq.observed += tools_->observation_tokens;
      }
    }
    waiting_.push_back(seq);
  }
  check_input(u.unfinished > 0, "a resumed unit with every sample finished",
              "simulated rollout instance", "resume only units with an unfinished sample");
}

int64_t SimulatedInstance::longest_unfinished(size_t unit) const {
  int64_t longest = -1;
  for (const Seq& s : running_) {
    if (s.unit == unit && s.generated < target_of(s)) longest = std::max(longest, s.generated);
  }
  for (const Seq& s : waiting_) {
    if (s.unit == unit && s.generated < target_of(s)) longest = std::max(longest, s.generated);
  }
  for (const Seq& s : tool_wait_) {
    if (s.unit == unit) longest = std::max(longest, s.generated);
  }
  return longest;
}

SimulatedUnitProgress SimulatedInstance::remove_unit(size_t unit) {
  Unit& u = units_[unit];
  SimulatedUnitProgress progress{u.id, u.lengths, u.version};
  std::vector<Seq> still;
  for (const Seq& s : running_) {
    if (s.unit != unit) {
      still.push_back(s);
      continue;
    }
    // A prompt sequence that has not forked holds no sample's tokens yet.
    if (s.fanout == 1) progress.generated[static_cast<size_t>(s.index)] = s.generated;
    release(s);
  }
  running_ = std::move(still);
  std::deque<Seq> waiting;
  for (const Seq& s : waiting_) {
    if (s.unit != unit) {
      waiting.push_back(s);
    } else if (s.fanout == 1) {
      progress.generated[static_cast<size_t>(s.index)] = s.generated;
    }
  }
  waiting_ = std::move(waiting);
  std::vector<Seq> out;
  for (const Seq& s : tool_wait_) {
    if (s.unit != unit) {
      out.push_back(s);
      continue;
    }
    progress.generated[static_cast<size_t>(s.index)] = s.generated;
    release(s);
  }
  tool_wait_ = std::move(out);
  u.unfinished = 0;
  free_units_.push_back(unit);
  return progress;
}

void SimulatedInstance::recompute_running() {
  while (!running_.empty()) {
    preempt_newest();
    counters_.preemptions -= 1;  // not a memory preemption
  }
}

QueueState SimulatedInstance::queue_state() const {
  QueueState state;
  state.running = static_cast<int64_t>(running_.size());
  for (const Seq& s : running_) {
    state.outstanding_tokens += s.prefill_left + target_of(s) - s.generated;
  }
  for (const Seq& s : waiting_) {
    const Unit& unit = units_[s.unit];
    state.waiting += s.fanout;  // a group counts n
    if (s.fanout > 1) {
      for (int64_t t : unit.targets) state.outstanding_tokens += t;
      state.outstanding_tokens += unit.prompt;
    } else {
      state.outstanding_tokens += target_of(s) - s.generated;
    }
  }
  // A trajectory out on a tool call is load too: it comes back to decode here.
  for (const Seq& s : tool_wait_) {
    state.running += 1;
    state.outstanding_tokens += target_of(s) - s.generated;
  }
  state.total_blocks = kv_capacity_;
  state.free_blocks = kv_capacity_ - kv_used_;
  return state;
}

int64_t SimulatedInstance::stop_of(const Seq& seq) const {
  if (tools_ == nullptr) return target_of(seq);
  const std::vector<int64_t>& ends = units_[seq.unit].ends[static_cast<size_t>(seq.index)];
  return ends[static_cast<size_t>(std::min<int64_t>(seq.turn, static_cast<int64_t>(ends.size()) - 1))];
}

double SimulatedInstance::next_tool_return() const {
  double next = std::numeric_limits<double>::infinity();
  for (const Seq& s : tool_wait_) next = std::min(next, s.tool_until);
  return next;
}

void SimulatedInstance::return_tool_calls(double now) {
  std::vector<Seq> still;
  for (Seq s : tool_wait_) {
    // Within a nanosecond: the simulator's clock counts whole nanoseconds, so the event
    // scheduled at a return time may read a hair before it.
    if (s.tool_until > now + 1e-9) {
      still.push_back(s);
      continue;
    }
    // Back with its KV: only the observation is computed, and its next token sampled.
    const int64_t observation = tools_->observation_tokens;
    s.observed += observation;
    s.kv_own += observation;
    kv_used_ += observation;
    s.prefill_left = observation;
    running_.push_back(s);
  }
  tool_wait_ = std::move(still);
}

bool SimulatedInstance::admit_front() {
  Seq seq = waiting_.front();
  Unit& unit = units_[seq.unit];
  // Without a resident sibling the prompt is computed again (its blocks were freed).
  const int64_t prompt = unit.resident == 0 ? unit.prompt : 0;
  const int64_t own = seq.generated + seq.observed;  // recomputed after a preemption
  if (kv_used_ + prompt + own + 1 > kv_capacity_) return false;
  waiting_.pop_front();
  kv_used_ += prompt + own;
  seq.kv_own = own;
  seq.prefill_left = std::max<int64_t>(1, prompt + own);
  unit.resident += 1;
  running_.push_back(seq);
  return true;
}

void SimulatedInstance::add_token(Seq& seq, int64_t tokens) {
  seq.generated += tokens;
  seq.kv_own += tokens;
  kv_used_ += tokens;
}

void SimulatedInstance::release(const Seq& seq) {
  Unit& unit = units_[seq.unit];
  kv_used_ -= seq.kv_own;
  unit.resident -= 1;
  if (unit.resident == 0) kv_used_ -= unit.prompt;
}

void SimulatedInstance::preempt_newest() {
  Seq seq = running_.back();
  running_.pop_back();
  release(seq);
  counters_.preemptions += 1;
  seq.prefill_left = 0;
  seq.kv_own = 0;
  waiting_.push_front(seq);
}

double SimulatedInstance::context_of(const Seq& seq) const {
  return static_cast<double>(units_[seq.unit].prompt + seq.generated + seq.observed);
}

double SimulatedInstance::start_segment(double now) {
  segment_start_ = now;
  segment_duration_ = 0;
  segment_steps_ = 0;
  segment_prefill_ = false;
  if (tools_ != nullptr) {
    return_tool_calls(now);
    if (tool_idle_since_ >= 0) counters_.tool_wait_seconds += now - tool_idle_since_;
    tool_idle_since_ = -1;
    if (running_.empty() && waiting_.empty()) {
      if (!tool_wait_.empty()) tool_idle_since_ = now;  // nothing to run but tool calls
      return 0.0;
    }
  }
  if (idle()) return 0.0;
  // Scheduler::schedule: the running sequences in order, each its pending tokens within
  // the budget, preempting the newest while a decode's next token does not fit.
  int64_t budget = max_num_batched_tokens_;
  bool preempted = false;
  segment_chunks_.clear();
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    const Seq& s = running_[i];
    const int64_t pending = s.prefill_left > 0 ? s.prefill_left : 1;
    const int64_t n = std::min(pending, budget);
    bool self = false;
    // A prefill's tokens were reserved when it joined; a decode needs one more slot.
    while (s.prefill_left == 0 && kv_used_ + 1 > kv_capacity_) {
      self = i + 1 == running_.size();
      preempt_newest();
      preempted = true;
      if (self) break;
    }
    if (self) break;
    segment_chunks_.push_back(n);
    budget -= n;
    if (s.prefill_left == 0) kv_used_ += 1;  // hold the slot while planning
  }
  for (size_t i = 0; i < segment_chunks_.size(); ++i) {
    if (running_[i].prefill_left == 0) kv_used_ -= 1;
  }
  // Admit waiting sequences only if nothing had to be preempted: memory is tight.
  while (!preempted && budget > 0 && !waiting_.empty() &&
         static_cast<int64_t>(running_.size()) < max_num_seqs_ && admit_front()) {
    const int64_t n = std::min(running_.back().prefill_left, budget);
    segment_chunks_.push_back(n);
    budget -= n;
  }
  check_input(!segment_chunks_.empty() || !running_.empty(),
              "a waiting sequence that does not fit the KV cache alone",
              "simulated rollout instance", "raise rollout.tp or simulate.memory_utilization");
  bool prefill = false;
  int64_t decoding = 0;
  double context = 0;
  for (size_t i = 0; i < segment_chunks_.size(); ++i) {
    if (running_[i].prefill_left > 0) {
      prefill = true;
    } else {
      decoding += 1;
      context += context_of(running_[i]);
    }
  }
  if (prefill || segment_chunks_.size() < running_.size() || (!waiting_.empty() && budget == 0)) {
    // One step: prefill chunks, or a budget that could not serve everyone. (A waiting
    // sequence the KV cache or max_num_seqs keeps out stays out until one finishes.)
    int64_t prefill_tokens = 0;
    double pairs = 0;
    for (size_t i = 0; i < segment_chunks_.size(); ++i) {
      const Seq& s = running_[i];
      if (s.prefill_left == 0) continue;
      const Unit& unit = units_[s.unit];
      // Tokens of this sequence (prompt included) computed before the chunk.
      const int64_t total = unit.prompt + s.generated + s.observed;
      const int64_t before = std::max<int64_t>(0, total - s.prefill_left);
      pairs += causal_pairs(static_cast<double>(segment_chunks_[i]), static_cast<double>(before));
      prefill_tokens += segment_chunks_[i];
    }
    segment_prefill_ = true;
    segment_steps_ = 1;
    segment_duration_ = costs_.engine_step_s(decoding, context, prefill_tokens, pairs);
    return segment_duration_;
  }
  // Decode only, everyone: identical steps until a sequence finishes or the KV cache is
  // full.
  int64_t steps = std::numeric_limits<int64_t>::max();
  for (const Seq& s : running_) steps = std::min(steps, stop_of(s) - s.generated);
  const int64_t fit = (kv_capacity_ - kv_used_) / std::max<int64_t>(1, decoding);
  segment_steps_ = std::max<int64_t>(1, std::min(steps, fit));
  segment_duration_ = costs_.decode_steps_s(segment_steps_, decoding, context);
  return segment_duration_;
}

double SimulatedInstance::cut_segment(double now) {
  if (segment_prefill_ || segment_steps_ <= 1) return segment_end();
  double context = 0;
  for (const Seq& s : running_) context += context_of(s);
  const auto decoding = static_cast<int64_t>(running_.size());
  const int64_t done =
      costs_.decode_steps_within(now - segment_start_, decoding, context, segment_steps_);
  segment_steps_ = std::min(segment_steps_, done + 1);  // the step in flight ends
  segment_duration_ = costs_.decode_steps_s(segment_steps_, decoding, context);
  return segment_end();
}

std::vector<SimulatedUnitDone> SimulatedInstance::finish_segment() {
  std::vector<SimulatedUnitDone> done;
  if (segment_steps_ == 0) return done;
  int64_t scheduled = 0;
  if (segment_prefill_) {
    std::vector<Seq> next;
    next.reserve(running_.size());
    for (size_t i = 0; i < running_.size(); ++i) {
      Seq s = running_[i];
      const int64_t chunk = i < segment_chunks_.size() ? segment_chunks_[i] : 0;
      scheduled += chunk;
      if (chunk > 0 && s.prefill_left == 0) {
        add_token(s, 1);
      } else if (chunk > 0) {
        s.prefill_left -= chunk;
        if (s.prefill_left == 0) {
          add_token(s, 1);  // the step that completes a prefill samples a token
          if (s.fanout > 1) {
            // The prompt is done: every sample's first token, the others forked
            // behind it sharing the prompt's KV.
            const int64_t fanout = s.fanout;
            s.fanout = 1;
            next.push_back(s);
            for (int64_t j = 1; j < fanout; ++j) {
              Seq child;
              child.unit = s.unit;
              child.index = j;
              units_[s.unit].resident += 1;
              add_token(child, 1);
              next.push_back(child);
            }
            continue;
          }
        }
      }
      next.push_back(s);
    }
    running_ = std::move(next);
  } else {
    for (Seq& s : running_) add_token(s, segment_steps_);
    scheduled = static_cast<int64_t>(running_.size()) * segment_steps_;
  }
  counters_.steps += segment_steps_;
  counters_.scheduled_tokens += scheduled;
  counters_.busy_seconds += segment_duration_;
  segment_steps_ = 0;
  // Finished sequences leave; a unit is done with its last sample.
  std::vector<Seq> still;
  still.reserve(running_.size());
  const double end = segment_start_ + segment_duration_;
  for (const Seq& s : running_) {
    if (s.prefill_left == 0 && s.generated < target_of(s) && s.generated >= stop_of(s)) {
      // The end of a turn: out on a tool call, its KV kept.
      Seq out = s;
      const Unit& unit = units_[s.unit];
      out.tool_until = end + tools_->latency_s(unit.group, unit.samples[static_cast<size_t>(s.index)],
                                               s.turn);
      out.turn += 1;
      tool_wait_.push_back(out);
      counters_.tool_calls += 1;
      continue;
    }
    if (s.prefill_left > 0 || s.generated < target_of(s)) {
      still.push_back(s);
      continue;
    }
    Unit& unit = units_[s.unit];
    unit.lengths[static_cast<size_t>(s.index)] = s.generated;
    release(s);
    unit.unfinished -= 1;
    if (unit.unfinished == 0) {
      done.push_back(SimulatedUnitDone{unit.id, unit.lengths, unit.version});
      free_units_.push_back(s.unit);
    }
  }
  running_ = std::move(still);
  return done;
}

}  // namespace aspen::sim
