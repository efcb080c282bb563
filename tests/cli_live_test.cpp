// The terminal and the live WAL: progress on a pseudo-terminal (drawn, with
// total, rate and ETA, and cleared before any other output; never on a
// stderr that is not a terminal unless --progress), `check`'s stages, a
// segment read from standard input (plain and zstd, through a pipe), and
// `dump --follow` and `verify --follow` reading a WAL directory while it grows.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <thread>

#include <catch2/catch.hpp>

#include "cli_support.h"
#include "walfmt/segment.h"

namespace walcut::test {
namespace {

namespace fs = std::filesystem;

constexpr const char* kClear = "\r\x1b[K";

// Runs walcut with stderr (and, with `stdout_too`, stdout) on a new
// pseudo-terminal; returns what the terminal received and the exit code.
struct TtyRun {
  int code = -1;
  std::string tty;  // the terminal's bytes (output post-processing off: as written)
  std::string out;  // stdout when it is not the terminal
};

TtyRun OnTerminal(const std::vector<std::string>& args, bool stdout_too, const std::string& env = "") {
  TempDir io;
  const std::string out_path = io.path + "/out";
  int master = -1;
  struct winsize ws {};
  ws.ws_col = 200;
  ws.ws_row = 50;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct termios t {};
    tcgetattr(STDIN_FILENO, &t);
    t.c_oflag &= ~static_cast<tcflag_t>(OPOST);  // "\n" stays "\n"
    tcsetattr(STDIN_FILENO, TCSANOW, &t);
    if (!stdout_too) {
      const int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDOUT_FILENO);
    }
    if (!env.empty()) putenv(const_cast<char*>(env.c_str()));
    std::vector<char*> argv{const_cast<char*>(WALCUT_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(WALCUT_BIN, argv.data());
    _exit(127);
  }
  TtyRun r;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) {
      r.tty.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // EIO: the child closed the terminal
  }
  close(master);
  int st = 0;
  waitpid(pid, &st, 0);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (!stdout_too) r.out = Slurp(out_path);
  return r;
}

// The progress lines drawn: each "\r\x1b[K" followed by text up to the next
// control sequence or newline.
std::vector<std::string> Drawn(const std::string& s) {
  std::vector<std::string> lines;
  for (size_t at = s.find(kClear); at != std::string::npos; at = s.find(kClear, at + 1)) {
    const size_t from = at + std::strlen(kClear);
    const size_t end = s.find_first_of("\r\n", from);
    std::string line = s.substr(from, end == std::string::npos ? std::string::npos : end - from);
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// A WAL big enough for several progress updates: 1 node, many segments.
const std::string& BigWal() {
  static TempDir dir;
  static bool made = false;
  if (!made) {
    MakeCluster(dir.path, 1, 6000, false, 64u << 10);
    made = true;
  }
  return dir.path;
}

TEST_CASE("progress on a terminal: total, rate and ETA, cleared before the output", "[progress]") {
  const std::string wal = BigWal();
  const TtyRun r = OnTerminal({"verify", "-j1", wal}, true, "WALCUT_PROGRESS_INTERVAL_MS=0");
  INFO(r.tty);
  REQUIRE(r.code == 0);
  const auto drawn = Drawn(r.tty);
  REQUIRE(!drawn.empty());
  // "verify 40% (27.5 MiB/68.9 MiB, 120.3 MiB/s, ETA 0:01)"
  const std::regex line(
      R"(verify \d+% \(\d+(\.\d)? (B|KiB|MiB)/\d+(\.\d)? (B|KiB|MiB), \d+(\.\d)? (B|KiB|MiB|GiB)/s, ETA \d+:\d\d\))");
  bool full = false;
  for (const auto& l : drawn) full = full || std::regex_match(l, line);
  CHECK(full);
  // The first line of output comes right after a clear: never glued to
  // the progress line.
  const size_t first = r.tty.find("node 0 (");
  REQUIRE(first != std::string::npos);
  REQUIRE(first >= std::strlen(kClear));
  CHECK(r.tty.substr(first - std::strlen(kClear), std::strlen(kClear)) == kClear);
  // Nothing is drawn after the output starts.
  CHECK(r.tty.find("verify ", first) == std::string::npos);
}

TEST_CASE("progress: never on a stderr that is not a terminal unless --progress, --no-progress and -q", "[progress]") {
  const std::string wal = BigWal();
  TempDir io;
  auto run = [&](const std::string& opts) {
    const std::string cmd = fmt::format("WALCUT_PROGRESS_INTERVAL_MS=0 '{}' verify -j1 {} '{}' >'{}/out' 2>'{}/err'",
                                        WALCUT_BIN, opts, wal, io.path, io.path);
    REQUIRE(std::system(cmd.c_str()) == 0);
    return Slurp(io.path + "/err");
  };
  CHECK(run("") == "");
  CHECK(run("--no-progress") == "");
  const std::string forced = run("--progress");
  CHECK(forced.find("verify ") != std::string::npos);
  CHECK(forced.find(kClear) != std::string::npos);
  CHECK(forced.size() >= std::strlen(kClear));
  CHECK(forced.substr(forced.size() - std::strlen(kClear)) == kClear);  // the line is cleared at the end
  CHECK(run("--progress -q") == "");
  // On a terminal: --no-progress draws nothing.
  const TtyRun r = OnTerminal({"verify", "-j1", "--no-progress", wal}, true, "WALCUT_PROGRESS_INTERVAL_MS=0");
  CHECK(r.code == 0);
  CHECK(r.tty.find(kClear) == std::string::npos);
  CHECK(r.tty.find("node 0 (") != std::string::npos);
}

TEST_CASE("progress: an error line is never glued to the progress line", "[progress]") {
  TempDir dir;
  MakeCluster(dir.path, 1, 3000, false, 64u << 10);
  // Damage the last byte of a middle segment's first record payload.
  std::vector<fs::path> segs;
  for (const auto& e : fs::directory_iterator(dir.path + "/node-0/wal")) segs.push_back(e.path());
  std::sort(segs.begin(), segs.end());
  REQUIRE(segs.size() > 4);
  std::string bytes = Slurp(segs[segs.size() / 2].string());
  bytes[walfmt::kSegmentHeaderSize + walfmt::kRecordHeaderSize] ^= 0x55;
  Spit(segs[segs.size() / 2].string(), bytes);
  const TtyRun r = OnTerminal({"stats", "-j1", dir.path}, false, "WALCUT_PROGRESS_INTERVAL_MS=0");
  INFO(r.tty);
  CHECK(r.code == 1);
  const size_t err = r.tty.find("walcut: corruption:");
  REQUIRE(err != std::string::npos);
  REQUIRE(err >= std::strlen(kClear));
  CHECK(r.tty.substr(err - std::strlen(kClear), std::strlen(kClear)) == kClear);
}

TEST_CASE("check's progress: stage names and a count that never goes backwards within a stage", "[progress]") {
  const std::string dir = std::string(WALCUT_SOURCE_DIR) + "/samples/healthy";
  TempDir io;
  const std::string cmd = fmt::format(
      "WALCUT_PROGRESS_INTERVAL_MS=0 '{}' check --all --level restore --progress -j1 '{}' >'{}/out' "
      "2>'{}/err'",
      WALCUT_BIN, dir, io.path, io.path);
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string err = Slurp(io.path + "/err");
  INFO(err);
  const auto drawn = Drawn(err);
  REQUIRE(!drawn.empty());
  std::map<std::string, double> last;  // stage -> last percent
  std::vector<std::string> order;
  const std::regex pct(R"((.*) (\d+)% \(.*)");
  const std::regex bytes(R"((.*) (\d+(\.\d)?) (B|KiB|MiB), .*)");
  for (const auto& l : drawn) {
    std::smatch m;
    std::string stage;
    double v = 0;
    if (std::regex_match(l, m, pct)) {
      stage = m[1];
      v = std::stod(m[2]);
    } else if (std::regex_match(l, m, bytes)) {
      stage = m[1];
      v = std::stod(m[2]) * (m[4] == "MiB" ? 1 << 20 : m[4] == "KiB" ? 1 << 10 : 1);
    } else {
      FAIL("not a progress line: " << l);
    }
    if (order.empty() || order.back() != stage) {
      CHECK(std::find(order.begin(), order.end(), stage) == order.end());  // a stage is not entered twice
      order.push_back(stage);
    } else {
      CHECK(v >= last[stage]);
    }
    last[stage] = v;
  }
  CAPTURE(order);
  CHECK(std::find(order.begin(), order.end(), "files") != order.end());
  CHECK(std::find(order.begin(), order.end(), "cuts") != order.end());
  // "cut 1/N: restore" ... "cut N/N: restore", in order, after files and cuts.
  std::vector<std::string> restores;
  for (const auto& st : order) {
    if (st.starts_with("cut ")) restores.push_back(st);
  }
  REQUIRE(restores.size() >= 2);
  for (size_t i = 0; i < restores.size(); ++i) {
    // The cut id is named too when it is not the ordinal: "cut 7 (3/5): restore".
    const std::string n = fmt::format("{}/{}", i + 1, restores.size());
    CHECK((restores[i] == "cut " + n + ": restore" ||
           std::regex_match(restores[i], std::regex("cut [0-9]+ \\(" + n + "\\): restore"))));
  }
  CHECK(order.front() == "files");
}

// ---- Standard input.

std::string Shell(const std::string& cmd, int& code) {
  TempDir io;
  const int st = std::system(fmt::format("{} >'{}/out' 2>'{}/err'", cmd, io.path, io.path).c_str());
  code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return Slurp(io.path + "/out") + Slurp(io.path + "/err");
}

TEST_CASE("dump, stats and verify read a segment from standard input, plain or zstd, through a pipe", "[stdin]") {
  TempDir plain, packed;
  MakeCluster(plain.path, 1, 300, false, 8192);
  MakeCluster(packed.path, 1, 300, true, 8192);
  const std::string seg = plain.path + "/node-0/wal/0000000000000002.wal";
  const std::string zst = packed.path + "/node-0/wal/0000000000000002.wal.zst";
  REQUIRE(fs::exists(seg));
  REQUIRE(fs::exists(zst));
  for (const std::string& cmd : {std::string("dump"), std::string("stats"), std::string("verify")}) {
    int want_code = 0, plain_code = 0, zst_code = 0;
    const std::string want = Shell(fmt::format("'{}' {} '{}'", WALCUT_BIN, cmd, seg), want_code);
    const std::string from_pipe = Shell(fmt::format("cat '{}' | '{}' {} -", seg, WALCUT_BIN, cmd), plain_code);
    const std::string from_zst = Shell(fmt::format("cat '{}' | '{}' {} -", zst, WALCUT_BIN, cmd), zst_code);
    INFO(cmd);
    CHECK(want_code == 0);
    CHECK(plain_code == 0);
    CHECK(zst_code == 0);
    if (cmd == "dump") {
      CHECK(from_pipe == want);  // the lines name no file
      CHECK(from_zst == want);
      CHECK(Lines(want).size() > 20);
    } else {
      // The same counts; the file is named "<stdin>".
      const std::string named = std::regex_replace(want, std::regex(seg), "<stdin>");
      CHECK(std::regex_replace(from_pipe, std::regex(R"(segment files|<stdin>)"), "X") ==
            std::regex_replace(named, std::regex(R"(segment files|<stdin>)"), "X"));
      CHECK(from_zst == from_pipe);
    }
  }
  // Damage is found and named on standard input too.
  std::string bytes = Slurp(seg);
  bytes[bytes.size() / 2] ^= 0x40;
  TempDir bad;
  Spit(bad.path + "/x", bytes);
  int code = 0;
  const std::string out = Shell(fmt::format("cat '{}/x' | '{}' verify -", bad.path, WALCUT_BIN), code);
  CHECK(code == 1);
  CHECK(out.find("<stdin> at 2/") != std::string::npos);
  // An empty standard input is a bad segment, not a crash.
  CHECK(Shell(fmt::format("'{}' dump - </dev/null", WALCUT_BIN), code).find("<stdin>") != std::string::npos);
  CHECK(code == 1);
  // "-" twice is a usage error.
  Shell(fmt::format("cat '{}' | '{}' dump - -", seg, WALCUT_BIN), code);
  CHECK(code == 2);
}

// ---- dump --follow.

// Starts walcut with stdout and stderr to files; returns its pid.
pid_t Start(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, STDOUT_FILENO);
    dup2(e, STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(WALCUT_BIN)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(WALCUT_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

void Append(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  f << bytes;
}

// Hands the segments `segs` to the WAL directory `wal` the way a writer
// appends: each new segment first with 30 bytes of its header, then in
// pieces of 977 bytes (most end inside a record). Segment `from` on; the
// last segment only up to `last_bytes` when that is given.
void Feed(const std::vector<fs::path>& segs, const std::string& wal, size_t from, size_t last_bytes = SIZE_MAX) {
  for (size_t i = from; i < segs.size(); ++i) {
    std::string bytes = Slurp(segs[i].string());
    if (i + 1 == segs.size()) bytes = bytes.substr(0, std::min(bytes.size(), last_bytes));
    const std::string path = wal + "/" + segs[i].filename().string();
    Spit(path, bytes.substr(0, 30));
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    for (size_t at = 30; at < bytes.size(); at += 977) {
      Append(path, bytes.substr(at, 977));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

std::vector<fs::path> Segments(const std::string& wal) {
  std::vector<fs::path> segs;
  for (const auto& e : fs::directory_iterator(wal)) segs.push_back(e.path());
  std::sort(segs.begin(), segs.end());
  return segs;
}

bool Running(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

// Makes the WAL directory `wal` holding the first 1000 bytes of segs[0] (a
// record cut short); returns the rest of that segment, for later.
std::string StartWithFirst1000(const std::vector<fs::path>& segs, const std::string& wal) {
  fs::create_directories(wal);
  const std::string first = Slurp(segs[0].string());
  Spit(wal + "/" + segs[0].filename().string(), first.substr(0, 1000));
  return first.substr(1000);
}

TEST_CASE("dump --follow: records appended, across segment switches and partial writes, each once in order",
          "[follow]") {
  // The WAL is written by walfmt's writer into `src`, then handed to the
  // followed directory in pieces that end inside records and inside a
  // segment header, the way a reader sees a writer's appends.
  TempDir src, live, io;
  MakeCluster(src.path, 1, 300, false, 8192);
  int code = 0;
  const std::string want = Shell(fmt::format("'{}' dump -j1 '{}/node-0'", WALCUT_BIN, src.path), code);
  REQUIRE(code == 0);
  const std::vector<fs::path> segs = Segments(src.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  const std::string wal = live.path + "/node-0/wal";
  const std::string first_rest = StartWithFirst1000(segs, wal);

  const pid_t pid =
      Start({"dump", "--follow", "--follow-interval", "20", live.path + "/node-0"}, io.path + "/out", io.path + "/err");
  auto lines = [&] { return Lines(Slurp(io.path + "/out")).size(); };
  CHECK(WaitFor([&] { return lines() > 5; }));
  // The rest, in uneven pieces (Feed).
  Append(wal + "/" + segs[0].filename().string(), first_rest);
  Feed(segs, wal, 1);
  const size_t want_lines = Lines(want).size();
  CHECK(WaitFor([&] { return lines() >= want_lines; }));
  kill(pid, SIGINT);
  CHECK(Wait(pid) == 0);
  CHECK(Slurp(io.path + "/out") == want);  // every record once, in order
  CHECK(Slurp(io.path + "/err") == "");
}

TEST_CASE("dump --follow: damage followed by more data is a finding, usage errors", "[follow]") {
  TempDir src, io;
  MakeCluster(src.path, 2, 100, false, 1u << 20);
  const std::string seg = src.path + "/node-1/wal/0000000000000000.wal";
  std::string bytes = Slurp(seg);
  bytes[bytes.size() / 2] ^= 0x20;
  Spit(seg, bytes);
  const pid_t pid = Start({"dump", "--follow", "--node", "1", src.path}, io.path + "/out", io.path + "/err");
  CHECK(Wait(pid) == 1);  // stops by itself at the damage
  CHECK(Slurp(io.path + "/err").find("walcut: corruption: node 1,") != std::string::npos);
  int code = 0;
  const std::string two = Shell(fmt::format("'{}' dump --follow '{}'", WALCUT_BIN, src.path), code);
  CHECK(code == 2);
  CHECK(two.find("give --node") != std::string::npos);
  Shell(fmt::format("'{}' dump --follow '{}'", WALCUT_BIN, seg), code);
  CHECK(code == 2);
}

// ---- verify --follow.

TEST_CASE("verify --follow: a clean live feed across segment switches and partial writes, SIGINT reports it",
          "[follow]") {
  TempDir src, live, io;
  MakeCluster(src.path, 1, 300, false, 8192);
  int code = 0;
  const std::vector<std::string> want =
      Lines(Shell(fmt::format("'{}' verify '{}/node-0'", WALCUT_BIN, src.path), code));
  REQUIRE(code == 0);
  REQUIRE(!want.empty());
  REQUIRE(want.back().find(": OK") != std::string::npos);
  const std::vector<fs::path> segs = Segments(src.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  const std::string wal = live.path + "/node-0/wal";
  const std::string first_rest = StartWithFirst1000(segs, wal);
  const pid_t pid = Start({"verify", "--follow", "--follow-interval", "20", live.path + "/node-0"}, io.path + "/out",
                          io.path + "/err");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  CHECK(Running(pid));  // the partial record at the live end is not damage
  Append(wal + "/" + segs[0].filename().string(), first_rest);
  Feed(segs, wal, 1);
  // The whole WAL is there. verify prints nothing while the WAL is clean, so
  // the test watches what it read (/proc/PID/io rchar): at least the whole
  // WAL, then no more for half a second (the follower polls the live end and
  // reads nothing new).
  uint64_t total = 0;
  for (const auto& seg : segs) total += fs::file_size(seg);
  auto rchar = [pid] {
    std::ifstream io(fmt::format("/proc/{}/io", pid));
    std::string key;
    uint64_t v = 0;
    while (io >> key >> v) {
      if (key == "rchar:") return v;
    }
    return uint64_t{0};
  };
  uint64_t last = 0;
  int still = 0;
  CHECK(WaitFor([&] {
    const uint64_t now = rchar();
    still = now == last ? still + 1 : 0;
    last = now;
    return now >= total && still >= 25;
  }));
  CHECK(Running(pid));
  CHECK(Slurp(io.path + "/out") == "");  // no findings while following
  kill(pid, SIGINT);
  CHECK(Wait(pid) == 0);
  const std::string out = Slurp(io.path + "/out");
  INFO(out);
  // The report of what was read: the same as verify's of the complete WAL
  // (the node's directory is named differently).
  const std::vector<std::string> got = Lines(out);
  REQUIRE(got.size() == want.size());
  CHECK(got.back() == want.back());  // "verified 1 node, N segments, B, R records: OK"
  CHECK(std::regex_replace(got.front(), std::regex(R"(\(.*\))"), "()") ==
        std::regex_replace(want.front(), std::regex(R"(\(.*\))"), "()"));
  CHECK(Slurp(io.path + "/err") == "");
}

TEST_CASE("verify --follow: a damaged record in the feed is a finding printed while following, exit 1 after SIGINT",
          "[follow]") {
  TempDir src, live, io;
  MakeCluster(src.path, 1, 300, false, 8192);
  const std::vector<fs::path> segs = Segments(src.path + "/node-0/wal");
  REQUIRE(segs.size() >= 3);
  // A record payload in the middle of the second segment.
  std::string bytes = Slurp(segs[1].string());
  bytes[bytes.size() / 2] ^= 0x20;
  Spit(segs[1].string(), bytes);
  int code = 0;
  const std::string want = Shell(fmt::format("'{}' verify '{}/node-0'", WALCUT_BIN, src.path), code);
  REQUIRE(code == 1);
  const std::string wal = live.path + "/node-0/wal";
  fs::create_directories(wal);
  const pid_t pid = Start({"verify", "--follow", "--follow-interval", "20", live.path + "/node-0"}, io.path + "/out",
                          io.path + "/err");
  // The last segment only in part: the follower is still at the live end.
  Feed(segs, wal, 0, 2000);
  CHECK(WaitFor([&] { return Slurp(io.path + "/out").find("FINDING: ") != std::string::npos; }));
  CHECK(Running(pid));  // found while following, not at the end
  const std::string live_lines = Slurp(io.path + "/out");
  INFO(live_lines);
  CHECK(live_lines.find(segs[1].filename().string()) != std::string::npos);
  kill(pid, SIGINT);
  CHECK(Wait(pid) == 1);
  const std::string out = Slurp(io.path + "/out");
  INFO(out);
  CHECK(out.find("FAILED (1 finding in 1 segment)") != std::string::npos);
  CHECK(want.find("FAILED (1 finding in 1 segment)") != std::string::npos);
}

TEST_CASE("verify --follow: usage errors", "[follow]") {
  TempDir src;
  MakeCluster(src.path, 2, 50, false, 1u << 20);
  int code = 0;
  const std::string two = Shell(fmt::format("'{}' verify --follow '{}'", WALCUT_BIN, src.path), code);
  CHECK(code == 2);
  CHECK(two.find("one node's WAL") != std::string::npos);
  Shell(fmt::format("'{}' verify --follow '{}/node-0/wal/0000000000000000.wal'", WALCUT_BIN, src.path), code);
  CHECK(code == 2);
}

}  // namespace
}  // namespace walcut::test
