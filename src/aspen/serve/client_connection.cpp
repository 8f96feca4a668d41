#include "aspen/serve/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

#include "aspen/serve/imports.h"

namespace aspen::serve {
namespace {

// The numeric host and port of a socket address, as httplib writes them.
bool address_of(const sockaddr_storage& address, socklen_t length, std::string& host, int& port) {
  char host_text[NI_MAXHOST];
  char port_text[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host_text, sizeof host_text,
                  port_text, sizeof port_text, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = host_text;
  port = std::atoi(port_text);
  return true;
}

bool is_connection(int fd, const std::string& remote_addr, int remote_port, int local_port) {
  struct stat info;
  if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  std::string host;
  int port = 0;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !address_of(address, length, host, port) || port != local_port) {
    return false;
  }
  length = sizeof address;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         address_of(address, length, host, port) && port == remote_port && host == remote_addr;
}

}  // namespace

ClientConnection::ClientConnection(const std::string& remote_addr, int remote_port,
                                   int local_port) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return;
  const int own = dirfd(fds);
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || end == entry->d_name || fd == own) continue;
    if (is_connection(static_cast<int>(fd), remote_addr, remote_port, local_port)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  char byte;
  const ssize_t got = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;  // data waiting: still connected
  if (got == 0) return true;  // end of file: the client closed its side
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;  // reset, or gone
}

}  // namespace aspen::serve
