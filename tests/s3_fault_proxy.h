// The fault-injecting proxy (tests/s3_fault_proxy.py) as a fixture: started
// in front of an S3 server with a fault schedule, on a free loopback port
// read from its port file, bounded by --max-seconds, and stopped by PID
// (SIGKILL, then waited for) in the destructor, so also when a test fails.
// The proxy exits by itself when this process dies.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "s3_test_server.h"
#include "scratch_dir.h"

namespace walcut::test {

// A fault schedule: the proxy's options (s3_fault_proxy.py --help).
struct FaultSchedule {
  std::string fault = "none";  // 500, 503, slowdown, 500-after, reset-upload, reset-download, truncate
  int every = 1;
  int limit = 0;           // at most this many faults; 0: every eligible request on the schedule
  std::string method;      // "PUT,POST"; "" any
  std::string query;       // a query parameter the request names (partNumber, uploads, ...)
  std::string key_suffix;  // the path ends so
  int seed = 1;

  std::string Describe() const {
    std::string d = fault;
    if (every > 1) d += fmt::format(" every {}", every);
    d += limit ? fmt::format(" (at most {})", limit) : " (always)";
    if (!method.empty()) d += " of " + method;
    if (!query.empty()) d += " with ?" + query;
    if (!key_suffix.empty()) d += " on *" + key_suffix;
    return d;
  }
};

struct S3FaultProxy {
  ScratchDir dir{"s3proxy"};
  pid_t pid = -1;
  int port = 0;
  std::string error;

  S3FaultProxy(const std::string& upstream, const FaultSchedule& f) {
    std::filesystem::create_directories(dir.path);
    const std::string port_file = (dir.path / "port").string();
    std::vector<std::string> args = {"python3",       WALCUT_SOURCE_DIR "/tests/s3_fault_proxy.py",
                                     "--upstream",    upstream,
                                     "--fault",       f.fault,
                                     "--every",       std::to_string(f.every),
                                     "--limit",       std::to_string(f.limit),
                                     "--seed",        std::to_string(f.seed),
                                     "--port-file",   port_file,
                                     "--stats-file",  stats_file(),
                                     "--max-seconds", "600"};
    if (!f.method.empty()) args.insert(args.end(), {"--method", f.method});
    if (!f.query.empty()) args.insert(args.end(), {"--query", f.query});
    if (!f.key_suffix.empty()) args.insert(args.end(), {"--key-suffix", f.key_suffix});
    pid = SpawnLogged(args, (dir.path / "proxy.log").string());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream in(port_file);
      if (in >> port && port > 0) return;
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        error = "the S3 fault proxy exited at start; see " + (dir.path / "proxy.log").string();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    error = "the S3 fault proxy did not write its port within 30 s";
  }
  ~S3FaultProxy() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  S3FaultProxy(const S3FaultProxy&) = delete;
  S3FaultProxy& operator=(const S3FaultProxy&) = delete;

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", port); }
  std::string stats_file() const { return (dir.path / "stats.json").string(); }
  // {"requests", "eligible", "faults", "log"}: what the proxy did so far.
  nlohmann::json Stats() const {
    std::ifstream in(stats_file());
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
};

}  // namespace walcut::test
