// libFuzzer target for walcut's command line: every input is one argv, run
// by fork/exec of walcut (WALCUT_FUZZ_BIN: this build's walcut, or the one
// WALCUT_FUZZ_ARGV_BIN names, e.g. walcut_fuzz_cli, built with ASan and UBSan)
// against a small cluster.
//
// Input: argv tokens separated by newlines (or NUL bytes). A token "@NAME"
// names a path into the run's copy of the cluster (kPaths below), so that the
// fuzzer reaches past "no such directory"; fuzz/dict/argv.dict holds the
// commands, options, numbers and these names.
//
// The cluster (walcut run, a fixed seed, few transactions, one full snapshot,
// per-node summaries, a restore output, a repository with one artifact, a
// verdict) is made once per process; each input runs in a fresh copy of it,
// removed afterwards, so that a command that writes (restore -o, snapshot
// create, expire, check --state) leaves nothing for the next input.
//
// Properties:
//   - no death by signal (a sanitizer report aborts walcut: SIGABRT);
//   - no hang: each run ends within kTimeoutSeconds, else it is killed
//     (SIGKILL) and reported;
//   - the exit code is one of 0, 1, 2, 3 (README, "Exit codes").
//
// Two kinds of argv are changed before the run, as they are slow or endless
// by design, not hung: --follow / -f (dump, verify: until interrupted) are
// left out, and a number from 1001 to 10^13 becomes 1000 (run --txs
// 100000000 is a long run; the numbers of the ranges' edges, 0, 1, 65536,
// and those past every range stay).
//
// fuzz.sh: -max_len=512 -timeout=60
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fuzz/check.h"

namespace fs = std::filesystem;

namespace {

// Wall time: generous, as a loaded machine (the shared CI runner) slows a
// run of walcut many times over; the slowest seed takes well under 1 s alone.
constexpr int kTimeoutSeconds = 20;
constexpr size_t kMaxTokens = 24;

// "@NAME" -> a path relative to the run's directory.
const std::map<std::string, std::string> kPaths = {
    {"@C", "c"},                                   // the cluster
    {"@N0", "c/node-0"},                           // a node directory
    {"@N1", "c/node-1"},                           //
    {"@W0", "c/node-0/wal"},                       // a WAL directory
    {"@G0", "c/node-0/wal/0000000000000000.wal"},  // a segment
    {"@J", "c/cluster.json"},                      // the cluster description
    {"@S", "c/snapshots/full-30"},                 // a full snapshot
    {"@X", "rest"},                                // a restore output
    {"@R", "repo"},                                // a repository
    {"@M0", "s0.json"},                            // per-node summaries (walcut scan)
    {"@M1", "s1.json"},                            //
    {"@M2", "s2.json"},                            //
    {"@V", "verdict.json"},                        // a cut's verdict (walcut cuts --verdict-out)
    {"@P", "part"},                                // one node's restore (restore NODE_DIR --verdict)
    {"@O", "out"},                                 // a directory that does not exist yet
    {"@F", "out.json"},                            // a file that does not exist yet
    {"@E", "nothing/here"},                        // a path that names nothing
    {"@-", "-"},                                   // standard input (/dev/null)
};

std::string g_base;      // the process's temporary directory
std::string g_pristine;  // the cluster and its products, never touched after setup
std::atomic<uint64_t> g_runs{0};

struct Outcome {
  bool exited = false;
  int code = 0;  // the exit code, or the signal
  bool hung = false;
  std::string err;  // walcut's stderr
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs walcut with `args` in `cwd`, stdin /dev/null, stdout discarded,
// stderr to cwd/.stderr.
Outcome Exec(const std::vector<std::string>& args, const std::string& cwd) {
  std::vector<char*> argv;
  std::string bin = WALCUT_FUZZ_BIN;
  argv.push_back(bin.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string err_path = cwd + "/.stderr";
  const pid_t pid = ::fork();
  if (pid < 0) walcut_fuzz::Fail("fork", "failed");
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kTimeoutSeconds);
  int st = 0;
  for (auto pause = std::chrono::microseconds(200);; pause = std::min(pause * 2, std::chrono::microseconds(20000))) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      o.hung = true;
      break;
    }
    std::this_thread::sleep_for(pause);
  }
  o.exited = WIFEXITED(st);
  o.code = o.exited ? WEXITSTATUS(st) : WTERMSIG(st);
  o.err = Slurp(err_path);
  return o;
}

std::string Describe(const std::vector<std::string>& args) {
  std::string s = "walcut";
  for (const auto& a : args) s += " '" + a + "'";
  return s;
}

// A setup step must succeed: the cluster is the fuzzer's ground.
void Setup(const std::vector<std::string>& args) {
  const Outcome o = Exec(args, g_pristine);
  if (!o.exited || o.code != 0) walcut_fuzz::Fail("setup", Describe(args) + ": " + o.err);
}

void Cleanup() {
  std::error_code ec;
  if (!g_base.empty()) fs::remove_all(g_base, ec);
}

void MakeCluster() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t && *t ? t : "/tmp") + "/walcut-fuzz-argv-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) walcut_fuzz::Fail("mkdtemp", tmpl);
  g_base = buf.data();
  std::atexit(Cleanup);
  g_pristine = g_base + "/pristine";
  fs::create_directories(g_pristine);
  Setup({"run", "c", "--txs", "60", "--seed", "1", "--cuts", "2", "--full-snapshot-at", "30", "--epoch",
         "2026-11-30T12:00:00Z", "-q"});
  for (const char* n : {"0", "1", "2"})
    Setup({"scan", std::string("c/node-") + n, "-o", std::string("s") + n + ".json", "-q"});
  Setup({"restore", "c", "--latest", "-o", "rest", "-q"});
  Setup({"cuts", "s0.json", "s1.json", "s2.json", "--verdict-out", "verdict.json", "--latest", "--cluster-json",
         "c/cluster.json", "-q"});
  Setup({"restore", "c/node-0", "--verdict", "verdict.json", "-o", "part", "-q"});
  Setup({"snapshot", "create", "--repo", "repo", "--full", "--from", "full-30", "c", "-q"});
  fs::remove(g_pristine + "/.stderr");
  for (const auto& [name, rel] : kPaths) {
    if (name == "@O" || name == "@F" || name == "@E" || name == "@-") continue;
    if (!fs::exists(g_pristine + "/" + rel)) walcut_fuzz::Fail("setup", name + ": no " + g_pristine + "/" + rel);
  }
}

bool IsFollow(const std::string& t) {
  if (t.rfind("--follow", 0) == 0) return t.rfind("--follow-", 0) == 0;  // --follow-interval stays
  // A cluster of short flags with f in it (-f, -fv, -vf).
  if (t.size() >= 2 && t[0] == '-' && t[1] != '-') {
    for (size_t i = 1; i < t.size() && std::isalpha(static_cast<unsigned char>(t[i])); ++i) {
      if (t[i] == 'f') return true;
    }
  }
  return false;
}

// Digits only, from 1001 to 10^13: 1000 (see the header).
std::string Tame(const std::string& t) {
  if (t.empty() || t.size() > 14 || t.find_first_not_of("0123456789") != std::string::npos) return t;
  const uint64_t v = std::stoull(t);
  return v > 1000 && v <= 10000000000000ull ? "1000" : t;
}

std::vector<std::string> Decode(const uint8_t* data, size_t size, const std::string& dir) {
  std::vector<std::string> args;
  std::string tok;
  auto flush = [&] {
    if (args.size() >= kMaxTokens) return;
    if (const auto it = kPaths.find(tok); it != kPaths.end()) tok = it->second == "-" ? "-" : dir + "/" + it->second;
    if (!IsFollow(tok)) args.push_back(Tame(tok));
    tok.clear();
  };
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n' || data[i] == '\0')
      flush();
    else
      tok.push_back(static_cast<char>(data[i]));
  }
  if (!tok.empty()) flush();
  return args;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_base.empty()) MakeCluster();
  const std::string dir = g_base + "/run-" + std::to_string(g_runs++);
  fs::copy(g_pristine, dir, fs::copy_options::recursive);
  const std::vector<std::string> args = Decode(data, size, dir);
  const Outcome o = Exec(args, dir);
  const std::string what = Describe(args) + " (stderr: " + o.err.substr(0, 2000) + ")";
  Check(!o.hung, "no exit within " + std::to_string(kTimeoutSeconds) + " s: " + what);
  Check(o.exited, "killed by signal " + std::to_string(o.code) + ": " + what);
  Check(o.code >= 0 && o.code <= 3, "exit code " + std::to_string(o.code) + ": " + what);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
