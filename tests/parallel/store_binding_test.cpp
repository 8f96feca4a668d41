// Where rank 0's rendezvous store (an unauthenticated c10d TCPStore) listens: loopback
// on a single node, MASTER_ADDR's address on several, never every interface. Checked on
// the real sockets (/proc/net/tcp, tcp6) of running `aspen launch` jobs.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "aspen/parallel/dist_env.h"
#include "aspen/parallel/launcher.h"
#include "aspen/util/error.h"
#include "parallel/binaries.h"
#include "run_command.h"
#include "spawn.h"

namespace aspen::parallel {
namespace {

struct TcpSocket {
  std::string local_address;  // "127.0.0.1", or the 32 hex digits of an IPv6 address
  int local_port = 0;
  int state = 0;  // 0x0A LISTEN, 0x01 ESTABLISHED
};

// Every TCP socket of this network namespace, from /proc/net/tcp and /proc/net/tcp6.
std::vector<TcpSocket> tcp_sockets() {
  std::vector<TcpSocket> sockets;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(testing::read_text(table));
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      if (!(fields >> slot >> local >> remote >> state)) continue;
      const size_t colon = local.find(':');
      if (colon == std::string::npos) continue;
      TcpSocket s;
      const std::string hex = local.substr(0, colon);
      s.local_port = std::stoi(local.substr(colon + 1), nullptr, 16);
      s.state = std::stoi(state, nullptr, 16);
      if (hex.size() == 8) {  // IPv4, in host (little-endian) byte order
        const unsigned long v = std::stoul(hex, nullptr, 16);
        s.local_address = std::to_string(v & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
                          std::to_string((v >> 16) & 0xff) + "." + std::to_string((v >> 24) & 0xff);
      } else {
        s.local_address = hex;
      }
      sockets.push_back(s);
    }
  }
  return sockets;
}

constexpr int kListen = 0x0A;
constexpr int kEstablished = 0x01;

std::set<std::string> listen_addresses(int port) {
  std::set<std::string> addresses;
  for (const auto& s : tcp_sockets()) {
    if (s.local_port == port && s.state == kListen) addresses.insert(s.local_address);
  }
  return addresses;
}

int accepted_connections(int port) {
  int n = 0;
  for (const auto& s : tcp_sockets()) n += s.local_port == port && s.state == kEstablished;
  return n;
}

std::string joined(const std::set<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text.empty() ? "<none>" : text;
}

// Runs `nodes` launchers of `ranks_per_node` ranks each (all-reducing until stopped) on
// `port` with --master-addr `master_addr`, waits until every rank is connected to the
// store, and returns the addresses the store's port listens on.
std::set<std::string> store_listen_addresses(int nodes, int ranks_per_node,
                                             const std::string& master_addr, int port) {
  std::vector<std::unique_ptr<testing::Spawned>> launchers;
  const std::string log = ::testing::TempDir() + "/aspen_store_binding_" +
                          std::to_string(getpid()) + "_" + std::to_string(port) + ".log";
  std::remove(log.c_str());
  for (int node = nodes - 1; node >= 0; --node) {
    std::vector<std::string> argv = {kAspen, "launch", "--nproc-per-node"};
    for (const std::string& arg :
         {std::to_string(ranks_per_node), std::string("--nnodes"), std::to_string(nodes),
          std::string("--node-rank"), std::to_string(node), std::string("--master-addr"),
          master_addr, std::string("--master-port"), std::to_string(port)}) {
      argv.push_back(arg);
    }
    for (const char* arg : {"--rdzv-timeout", "60", "--grace-period", "1", "--"})
      argv.push_back(arg);
    argv.push_back(kWorker);
    for (const char* arg : {"allreduce_loop", "-1", "0"}) argv.push_back(arg);
    launchers.push_back(std::make_unique<testing::Spawned>(argv, log));
  }
  const int world = nodes * ranks_per_node;
  // Every rank's store client connected: the listener seen is the store the job uses.
  const bool connected = testing::wait_until(
      [&] { return !listen_addresses(port).empty() && accepted_connections(port) >= world; }, 60);
  const std::set<std::string> addresses = listen_addresses(port);
  for (auto& launcher : launchers) launcher->signal_and_reap(SIGTERM, 10);
  EXPECT_TRUE(connected) << "the ranks never all connected to the store on port " << port
                         << "; listening on: " << joined(addresses) << "\n"
                         << testing::read_text(log);
  std::remove(log.c_str());
  return addresses;
}

TEST(StoreBinding, SingleNodeStoreListensOnLoopbackOnly) {
  const int port = find_free_port();
  const auto addresses = store_listen_addresses(1, 2, "127.0.0.1", port);
  EXPECT_EQ(addresses, std::set<std::string>{"127.0.0.1"}) << joined(addresses);
}

TEST(StoreBinding, SingleNodeStoreIgnoresAnotherMasterAddr) {
  // One node: nothing off the machine needs the store, so not even MASTER_ADDR's address.
  const int port = find_free_port();
  const auto addresses = store_listen_addresses(1, 2, "127.0.0.2", port);
  EXPECT_EQ(addresses, std::set<std::string>{"127.0.0.1"}) << joined(addresses);
}

TEST(StoreBinding, MultiNodeStoreListensOnMasterAddrOnly) {
  // Two "nodes" on this machine meeting at 127.0.0.2: the store binds that address alone.
  const int port = find_free_port();
  const auto addresses = store_listen_addresses(2, 1, "127.0.0.2", port);
  EXPECT_EQ(addresses, std::set<std::string>{"127.0.0.2"}) << joined(addresses);
}

TEST(StoreBinding, MasterAddrNotOfThisMachineIsNamed) {
  // 192.0.2.1 (TEST-NET-1) is nobody's address: node 0's rank 0 cannot listen there.
  const auto result = testing::run_command(
      kAspen + " launch --nproc-per-node 1 --nnodes 2 --node-rank 0 --master-addr 192.0.2.1 " +
      "--master-port " + std::to_string(find_free_port()) + " --grace-period 1 -- " + kWorker +
      " rendezvous");
  EXPECT_NE(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("192.0.2.1"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("cannot listen there"), std::string::npos) << result.output;
  EXPECT_LT(result.seconds, 30.0);
}

EnvLookup lookup_from(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(StoreBinding, StoreAddressIsLoopbackOnlyWhenEveryRankIsLocal) {
  const std::map<std::string, std::string> base = {
      {"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.2"}};
  auto with = [&](const std::string& local_world) {
    auto vars = base;
    if (!local_world.empty()) vars["LOCAL_WORLD_SIZE"] = local_world;
    return read_dist_env(lookup_from(vars));
  };
  EXPECT_EQ(with("4").local_world_size, 4);
  EXPECT_EQ(store_address(with("4")), "127.0.0.1");  // 4 of 4 ranks here: one node
  EXPECT_EQ(store_address(with("2")), "10.0.0.2");   // 2 of 4: several nodes
  EXPECT_EQ(store_address(with("")), "10.0.0.2");    // unknown: MASTER_ADDR, as before
  EXPECT_EQ(store_address(read_dist_env(
                lookup_from({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "10.0.0.2"}}))),
            "127.0.0.1");  // a lone rank
}

TEST(StoreBinding, BadLocalWorldSizeIsNamed) {
  for (const std::string bad : {"0", "5", "x", "1"}) {  // "1": LOCAL_RANK 1 is not below it
    try {
      read_dist_env(lookup_from(
          {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", bad}}));
      ADD_FAILURE() << "LOCAL_WORLD_SIZE=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("LOCAL_WORLD_SIZE"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace aspen::parallel
