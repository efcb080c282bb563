// --metrics FILE of `walcut check` and `walcut snapshot check REPO`: the
// Prometheus text exposition format (checked line by line here, and by
// `promtool check metrics` when it is installed), the values against what
// the other commands report, label escaping, and the refusals.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>

#include <fmt/format.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "cli_support.h"

namespace walcut::test {
namespace {
namespace fs = std::filesystem;

const std::string kSamples = std::string(WALCUT_SOURCE_DIR) + "/samples/";

// The series of a metrics file ("name{labels}" -> value), after checking its
// syntax: every sample's family declared by # HELP then # TYPE (gauge or
// counter) before its samples, each family declared once and its samples
// together, names and label names valid, label values properly escaped, no
// series twice, every value a number.
std::map<std::string, double> Parse(const std::string& text) {
  static const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*)");
  static const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter))");
  static const std::regex sample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? (-?[0-9]+(\.[0-9]+)?))");
  std::map<std::string, double> out;
  std::set<std::string> declared;
  std::string family, helped;
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  for (const auto& line : Lines(text)) {
    INFO(line);
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      REQUIRE(declared.insert(m[1]).second);
      helped = m[1];
      family.clear();
    } else if (std::regex_match(line, m, type)) {
      REQUIRE(m[1] == helped);
      family = m[1];
    } else {
      REQUIRE(std::regex_match(line, m, sample));
      REQUIRE(m[1] == family);
      REQUIRE(out.emplace(m[1].str() + m[2].str(), std::stod(m[7])).second);
    }
  }
  if (std::system("command -v promtool >/dev/null 2>&1") == 0) {
    TempDir t;
    Spit(t.path + "/m.prom", text);
    auto st = std::system(fmt::format("promtool check metrics <'{}/m.prom' >'{}/out' 2>&1", t.path, t.path).c_str());
    INFO(Slurp(t.path + "/out"));
    CHECK(st == 0);
  }
  return out;
}

double At(const std::map<std::string, double>& m, const std::string& series) {
  auto it = m.find(series);
  INFO(series);
  REQUIRE(it != m.end());
  return it->second;
}

uint64_t WalBytes(const std::string& node_dir) {
  uint64_t b = 0;
  for (const auto& e : fs::directory_iterator(node_dir + "/wal")) b += fs::file_size(e.path());
  return b;
}

}  // namespace

TEST_CASE("cli metrics: check on a healthy cluster, every value as the other reports give it", "[cli][metrics]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  fs::copy(kSamples + "healthy", dir, fs::copy_options::recursive);
  const std::string prom = t.path + "/walcut.prom";
  auto r = Walcut(fmt::format("check '{}' --metrics '{}'", dir, prom));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto m = Parse(Slurp(prom));
  const std::string d = fmt::format("dir=\"{}\"", dir);
  CHECK(At(m, "walcut_check_exit_code{" + d + "}") == 0);
  CHECK(At(m, "walcut_check_success{" + d + "}") == 1);
  CHECK(At(m, "walcut_check_info{" + d + ",level=\"cuts\",cut=\"all\"}") == 1);
  CHECK(At(m, "walcut_check_items{" + d + ",outcome=\"fail\"}") == 0);
  CHECK(At(m, "walcut_cuts{" + d + ",status=\"consistent\"}") == 6);
  CHECK(At(m, "walcut_cuts{" + d + ",status=\"inconsistent\"}") == 0);
  CHECK(At(m, "walcut_restore_window_available{" + d + "}") == 1);
  CHECK(At(m, "walcut_restore_window_earliest_cut{" + d + "}") == 1);
  CHECK(At(m, "walcut_restore_window_latest_cut{" + d + "}") == 6);

  // The window's times are the cuts' latest CUT_FINISH, in Unix time.
  auto cuts = Walcut(fmt::format("cuts '{}' --format json", dir));
  REQUIRE(cuts.code == 0);
  const auto j = nlohmann::json::parse(cuts.out);
  const double epoch = j.at("epoch_unix_us").get<double>() / 1e6;
  std::map<uint64_t, double> finish;
  for (const auto& c : j.at("cuts")) finish[c.at("cut").get<uint64_t>()] = c.at("finish_time_us").get<double>() / 1e6;
  CHECK(At(m, "walcut_restore_window_earliest_cut_timestamp_seconds{" + d + "}") == Approx(epoch + finish[1]));
  CHECK(At(m, "walcut_restore_window_latest_cut_timestamp_seconds{" + d + "}") == Approx(epoch + finish[6]));
  // The age is measured at the run's time.
  CHECK(At(m, "walcut_restore_window_latest_cut_age_seconds{" + d + "}") ==
        Approx(At(m, "walcut_check_last_run_timestamp_seconds{" + d + "}") - epoch - finish[6]).margin(1e-5));

  // What was read, per node: every byte of its WAL, and the records of the
  // check's own JSON report, in all.
  double records = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string n = fmt::format(",node=\"{}\"", i);
    CHECK(At(m, "walcut_check_read_bytes{" + d + n + "}") == WalBytes(fmt::format("{}/node-{}", dir, i)));
    CHECK(At(m, "walcut_check_read_segments{" + d + n + "}") == 7);
    records += At(m, "walcut_check_read_records{" + d + n + "}");
  }
  auto js = Walcut(fmt::format("check '{}' --format json", dir));
  REQUIRE(js.code == 0);
  CHECK(records == nlohmann::json::parse(js.out).at("files").at("records").get<double>());
}

TEST_CASE("cli metrics: findings by check, cuts by status, restores", "[cli][metrics]") {
  TempDir t;
  SECTION("a damaged segment: exit 1 in the file too, findings named by check") {
    const std::string prom = t.path + "/a.prom";
    const std::string dir = kSamples + "corrupted-segment";
    auto r = Walcut(fmt::format("check '{}' --metrics '{}'", dir, prom));
    REQUIRE(r.code == 1);
    const auto m = Parse(Slurp(prom));
    const std::string d = fmt::format("dir=\"{}\"", dir);
    CHECK(At(m, "walcut_check_exit_code{" + d + "}") == 1);
    CHECK(At(m, "walcut_check_success{" + d + "}") == 0);
    CHECK(At(m, "walcut_check_findings{" + d + ",check=\"payload-checksum\"}") == 1);
    CHECK(At(m, "walcut_cuts{" + d + ",status=\"incomplete\"}") == 4);
    CHECK(At(m, "walcut_restore_window_latest_cut{" + d + "}") == 2);
    CHECK(At(m, "walcut_check_items{" + d + ",outcome=\"fail\"}") > 0);
  }
  SECTION("a pruned WAL: the unavailable cut") {
    const std::string prom = t.path + "/p.prom";
    const std::string dir = kSamples + "pruned";
    REQUIRE(Walcut(fmt::format("check '{}' --metrics '{}'", dir, prom)).code == 0);
    const auto m = Parse(Slurp(prom));
    CHECK(At(m, fmt::format("walcut_cuts{{dir=\"{}\",status=\"unavailable\"}}", dir)) == 1);
    CHECK(At(m, fmt::format("walcut_cuts{{dir=\"{}\",status=\"consistent\"}}", dir)) == 1);
  }
  SECTION("level restore of one cut") {
    const std::string prom = t.path + "/r.prom";
    const std::string dir = kSamples + "healthy";
    REQUIRE(Walcut(fmt::format("check '{}' --cut 4 --metrics '{}'", dir, prom)).code == 0);
    const auto m = Parse(Slurp(prom));
    const std::string d = fmt::format("dir=\"{}\"", dir);
    CHECK(At(m, "walcut_check_info{" + d + ",level=\"restore\",cut=\"4\"}") == 1);
    CHECK(At(m, "walcut_check_restores{" + d + ",outcome=\"restored\"}") == 1);
    CHECK(At(m, "walcut_check_restores{" + d + ",outcome=\"failed\"}") == 0);
  }
  SECTION("level files: no cut metrics") {
    const std::string prom = t.path + "/f.prom";
    REQUIRE(Walcut(fmt::format("check '{}healthy' --level files --metrics '{}'", kSamples, prom)).code == 0);
    const std::string text = Slurp(prom);
    Parse(text);
    CHECK(text.find("walcut_check_read_bytes{") != std::string::npos);
    CHECK(text.find("walcut_cuts") == std::string::npos);
  }
}

TEST_CASE("cli metrics: a directory name with quotes, backslashes and bytes that are not UTF-8", "[cli][metrics]") {
  TempDir t;
  const std::string dir = t.path + "/a\"b\\c\xff";
  fs::copy(kSamples + "healthy", dir, fs::copy_options::recursive);
  const std::string prom = t.path + "/m.prom";
  auto r = Walcut(fmt::format("check '{}' --level files --metrics '{}'", dir, prom));
  REQUIRE(r.code == 0);
  const auto m = Parse(Slurp(prom));
  // EscapeBytes: the backslash and the stray byte become \x5c and \xff; the
  // format then escapes each backslash and the quote.
  CHECK(At(m, fmt::format("walcut_check_exit_code{{dir=\"{}/a\\\"b\\\\x5cc\\\\xff\"}}", t.path)) == 0);
}

TEST_CASE("cli metrics: refusals, and the file written whole or not at all", "[cli][metrics]") {
  TempDir t;
  const std::string dir = t.path + "/c";
  fs::copy(kSamples + "healthy", dir, fs::copy_options::recursive);
  SECTION("inside the cluster directory: usage, nothing written") {
    auto r = Walcut(fmt::format("check '{}' --metrics '{}/m.prom'", dir, dir));
    CHECK(r.code == 2);
    CHECK(r.err.find("--metrics") != std::string::npos);
    CHECK(!fs::exists(dir + "/m.prom"));
  }
  SECTION("a directory that does not exist: exit 3, one line naming it") {
    auto r = Walcut(fmt::format("check '{}' --metrics '{}/no/m.prom'", dir, t.path));
    CHECK(r.code == 3);
    CHECK(Lines(r.err).size() == 1);
    CHECK(r.err.find(t.path + "/no") != std::string::npos);
  }
  SECTION("an existing file is replaced whole") {
    const std::string prom = t.path + "/m.prom";
    Spit(prom, "old\n");
    REQUIRE(Walcut(fmt::format("check '{}' --metrics '{}'", dir, prom)).code == 0);
    Parse(Slurp(prom));
  }
  SECTION("a cluster directory that does not exist: usage, no file") {
    auto r = Walcut(fmt::format("check '{}/none' --metrics '{}/m.prom'", t.path, t.path));
    CHECK(r.code == 2);
    CHECK(!fs::exists(t.path + "/m.prom"));
  }
  SECTION("snapshot check of a snapshot directory (not a repository)") {
    auto r = Walcut(fmt::format("snapshot check '{}/snapshots/full-1500' --metrics '{}/m.prom'", dir, t.path));
    CHECK(r.code == 2);
    CHECK(r.err.find("--metrics") != std::string::npos);
    CHECK(!fs::exists(t.path + "/m.prom"));
  }
}

TEST_CASE("cli metrics: snapshot check of a repository", "[cli][metrics][repo]") {
  TempDir t;
  const std::string c = t.path + "/c";
  fs::copy(kSamples + "healthy", c, fs::copy_options::recursive);
  const std::string repo = t.path + "/repo";
  for (const std::string a : {"--full --cut 2", "--incremental --cut 4", "--incremental --cut 6", "--full --cut 3"}) {
    auto r = Walcut(fmt::format("snapshot create '{}' --repo '{}' {} -q", c, repo, a));
    INFO(a << r.err);
    REQUIRE(r.code == 0);
  }
  const std::string prom = t.path + "/repo.prom";
  const std::string d = fmt::format("repo=\"{}\"", repo);
  const std::string cl = ",cluster=\"0171803ddfa9d1cc\"";

  auto r = Walcut(fmt::format("snapshot check '{}' --metrics '{}'", repo, prom));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto m = Parse(Slurp(prom));
  CHECK(At(m, "walcut_repo_check_exit_code{" + d + "}") == 0);
  CHECK(At(m, "walcut_repo_artifacts{" + d + ",type=\"full\"}") == 2);
  CHECK(At(m, "walcut_repo_artifacts{" + d + ",type=\"incremental\"}") == 2);
  CHECK(At(m, "walcut_repo_artifacts{" + d + ",type=\"unreadable\"}") == 0);
  CHECK(At(m, "walcut_repo_leftovers{" + d + "}") == 0);
  CHECK(At(m, "walcut_repo_longest_chain{" + d + cl + "}") == 3);
  CHECK(At(m, "walcut_repo_newest_restorable_cut{" + d + cl + "}") == 6);
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(repo)) {
    if (e.is_regular_file() && e.path().filename() != "manifest.json" && e.path().parent_path() != repo)
      bytes += e.file_size();
  }
  CHECK(At(m, "walcut_repo_bytes{" + d + "}") == bytes);
  auto cuts = Walcut(fmt::format("cuts '{}' --format json", c));
  const auto j = nlohmann::json::parse(cuts.out);
  const double at = (j.at("epoch_unix_us").get<double>() + j.at("cuts")[5].at("finish_time_us").get<double>()) / 1e6;
  CHECK(At(m, "walcut_repo_newest_restorable_cut_timestamp_seconds{" + d + cl + "}") == Approx(at));
  CHECK(At(m, "walcut_repo_newest_restorable_cut_age_seconds{" + d + cl + "}") ==
        Approx(At(m, "walcut_repo_check_last_run_timestamp_seconds{" + d + "}") - at).margin(1e-5));

  // A damaged increment: the check fails, and the newest cut restorable
  // through chains that passed is the other full's.
  std::string seg;
  for (const auto& e : fs::recursive_directory_iterator(repo + "/i-cut-6")) {
    if (e.path().extension() == ".zst") seg = e.path().string();
  }
  REQUIRE(!seg.empty());
  std::string b = Slurp(seg);
  b[b.size() / 2] ^= 1;
  Spit(seg, b);
  r = Walcut(fmt::format("snapshot check '{}' --metrics '{}'", repo, prom));
  REQUIRE(r.code == 1);
  m = Parse(Slurp(prom));
  CHECK(At(m, "walcut_repo_check_success{" + d + "}") == 0);
  CHECK(At(m, "walcut_repo_check_findings{" + d + ",check=\"checksum\"}") >= 1);
  CHECK(At(m, "walcut_repo_newest_restorable_cut{" + d + cl + "}") == 4);
  CHECK(At(m, "walcut_repo_longest_chain{" + d + cl + "}") == 2);

  // Inside the repository: refused, --output too; nothing written.
  r = Walcut(fmt::format("snapshot check '{}' --metrics '{}/m.prom'", repo, repo));
  CHECK(r.code == 2);
  CHECK(Lines(r.err).size() == 1);
  CHECK(r.err.find("--metrics") != std::string::npos);
  CHECK(!fs::exists(repo + "/m.prom"));
  r = Walcut(fmt::format("snapshot check '{}' -o '{}/report.txt'", repo, repo));
  CHECK(r.code == 2);
  CHECK(Lines(r.err).size() == 1);
  CHECK(r.err.find("--output") != std::string::npos);
  CHECK(!fs::exists(repo + "/report.txt"));
  // A directory that does not exist: exit 3, one line naming it.
  r = Walcut(fmt::format("snapshot check '{}' --metrics '{}/no/m.prom'", repo, t.path));
  CHECK(r.code == 3);
  CHECK(Lines(r.err).size() == 1);
  CHECK(r.err.find(t.path + "/no") != std::string::npos);
}

}  // namespace walcut::test

namespace walcut::test {

// docs/ci.md's alert rules stay valid: promtool checks them when it is installed.
TEST_CASE("cli metrics: the alert rules of docs/ci.md", "[cli][metrics]") {
  const std::string doc = Slurp(std::string(WALCUT_SOURCE_DIR) + "/docs/ci.md");
  const size_t at = doc.find("```yaml\ngroups:");
  REQUIRE(at != std::string::npos);
  const size_t begin = doc.find('\n', at) + 1;
  const std::string rules = doc.substr(begin, doc.find("```", begin) - begin);
  CHECK(rules.find("walcut_restore_window_latest_cut_timestamp_seconds") != std::string::npos);
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return;
  TempDir t;
  Spit(t.path + "/rules.yml", rules);
  const int st = std::system(fmt::format("promtool check rules '{}/rules.yml' >'{}/out' 2>&1", t.path, t.path).c_str());
  INFO(Slurp(t.path + "/out"));
  CHECK(st == 0);
}

}  // namespace walcut::test

namespace walcut::test {

TEST_CASE("cli metrics: check merge of per-node reports reads per node what the cluster check reads",
          "[cli][metrics]") {
  TempDir t;
  const std::string dir = kSamples + "healthy";
  std::string reports;
  for (int i = 0; i < 3; ++i) {
    const std::string rep = fmt::format("{}/r{}.json", t.path, i);
    REQUIRE(Walcut(fmt::format("check '{}/node-{}' --format json -o '{}'", dir, i, rep)).code == 0);
    reports += " '" + rep + "'";
  }
  REQUIRE(Walcut(fmt::format("check merge {} --metrics '{}/merged.prom'", reports, t.path)).code == 0);
  REQUIRE(Walcut(fmt::format("check '{}' --level files --metrics '{}/whole.prom'", dir, t.path)).code == 0);
  const auto merged = Parse(Slurp(t.path + "/merged.prom"));
  const auto whole = Parse(Slurp(t.path + "/whole.prom"));
  size_t compared = 0;
  for (const auto& [series, v] : merged) {
    if (series.rfind("walcut_check_read_", 0) != 0) continue;
    const std::string name = series.substr(0, series.find('{'));
    const std::string node = series.substr(series.find(",node="));
    const std::string other = fmt::format("{}{{dir=\"{}\"{}", name, dir, node);
    CHECK(v == At(whole, other));
    ++compared;
  }
  CHECK(compared == 9);
  CHECK(merged.count(fmt::format(
            "walcut_check_items{{dir=\"{0}/node-0/wal, {0}/node-1/wal, {0}/node-2/wal\",outcome=\"fail\"}}", dir)) ==
        1);
  // Inside an input: refused, the input unchanged.
  const std::string before = Slurp(t.path + "/r0.json");
  auto r = Walcut(fmt::format("check merge {} --metrics '{}/r0.json'", reports, t.path));
  CHECK(r.code == 2);
  CHECK(r.err.find("--metrics") != std::string::npos);
  CHECK(Slurp(t.path + "/r0.json") == before);
  // A directory that does not exist: exit 3, one line naming it.
  r = Walcut(fmt::format("check merge {} --metrics '{}/no/m.prom'", reports, t.path));
  CHECK(r.code == 3);
  CHECK(Lines(r.err).size() == 1);
  CHECK(r.err.find(t.path + "/no") != std::string::npos);
}

}  // namespace walcut::test
