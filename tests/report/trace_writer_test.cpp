// TraceWriter: the file is Chrome trace-event JSON with the registered tracks and
// every span, a disabled writer touches nothing, and spans recorded from several
// threads (while flushes run) all arrive.
#include "aspen/report/trace_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::report {
namespace {

namespace fs = std::filesystem;

fs::path fresh_trace_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("aspen_trace_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

nlohmann::json load(const fs::path& path) {
  return nlohmann::json::parse(read_file(path));
}

// tid -> track name, from the thread_name metadata events.
std::map<int, std::string> track_names(const nlohmann::json& trace) {
  std::map<int, std::string> names;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  }
  return names;
}

// tid -> number of complete events.
std::map<int, int> span_counts(const nlohmann::json& trace) {
  std::map<int, int> counts;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") counts[e["tid"].get<int>()] += 1;
  }
  return counts;
}

TEST(TraceWriter, WritesChromeTraceJsonWithTracksSpansInstantsAndCounters) {
  const fs::path dir = fresh_trace_dir("basic");
  const fs::path path = dir / "trace.json";
  {
    TraceWriter writer(path.string());
    ASSERT_TRUE(writer.enabled());
    const int rollout = writer.track("rollout/0");
    const int trainer = writer.track("trainer");
    EXPECT_NE(rollout, trainer);
    EXPECT_EQ(writer.track("rollout/0"), rollout);  // same name, same track

    const auto t0 = writer.origin();
    using std::chrono::milliseconds;
    writer.span(rollout, "step", t0 + milliseconds(1), t0 + milliseconds(3), {{"tokens", 42}});
    writer.span(rollout, "step", t0 + milliseconds(3), t0 + milliseconds(4));
    writer.span(rollout, "step", t0 + milliseconds(4), t0 + milliseconds(4));  // empty is fine
    {
      TraceSpan a(writer, trainer, "micro_batch");
      a.set_arg("rows", 8);
    }
    { TraceSpan b(writer, trainer, "optimizer_step", {{"version", 1}}); }
    writer.instant(trainer, "publish_weights");
    writer.counter("queue_depth", 3);
    writer.flush();

    const nlohmann::json trace = load(path);
    EXPECT_EQ(trace["displayTimeUnit"], "ms");
    ASSERT_TRUE(trace["traceEvents"].is_array());
    const auto names = track_names(trace);
    EXPECT_EQ(names.at(rollout), "rollout/0");
    EXPECT_EQ(names.at(trainer), "trainer");
    EXPECT_EQ(names.size(), 2u);
    const auto counts = span_counts(trace);
    EXPECT_EQ(counts.at(rollout), 3);
    EXPECT_EQ(counts.at(trainer), 2);

    bool saw_first = false, saw_rows = false, saw_instant = false, saw_counter = false;
    for (const auto& e : trace["traceEvents"]) {
      EXPECT_EQ(e["pid"], 1);
      if (e["ph"] == "X" && e.contains("args") && e["args"].contains("tokens")) {
        saw_first = true;
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1000.0);  // microseconds
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000.0);
        EXPECT_EQ(e["args"]["tokens"], 42);
      }
      if (e["ph"] == "X" && e["name"] == "micro_batch") {
        saw_rows = true;
        EXPECT_EQ(e["args"]["rows"], 8);
        EXPECT_GE(e["dur"].get<double>(), 0.0);
      }
      if (e["ph"] == "i") saw_instant = e["name"] == "publish_weights" && e["tid"] == trainer;
      if (e["ph"] == "C") saw_counter = e["args"]["queue_depth"] == 3;
    }
    EXPECT_TRUE(saw_first && saw_rows && saw_instant && saw_counter);

    writer.instant(rollout, "after_flush");
  }  // the destructor flushes the late event
  const nlohmann::json trace = load(path);
  bool late = false;
  for (const auto& e : trace["traceEvents"]) late = late || e["name"] == "after_flush";
  EXPECT_TRUE(late);
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  fs::remove_all(dir);
}

TEST(TraceWriter, DisabledWriterWritesNothing) {
  const fs::path dir = fresh_trace_dir("disabled");
  {
    TraceWriter writer("");
    EXPECT_FALSE(writer.enabled());
    const int track = writer.track("rollout/0");
    EXPECT_EQ(track, 0);
    writer.span(track, "step", writer.origin(), TraceWriter::Clock::now());
    writer.span(17, "unknown track is fine when disabled", writer.origin(), writer.origin());
    {
      TraceSpan span(writer, track, "scoped");
      span.set_arg("k", 1);
    }
    writer.instant(track, "x");
    writer.counter("c", 1);
    writer.flush();
    EXPECT_EQ(writer.event_count(), 0u);
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(TraceWriter, ConcurrentSpansFromSeveralThreadsAllAppear) {
  const fs::path dir = fresh_trace_dir("threads");
  const fs::path path = dir / "trace.json";
  constexpr int kThreads = 4;
  constexpr int kSpans = 250;
  std::vector<int> tracks(kThreads);
  {
    TraceWriter writer(path.string());
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        tracks[t] = writer.track("worker/" + std::to_string(t));
        for (int i = 0; i < kSpans; ++i) {
          TraceSpan span(writer, tracks[t], "work", {{"i", i}});
        }
      });
    }
    for (int i = 0; i < 5; ++i) writer.flush();  // periodic flushes race with recording
    for (auto& thread : threads) thread.join();
    writer.flush();
  }

  const nlohmann::json trace = load(path);
  const auto names = track_names(trace);
  const auto counts = span_counts(trace);
  ASSERT_EQ(names.size(), static_cast<size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(names.at(tracks[t]), "worker/" + std::to_string(t));
    EXPECT_EQ(counts.at(tracks[t]), kSpans);
  }
  fs::remove_all(dir);
}

TEST(TraceWriter, RejectsUnknownTracksAndBackwardSpans) {
  const fs::path dir = fresh_trace_dir("errors");
  {
    TraceWriter writer((dir / "trace.json").string());
    const int track = writer.track("a");
    EXPECT_THROW(writer.span(track + 1, "x", writer.origin(), writer.origin()), Error);
    EXPECT_THROW(writer.instant(0, "x"), Error);
    EXPECT_THROW(
        writer.span(track, "x", writer.origin() + std::chrono::seconds(1), writer.origin()), Error);
    // A bad track inside TraceSpan is logged and dropped, never thrown from the destructor.
    EXPECT_NO_THROW({ TraceSpan span(writer, 99, "dropped"); });
  }
  fs::remove_all(dir);
}

TEST(TraceWriter, FlushNamesThePathItCannotWrite) {
  TraceWriter writer("/nonexistent_dir_for_aspen_test/trace.json");
  try {
    writer.flush();
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_NE(e.input().find("/nonexistent_dir_for_aspen_test/trace.json"), std::string::npos);
  }
}

TEST(TraceWriter, DestructorSkipsTheRewriteWhenNothingChanged) {
  const fs::path dir = fresh_trace_dir("unchanged");
  const fs::path path = dir / "trace.json";
  {
    TraceWriter writer(path.string());
    writer.track("a");
    writer.flush();
    fs::remove(path);  // a rewrite would bring it back
  }
  EXPECT_FALSE(fs::exists(path));
  fs::remove_all(dir);
}

TEST(TraceWriter, MergedTracesOfTwoProcessesShareOneTimeAxis) {
  const fs::path dir = fresh_trace_dir("merge");
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  TraceWriter first(a, 1, "rank 0");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // later time zero
  TraceWriter second(b, 2, "rank 1");
  const auto start = TraceWriter::Clock::now();
  const auto end = start + std::chrono::milliseconds(1);
  first.span(first.track("trainer"), "same moment", start, end);
  second.span(second.track("instance"), "same moment", start, end);
  first.flush();
  second.flush();
  merge_trace_files(a, {b});
  const nlohmann::json merged = nlohmann::json::parse(read_file(a));
  std::map<int64_t, double> ts;  // pid -> ts of its span
  std::set<std::string> processes;
  for (const auto& event : merged["traceEvents"]) {
    if (event["ph"] == "X") ts[event["pid"].get<int64_t>()] = event["ts"].get<double>();
    if (event["name"] == "process_name") processes.insert(event["args"]["name"]);
  }
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_NEAR(ts[1], ts[2], 1.0);  // microseconds
  EXPECT_GT(ts[1], 19000.0);       // on the first writer's axis
  EXPECT_EQ(processes, (std::set<std::string>{"rank 0", "rank 1"}));
  EXPECT_THROW(merge_trace_files(a, {(dir / "missing.json").string()}), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace aspen::report
