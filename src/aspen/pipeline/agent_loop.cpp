#include "aspen/pipeline/agent_loop.h"
#include "aspen/pipeline/imports.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <thread>

#include "aspen/serve/agent_endpoint.h"
#include "aspen/serve/generation_service.h"
#include "aspen/serve/openai_server.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "aspen/util/mutex.h"

namespace aspen::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// The trajectory an episode trains on: its last segment (agent_loop.h), the program's
// reward or its fault. `engine_s`: the seconds its calls spent in the engine; the rest
// of the program's time is its tool wait.
Trajectory episode_trajectory(const AgentEpisode& episode, double engine_s) {
  Trajectory t;
  if (!episode.segments.empty()) {
    const AgentSegment& s = episode.segments.back();
    t.prompt = s.prompt;
    t.response = s.response;
    t.logprobs = s.logprobs;
    t.versions = s.versions;
    t.loss_mask = s.loss_mask;
    t.turn_starts = s.turn_starts;
    t.turn_rewards.assign(s.turn_starts.size(), std::numeric_limits<float>::quiet_NaN());
    t.tool_calls = s.tool_calls;
    t.tool_errors = s.tool_errors;
  }
  t.tool_wait_s = std::max(0.0, episode.wall_s - engine_s);
  if (episode.ok()) {
    t.end = TrajectoryEnd::kDone;
    t.reward = episode.reward;
    t.has_reward = true;
  } else {
    t.end = TrajectoryEnd::kEnvironment;
    t.error = episode.error;
  }
  return t;
}

// A call's failure: the program's fault (HTTP 400) or the run ending (503).
serve::StreamEvent call_failure(const std::string& error, bool unavailable) {
  serve::StreamEvent event;
  event.kind = serve::StreamEvent::Kind::kFailed;
  event.error = error;
  event.client_error = !unavailable;
  event.unavailable = unavailable;
  return event;
}

}  // namespace

// Everything behind the loop: the endpoint (whose GenerationService it is), the runner
// threads and the calls between them and the instance's thread.
class AgentLoop::State : public serve::GenerationService {
 public:
  State(AgentLoopOptions options, std::shared_ptr<const Tokenizer> tokenizer,
        ChatTemplate chat_template)
      : options_(std::move(options)),
        sessions_(tokenizer, options_.on_break, options_.limits),
        api_key_(AgentSessions::random_secret()) {
    const std::string who = "rollout.agent";
    check_input(!options_.command.empty(), "no agent program given", who + ".command");
    check_input(options_.max_concurrent >= 1, "must be >= 1", who + ".max_concurrent");
    check_input(options_.timeout_s > 0, "must be > 0", who + ".timeout_s");
    check_input(options_.max_turn_tokens >= 1, "must be >= 1", "rollout.max_tokens");
    const auto end = tokenizer->token_to_id("<|im_end|>");
    check_input(end.has_value(),
                "the tokenizer has no <|im_end|> token, which ends a turn in the chat template",
                who);
    end_of_turn_ = *end;
    serve::AgentEndpointOptions endpoint_options;
    endpoint_options.api_key = api_key_;
    endpoint_options.sampling = options_.sampling;
    endpoint_ = std::make_unique<serve::AgentEndpoint>(sessions_, endpoint_options);
    serve::ServeContext context;
    context.model_name = "policy";
    context.tokenizer = tokenizer;
    context.chat_template = std::move(chat_template);
    context.max_model_len = options_.max_model_len;
    serve::ServerOptions server_options;
    server_options.host = "127.0.0.1";
    server_options.port = 0;
    server_options.agent = endpoint_.get();
    // One call per program at a time, plus the probes' threads and some slack for
    // programs that retry while their last connection closes.
    server_options.max_connections = 2 * options_.max_concurrent + serve::kConnectionsForProbes;
    server_ = std::make_unique<serve::OpenAiServer>(context, *this, server_options);
    server_->bind();
    base_url_ = "http://127.0.0.1:" + std::to_string(server_->bound_port()) + "/v1";
    AgentProgramOptions program;
    program.command = options_.command;
    program.base_url = base_url_;
    program.api_key = api_key_;
    program.timeout_s = options_.timeout_s;
    program.max_concurrent = options_.max_concurrent;
    program_ = std::make_unique<AgentProgram>(program, sessions_);
    server_thread_ = std::thread([this] { server_->run(); });
    for (int i = 0; i < options_.max_concurrent; ++i) runners_.emplace_back([this] { run(); });
  }

  ~State() override {
    program_->cancel();
    {
      MutexLock lock(mutex_);
      stopping_ = true;
      jobs_.clear();
      for (auto& [key, trajectory] : running_) fail_call(trajectory, "the run is over", true);
    }
    jobs_cv_.notify_all();
    for (std::thread& runner : runners_) runner.join();
    server_->stop();
    server_thread_.join();
  }

  // GenerationService: a call the endpoint accepted (its id is its session).
  std::shared_ptr<serve::RequestStream> submit(std::vector<GenerationRequest> requests) override {
    auto stream =
        std::make_shared<serve::RequestStream>(std::vector<std::string>{"agent-" + next_id()});
    check_input(requests.size() == 1, "one prompt per call", "agent endpoint");
    GenerationRequest& request = requests.front();
    MutexLock lock(mutex_);
    const auto key = keys_.find(request.id);
    if (stopping_ || key == keys_.end()) {
      // Its program printed its reward between the ledger's check and here.
      stream->push(call_failure(
          stopping_ ? "the run is over" : "the session closed during the call", stopping_));
      return stream;
    }
    Running& trajectory = running_.at(key->second);
    trajectory.call = stream;
    trajectory.submitted = Clock::now();
    NextTurn turn;
    turn.key = key->second;
    turn.context = std::move(request.prompt);
    turn.max_tokens = std::min(request.params.max_tokens, options_.max_turn_tokens);
    turn.turn = trajectory.calls++;
    turn.params = request.params;
    next_.push_back(std::move(turn));
    ready_cv_.notify_all();
    return stream;
  }

  // GenerationService: the call's client went away. A turn not yet handed to the
  // worker is withdrawn; one in the engine runs on and is dropped when it finishes.
  void cancel(const serve::RequestStream& stream) override {
    MutexLock lock(mutex_);
    for (auto& [key, trajectory] : running_) {
      if (trajectory.call.get() != &stream) continue;
      trajectory.call.reset();
      const TrajectoryKey withdrawn = key;
      next_.erase(std::remove_if(next_.begin(), next_.end(),
                                 [&](const NextTurn& t) {
                                   return !(t.key < withdrawn) && !(withdrawn < t.key);
                                 }),
                  next_.end());
    }
  }

  void start(const TrajectoryKey& key, nlohmann::ordered_json row) {
    MutexLock lock(mutex_);
    running_[key] = Running{};
    jobs_.push_back(Job{key, std::move(row)});
    jobs_cv_.notify_one();
  }

  void turn_finished(const TrajectoryKey& key, const Completion& turn) {
    MutexLock lock(mutex_);
    const auto it = running_.find(key);
    if (it == running_.end()) return;  // its program ended meanwhile
    Running& trajectory = it->second;
    trajectory.in_engine = false;
    trajectory.engine_s += std::chrono::duration<double>(Clock::now() - trajectory.submitted).count();
    if (!trajectory.call) return;
    serve::StreamEvent event;
    event.kind = serve::StreamEvent::Kind::kFinished;
    event.completion = turn;
    event.completion.sample_index = 0;  // the call's one sample
    trajectory.call->push(std::move(event));
    trajectory.call.reset();
  }

  void turn_refused(const TrajectoryKey& key, const std::string& error) {
    MutexLock lock(mutex_);
    const auto it = running_.find(key);
    if (it == running_.end()) return;
    it->second.in_engine = false;
    fail_call(it->second, error, false);
  }

  void poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) {
    MutexLock lock(mutex_);
    for (NextTurn& turn : next_) {
      running_.at(turn.key).in_engine = true;
      next.push_back(std::move(turn));
    }
    next_.clear();
    for (Finished& done : finished_) {
      running_.erase(done.key);
      finished.push_back(std::move(done));
    }
    finished_.clear();
  }

  void wait_ready(double seconds) {
    MutexLock lock(mutex_);
    if (!next_.empty() || !finished_.empty() || running_.empty()) return;
    ready_cv_.wait_for(mutex_, std::chrono::duration<double>(seconds));
  }

  int64_t waiting() const {
    MutexLock lock(mutex_);
    return static_cast<int64_t>(std::count_if(running_.begin(), running_.end(),
                                               [](const auto& r) { return !r.second.in_engine; }));
  }

  std::map<std::string, int64_t> counters() const {
    std::map<std::string, int64_t> counters = sessions_.metrics();
    for (const auto& [name, value] : program_->metrics()) counters[name] = value;
    MutexLock lock(mutex_);
    counters["agent_untrained_segments"] = untrained_segments_;
    return counters;
  }

  TokenId end_of_turn() const { return end_of_turn_; }
  const std::string& base_url() const { return base_url_; }

 private:
  struct Job {
    TrajectoryKey key;
    nlohmann::ordered_json row;
  };
  // A started trajectory until the worker polls its end.
  struct Running {
    std::shared_ptr<serve::RequestStream> call;  // the call waiting for its turn
    Clock::time_point submitted;
    int64_t calls = 0;
    double engine_s = 0;
    bool in_engine = false;  // its call's turn was handed to the worker
  };

  void fail_call(Running& trajectory, const std::string& error, bool unavailable)
      REQUIRES(mutex_) {
    if (!trajectory.call) return;
    trajectory.call->push(call_failure(error, unavailable));
    trajectory.call.reset();
  }

  std::string next_id() {
    MutexLock lock(mutex_);
    return std::to_string(next_id_++);
  }

  // A runner thread: one program at a time, to its end.
  void run() {
    for (;;) {
      Job job;
      {
        MutexLock lock(mutex_);
        while (!stopping_ && jobs_.empty()) jobs_cv_.wait(mutex_);
        if (stopping_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      const TrajectoryKey key = job.key;
      const AgentEpisode episode = program_->run(job.row, [&](const std::string& session) {
        MutexLock lock(mutex_);
        keys_[session] = key;
      });
      MutexLock lock(mutex_);
      keys_.erase(episode.session);
      const auto it = running_.find(key);
      if (stopping_ || it == running_.end()) continue;
      if (episode.segments.size() > 1) {
        untrained_segments_ += static_cast<int64_t>(episode.segments.size()) - 1;
      }
      // A call still waiting (the program died during it) has nobody left to answer.
      fail_call(it->second, "the agent program ended", false);
      finished_.push_back(Finished{key, episode_trajectory(episode, it->second.engine_s)});
      ready_cv_.notify_all();
    }
  }

  AgentLoopOptions options_;
  AgentSessions sessions_;
  std::string api_key_;
  TokenId end_of_turn_ = 0;
  std::unique_ptr<serve::AgentEndpoint> endpoint_;
  std::unique_ptr<serve::OpenAiServer> server_;
  std::string base_url_;
  std::unique_ptr<AgentProgram> program_;
  std::thread server_thread_;
  std::vector<std::thread> runners_;
  mutable Mutex mutex_;
  CondVar ready_cv_;
  CondVar jobs_cv_;
  std::deque<Job> jobs_ GUARDED_BY(mutex_);
  std::map<std::string, TrajectoryKey> keys_ GUARDED_BY(mutex_);  // open sessions
  std::map<TrajectoryKey, Running> running_ GUARDED_BY(mutex_);
  std::vector<NextTurn> next_ GUARDED_BY(mutex_);
  std::vector<Finished> finished_ GUARDED_BY(mutex_);
  int64_t untrained_segments_ GUARDED_BY(mutex_) = 0;
  int64_t next_id_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
};

AgentLoop::AgentLoop(AgentLoopOptions options, std::shared_ptr<const Tokenizer> tokenizer,
                     ChatTemplate chat_template)
    : state_(std::make_unique<State>(std::move(options), std::move(tokenizer),
                                     std::move(chat_template))) {}

AgentLoop::~AgentLoop() = default;

void AgentLoop::start(const TrajectoryKey& key, nlohmann::ordered_json row) {
  state_->start(key, std::move(row));
}
void AgentLoop::turn_finished(const TrajectoryKey& key, const Completion& turn) {
  state_->turn_finished(key, turn);
}
bool AgentLoop::turn_refused(const TrajectoryKey& key, const std::string& error) {
  state_->turn_refused(key, error);
  return true;
}
void AgentLoop::poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) {
  state_->poll(next, finished);
}
void AgentLoop::wait_ready(double seconds) { state_->wait_ready(seconds); }
int64_t AgentLoop::waiting() const { return state_->waiting(); }
TokenId AgentLoop::end_of_turn() const { return state_->end_of_turn(); }
std::map<std::string, int64_t> AgentLoop::counters() const { return state_->counters(); }
std::string AgentLoop::base_url() const { return state_->base_url(); }

}  // namespace aspen::pipeline
