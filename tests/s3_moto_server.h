// A real S3-compatible server for the end-to-end repository tests: moto's
// moto_server (Python package moto; WALCUT_MOTO_SERVER names it, else it is
// looked up on PATH and in ~/.pyenv/shims) on a free loopback port, run under
// timeout(1) so that it never outlives 300 s (or the seconds given), and stopped by PID (SIGTERM to
// timeout, which passes it on; then waited for) in the destructor, so also
// when a test fails. moto accepts any credentials.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "s3_test_server.h"
#include "scratch_dir.h"

namespace walcut::test {

// moto_server's path, or "" when it is not installed (or WALCUT_MOTO_SERVER=none).
inline std::string FindMotoServer() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* e = std::getenv("WALCUT_MOTO_SERVER"); e && std::string(e) == "none") return "";
  if (const char* e = std::getenv("WALCUT_MOTO_SERVER"); e && *e) candidates.emplace_back(e);
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0; start <= p.size();) {
      const size_t colon = p.find(':', start);
      const std::string d = p.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty()) candidates.push_back(d + "/moto_server");
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  if (const char* home = std::getenv("HOME")) candidates.push_back(std::string(home) + "/.pyenv/shims/moto_server");
  for (const auto& c : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(c, ec) && ::access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

// A port that was free a moment ago on 127.0.0.1.
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

inline bool Accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

struct MotoServer {
  ScratchDir dir{"moto"};
  pid_t pid = -1;
  int port = 0;
  std::string error;

  explicit MotoServer(const std::string& binary, int max_seconds = 300) {
    std::filesystem::create_directories(dir.path);
    for (int attempt = 0; attempt < 3 && pid < 0; ++attempt) {
      port = FreeLoopbackPort();
      if (port == 0) continue;
      std::vector<std::string> args = {
          "timeout", "--kill-after=5",    std::to_string(max_seconds), binary, "-H", "127.0.0.1",
          "-p",      std::to_string(port)};
      pid = SpawnLogged(args, (dir.path / "server.log").string());
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (std::chrono::steady_clock::now() < deadline) {
        if (Accepts(port)) return;
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == pid) {
          pid = -1;  // exited (the port was taken meanwhile?): another try
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    error = fmt::format("moto_server ({}) did not start on 127.0.0.1; see {}/server.log", binary, dir.path.string());
  }
  ~MotoServer() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port); }
};

}  // namespace walcut::test
