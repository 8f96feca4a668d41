// EngineService: one engine thread shared by many client threads. Requests submitted
// concurrently get exactly the tokens a lone engine.generate() gives them (seeded
// sampling does not depend on what shares the batch); a refused prompt fails only its
// own stream; a cancelled request stops and gives its KV blocks back.
#include "aspen/serve/engine_service.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "aspen/model/weights_init.h"
#include "model/tiny_configs.h"

namespace aspen::serve {
namespace {

QwenForCausalLM tiny_model() {
  QwenForCausalLM model =
      make_random_model(testing::tiny_config(ModelFamily::kQwen3, /*tied=*/true, /*head_dim=*/8), 3);
  init_weights(model, 3, /*initializer_range=*/0.5);  // varied greedy paths
  return model;
}

EngineConfig engine_config() {
  EngineConfig config;
  config.num_blocks = 64;
  config.block_size = 8;
  config.max_num_seqs = 16;
  config.max_model_len = 256;
  config.eos_token_ids = {0};
  return config;
}

GenerationRequest request_of(int i) {
  GenerationRequest request;
  request.id = "client " + std::to_string(i);
  for (int t = 0; t < 3 + i % 5; ++t) request.prompt.push_back((1 + 7 * i + 3 * t) % 50);
  request.params.temperature = i % 3 == 0 ? 0.0 : 1.0;
  request.params.seed = 1000 + i;
  request.params.max_tokens = 6 + i % 7;
  request.n = 1 + i % 2;
  return request;
}

// Drains a stream: completions by sample index, and the tokens its kToken events carried.
struct Drained {
  std::vector<Completion> completions;
  std::vector<std::vector<TokenId>> streamed;
  std::string error;
};

Drained drain(RequestStream& stream, int64_t samples) {
  Drained out;
  out.completions.resize(samples);
  out.streamed.resize(samples);
  for (int64_t finished = 0; finished < samples;) {
    StreamEvent event = stream.next();
    if (event.kind == StreamEvent::Kind::kFailed) {
      out.error = event.error;
      return out;
    }
    if (event.kind == StreamEvent::Kind::kToken) {
      out.streamed[event.sample_index].push_back(event.token);
    } else {
      out.completions[event.sample_index] = std::move(event.completion);
      ++finished;
    }
  }
  return out;
}

TEST(EngineService, ConcurrentClientsGetTheTokensOfALoneGenerate) {
  constexpr int kClients = 12;
  QwenForCausalLM model = tiny_model();
  RolloutEngine reference(model, engine_config());
  std::vector<std::vector<Completion>> expected;
  for (int i = 0; i < kClients; ++i) expected.push_back(reference.generate({request_of(i)}));

  EngineService service(std::make_unique<RolloutEngine>(model, engine_config()));
  std::vector<Drained> got(kClients);
  std::vector<std::thread> clients;
  // All clients submit at once (after every thread has started), so they overlap.
  std::atomic<int> started{0};
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      ++started;
      while (started.load() < kClients) std::this_thread::yield();
      auto stream = service.submit({request_of(i)});
      got[i] = drain(*stream, request_of(i).n);
    });
  }
  for (auto& client : clients) client.join();

  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(got[i].error.empty()) << got[i].error;
    ASSERT_EQ(got[i].completions.size(), expected[i].size());
    for (size_t s = 0; s < expected[i].size(); ++s) {
      EXPECT_EQ(got[i].completions[s].token_ids, expected[i][s].token_ids) << "client " << i;
      EXPECT_EQ(got[i].streamed[s], expected[i][s].token_ids) << "client " << i;
    }
  }
  // They shared steps: fewer steps than the sum of the lone runs'.
  EXPECT_LT(service.snapshot().stats.steps, reference.stats().steps);
}

TEST(EngineService, ARefusedPromptFailsItsOwnStreamOnly) {
  EngineService service(std::make_unique<RolloutEngine>(tiny_model(), engine_config()));
  GenerationRequest bad = request_of(1);
  bad.prompt = {3, 999};  // outside the 50-id vocabulary
  auto refused = service.submit({bad});
  auto fine = service.submit({request_of(2)});
  StreamEvent event = refused->next();
  EXPECT_EQ(event.kind, StreamEvent::Kind::kFailed);
  EXPECT_TRUE(event.client_error);
  EXPECT_NE(event.error.find("999"), std::string::npos) << event.error;
  EXPECT_TRUE(drain(*fine, request_of(2).n).error.empty());
}

TEST(EngineService, ACancelledRequestStopsAndReturnsItsBlocks) {
  EngineService service(std::make_unique<RolloutEngine>(tiny_model(), engine_config()));
  GenerationRequest endless = request_of(0);
  endless.params.max_tokens = 200;
  endless.params.ignore_eos = true;
  auto stream = service.submit({endless});
  ASSERT_EQ(stream->next().kind, StreamEvent::Kind::kToken);
  service.cancel(*stream);

  EngineService::Snapshot snapshot;
  for (int i = 0; i < 500; ++i) {
    snapshot = service.snapshot();
    if (snapshot.in_flight == 0 && snapshot.queue.running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(snapshot.in_flight, 0);
  EXPECT_EQ(snapshot.queue.running, 0);
  EXPECT_EQ(snapshot.queue.free_blocks, snapshot.queue.total_blocks);
  EXPECT_LT(snapshot.stats.generated_tokens, 200);
  // The service still serves.
  auto next = service.submit({request_of(3)});
  EXPECT_TRUE(drain(*next, request_of(3).n).error.empty());
}

TEST(EngineService, SeveralPromptsOfOneClientRequestShareAStream) {
  QwenForCausalLM model = tiny_model();
  RolloutEngine reference(model, engine_config());
  EngineService service(std::make_unique<RolloutEngine>(model, engine_config()));
  auto stream = service.submit({request_of(4), request_of(5)});
  std::map<std::pair<int64_t, int64_t>, std::vector<TokenId>> finished;
  const int64_t samples = request_of(4).n + request_of(5).n;
  for (int64_t done = 0; done < samples;) {
    StreamEvent event = stream->next();
    ASSERT_NE(event.kind, StreamEvent::Kind::kFailed) << event.error;
    if (event.kind != StreamEvent::Kind::kFinished) continue;
    finished[{event.prompt_index, event.sample_index}] = event.completion.token_ids;
    ++done;
  }
  for (int p = 0; p < 2; ++p) {
    const auto expected = reference.generate({request_of(4 + p)});
    for (const auto& completion : expected) {
      EXPECT_EQ((finished[{p, completion.sample_index}]), completion.token_ids);
    }
  }
}

}  // namespace
}  // namespace aspen::serve
