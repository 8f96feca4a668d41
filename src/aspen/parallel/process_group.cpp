// The c10d boundary: the only file that includes c10d's headers.
//  - Gloo's headers: the torch wheel ships ProcessGroupGloo.hpp but not the gloo/*.h it
//    includes. Debian's libgloo-dev provides them (scripts/setup); nothing of Debian's
//    libgloo is linked, the Gloo code that runs is the one compiled into libtorch_cpu.
//    That is sound because this file only names Gloo types through pointers and calls
//    non-inline ProcessGroupGloo members defined in libtorch: it never lays out or
//    constructs a gloo object itself. tests/parallel/distributed_test.cpp (collectives
//    across real rank processes) is the proof.
//  - USE_C10D_GLOO: torch's CMake config does not export it, and ProcessGroupGloo.hpp
//    hides behind it; it is defined here.
//  - ProcessGroupGloo is a c10d::Backend; we hold and call it directly.
//  - NCCL: CUDA tensors go through a ProcessGroupNCCL formed on the first collective on
//    a CUDA tensor (collectives run in the same order on every rank, so every rank
//    forms it at the same point), over its own prefix of the same store. nccl.h comes
//    from the wheel's nvidia-nccl package, the NCCL libtorch_cuda links, so the
//    class's layout here is the library's (cmake/AspenDependencies.cmake).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif

#include "aspen/parallel/process_group.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen {

struct ProcessGroupHandle::Impl {
  int rank = 0;
  int world_size = 1;
  std::chrono::milliseconds collective_timeout{};
  c10::intrusive_ptr<c10d::Store> store;  // the TCPStore, or a PrefixStore over it
  std::shared_ptr<::gloo::transport::Device> device;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;  // formed on the first CUDA collective
  int subgroups_created = 0;  // names each subgroup's store prefix identically on all ranks

  // The backend for a collective on `tensor`: NCCL for CUDA tensors, Gloo otherwise.
  c10d::Backend& backend_for(const torch::Tensor& tensor);
};

c10d::Backend& ProcessGroupHandle::Impl::backend_for(const torch::Tensor& tensor) {
  if (!tensor.is_cuda()) return *gloo;
  if (!nccl) {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = collective_timeout;
    try {
      nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          c10::make_intrusive<c10d::PrefixStore>("aspen/nccl", store), rank, world_size, options);
    } catch (const std::exception& e) {
      throw Error("rank " + std::to_string(rank) + " could not form the NCCL group: " + e.what(),
                  "process group (nccl)", "every rank needs its own CUDA device (cuda:LOCAL_RANK)");
    }
  }
  return *nccl;
}

namespace {

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << static_cast<double>(ms.count()) / 1000.0 << " s";
  return out.str();
}

[[noreturn]] void throw_collective_error(const char* op, int rank, const std::exception& e) {
  throw Error(std::string(op) + " failed on rank " + std::to_string(rank) + ": " + e.what(),
              "process group (gloo)",
              "a peer rank probably died or stalled past ASPEN_DIST_TIMEOUT_S; see the "
              "aspen launch output for the first rank that failed");
}

// Waits until every rank set its arrival key; throws naming the missing ranks.
void wait_for_all_ranks(c10d::Store& store, const DistEnv& env) {
  store.set("aspen/rdzv/arrived/" + std::to_string(env.rank), std::vector<uint8_t>{1});
  const auto deadline = std::chrono::steady_clock::now() + env.rendezvous_timeout;
  std::vector<int> missing;
  while (true) {
    missing.clear();
    for (int r = 0; r < env.world_size; ++r) {
      if (!store.check({"aspen/rdzv/arrived/" + std::to_string(r)})) missing.push_back(r);
    }
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::ostringstream ranks;
  for (size_t i = 0; i < missing.size(); ++i) ranks << (i ? ", " : "") << missing[i];
  throw Error((missing.size() == 1 ? "rank " : "ranks ") + ranks.str() + " never arrived within " +
                  seconds_text(env.rendezvous_timeout) + " (rank " + std::to_string(env.rank) +
                  " of " + std::to_string(env.world_size) + " waited at " + env.master_addr +
                  ":" + std::to_string(env.master_port) + ")",
              "rendezvous",
              "start every rank (aspen launch --nproc-per-node/--nnodes), check that all "
              "nodes use the same MASTER_ADDR/MASTER_PORT, or raise --rdzv-timeout");
}

// Rank 0's listening socket for the store, bound to `host` only. c10d's TCPStore has no
// bind-address option (TCPStoreOptions in torch 2.x): left to itself its server listens
// on every interface ("::" dual stack), and it has no authentication, so anyone who can
// reach the port could read or forge rendezvous keys. It does take over a socket we
// bound ourselves (TCPStoreOptions::masterListenFd, both the libuv and the classic
// backend), which is how the address is chosen here (store_address: 127.0.0.1 on a
// single node, MASTER_ADDR on several). The store owns the returned descriptor.
int listen_on(const std::string& host, int port) {
  const std::string where = "rendezvous store address " + host + ":" + std::to_string(port) +
                            " (MASTER_ADDR:MASTER_PORT)";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  check_input(rc == 0 && found != nullptr,
              std::string("cannot resolve the address: ") + gai_strerror(rc), where,
              "rank 0 serves the rendezvous store on MASTER_ADDR (--master-addr)");
  std::string failure;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      failure = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      failure = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  check_input(fd >= 0, "rank 0 cannot listen there: " + failure, where,
              "is the port in use? pass --master-port 0 for a free one (single node); on "
              "several nodes MASTER_ADDR must be an address of node 0's own machine");
  return fd;
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> make_gloo_device(const DistEnv& env) {
  // Same precedence as torch.distributed: an explicit interface wins; otherwise a
  // single-node job (or a loopback master, several "nodes" on one machine) binds
  // loopback (the machine's hostname may not resolve, or resolve to an unreachable
  // address, and nothing off the machine needs to reach these sockets).
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (env.single_node() || is_loopback(env.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

void PendingWork::wait() {
  if (!wait_) return;
  auto wait = std::move(wait_);
  wait_ = nullptr;
  wait();
}

ProcessGroupHandle::ProcessGroupHandle(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
int ProcessGroupHandle::rank() const { return impl_->rank; }
int ProcessGroupHandle::world_size() const { return impl_->world_size; }
std::chrono::milliseconds ProcessGroupHandle::collective_timeout() const {
  return impl_->collective_timeout;
}

PendingWork ProcessGroupHandle::all_reduce_async(torch::Tensor tensor, ReduceOp op) {
  TORCH_CHECK(tensor.is_contiguous(), "all_reduce needs a contiguous tensor");
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->backend_for(tensor).allreduce(tensors, options);
  } catch (const std::exception& e) {
    throw_collective_error("allreduce", impl_->rank, e);
  }
  const int rank = impl_->rank;
  return PendingWork([work, rank, tensor] {
    try {
      work->wait();
    } catch (const std::exception& e) {
      throw_collective_error("allreduce", rank, e);
    }
  });
}

void ProcessGroupHandle::all_reduce(torch::Tensor& tensor, ReduceOp op) {
  all_reduce_async(tensor, op).wait();
}

std::vector<torch::Tensor> ProcessGroupHandle::all_gather(const torch::Tensor& tensor) {
  torch::Tensor input = tensor.contiguous();
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < impl_->world_size; ++r) outputs[0].push_back(torch::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  try {
    impl_->backend_for(input).allgather(outputs, inputs)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("allgather", impl_->rank, e);
  }
  return outputs[0];
}

torch::Tensor ProcessGroupHandle::all_to_all(const torch::Tensor& input,
                                             const std::vector<int64_t>& send_rows,
                                             const std::vector<int64_t>& recv_rows) {
  const auto size = static_cast<size_t>(impl_->world_size);
  TORCH_CHECK(send_rows.size() == size && recv_rows.size() == size,
              "all_to_all needs one send and one receive count per rank");
  int64_t received = 0;
  for (int64_t rows : recv_rows) received += rows;
  std::vector<int64_t> shape = input.sizes().vec();
  shape[0] = received;
  torch::Tensor in = input.contiguous();
  torch::Tensor out = torch::empty(shape, input.options());
  std::vector<int64_t> send(send_rows), recv(recv_rows);
  try {
    impl_->backend_for(in).alltoall_base(out, in, recv, send)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("alltoall", impl_->rank, e);
  }
  return out;
}

void ProcessGroupHandle::broadcast(torch::Tensor& tensor, int root) {
  TORCH_CHECK(tensor.is_contiguous(), "broadcast needs a contiguous tensor");
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  try {
    impl_->backend_for(tensor).broadcast(tensors, options)->wait();
  } catch (const std::exception& e) {
    throw_collective_error("broadcast", impl_->rank, e);
  }
}

void ProcessGroupHandle::barrier() {
  try {
    impl_->gloo->barrier()->wait();
  } catch (const std::exception& e) {
    throw_collective_error("barrier", impl_->rank, e);
  }
}

std::optional<ProcessGroupHandle> ProcessGroupHandle::new_subgroup(const std::vector<int>& ranks) {
  const int index = impl_->subgroups_created++;
  std::vector<char> seen(static_cast<size_t>(impl_->world_size), 0);
  int my_index = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int r = ranks[i];
    check_input(r >= 0 && r < impl_->world_size && !seen[static_cast<size_t>(r)],
                "rank " + std::to_string(r) + " is out of range [0, " +
                    std::to_string(impl_->world_size) + ") or listed twice",
                "new_subgroup ranks");
    seen[static_cast<size_t>(r)] = 1;
    if (r == impl_->rank) my_index = static_cast<int>(i);
  }
  check_input(!ranks.empty(), "empty rank list", "new_subgroup ranks");
  if (my_index < 0) return std::nullopt;
  auto impl = std::make_shared<Impl>();
  impl->rank = my_index;
  impl->world_size = static_cast<int>(ranks.size());
  impl->collective_timeout = impl_->collective_timeout;
  impl->store = c10::make_intrusive<c10d::PrefixStore>(
      "aspen/subgroup/" + std::to_string(index), impl_->store);
  impl->device = impl_->device;
  auto options = c10d::ProcessGroupGloo::Options::create(impl_->collective_timeout);
  options->devices.push_back(impl->device);
  try {
    impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, impl->rank,
                                                            impl->world_size, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(impl_->rank) + " could not form subgroup " +
                    std::to_string(index) + ": " + e.what(),
                "process group (gloo)", "a member rank probably died or skipped new_subgroup");
  }
  return ProcessGroupHandle(std::move(impl));
}

ProcessGroupHandle init_process_group(const DistEnv& env) {
  auto impl = std::make_shared<ProcessGroupHandle::Impl>();
  impl->rank = env.rank;
  impl->world_size = env.world_size;
  impl->collective_timeout = env.collective_timeout;
  const std::string host = store_address(env);
  const std::string endpoint = host + ":" + std::to_string(env.master_port);

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  // We wait for the ranks ourselves (wait_for_all_ranks) to name the missing ones.
  store_options.waitWorkers = false;
  store_options.timeout = env.rendezvous_timeout;
  // Bound to `host` only, never to every interface (listen_on). If the store constructor
  // throws after this, the descriptor may or may not have been taken over; it is left
  // open rather than risk closing a descriptor twice (the rank is failing anyway).
  if (store_options.isServer) store_options.masterListenFd = listen_on(host, env.master_port);
  try {
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
  } catch (const std::exception& e) {
    if (env.rank == 0) {
      throw Error("rank 0 could not serve the rendezvous store on " + endpoint + ": " + e.what(),
                  "rendezvous", "is the port in use? pass --master-port 0 for a free one");
    }
    throw Error("rank " + std::to_string(env.rank) + " could not reach rank 0's store at " +
                    endpoint + " within " + seconds_text(env.rendezvous_timeout) + ": " + e.what(),
                "rendezvous",
                "is rank 0 running, and MASTER_ADDR/MASTER_PORT the same on every node?");
  }
  wait_for_all_ranks(*impl->store, env);
  log_debug("rank ", env.rank, "/", env.world_size, ": all ranks arrived at ", endpoint);

  auto options = c10d::ProcessGroupGloo::Options::create(env.collective_timeout);
  impl->device = make_gloo_device(env);
  options->devices.push_back(impl->device);
  try {
    // Gloo's own full-mesh connect goes through the store, under the store timeout.
    impl->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, env.rank,
                                                            env.world_size, options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env.rank) + " could not connect the gloo group: " +
                    e.what(),
                "rendezvous", "a peer rank probably died during start-up");
  }
  return ProcessGroupHandle(std::move(impl));
}

}  // namespace aspen
