// The S3 test server (tests/s3_server.py) as a fixture: started with its
// options on a free loopback port, read from its port file, and stopped by
// PID (SIGKILL, then waited for) in the destructor, so also when a test
// fails. The server exits by itself after 120 s or when this process dies.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "scratch_dir.h"

namespace walcut::test {

// Forks and executes args[0] (found on PATH) with args: stdout to /dev/null,
// stderr to `log`. Returns the child's pid (-1 when fork fails).
inline pid_t SpawnLogged(std::vector<std::string> args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (std::freopen("/dev/null", "w", stdout) == nullptr || std::freopen(log.c_str(), "w", stderr) == nullptr) {
      ::_exit(126);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

inline bool HavePython3() {
  static const bool have = std::system("command -v python3 >/dev/null 2>&1") == 0;
  return have;
}

struct S3TestServer {
  ScratchDir dir{"s3srv"};
  pid_t pid = -1;
  int port = 0;
  std::string error;

  explicit S3TestServer(const std::vector<std::string>& options = {}) {
    std::filesystem::create_directories(dir.path);
    const std::string port_file = (dir.path / "port").string();
    std::vector<std::string> args = {"python3",       WALCUT_SOURCE_DIR "/tests/s3_server.py",
                                     "--root",        (dir.path / "objects").string(),
                                     "--port-file",   port_file,
                                     "--max-seconds", "120"};
    args.insert(args.end(), options.begin(), options.end());
    pid = SpawnLogged(args, (dir.path / "server.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      if (in >> port && port > 0) return;
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        error = "the S3 test server exited at start; see its log";
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    error = "the S3 test server did not write its port within 30 s";
  }
  ~S3TestServer() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  S3TestServer(const S3TestServer&) = delete;
  S3TestServer& operator=(const S3TestServer&) = delete;

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port); }
};

}  // namespace walcut::test
