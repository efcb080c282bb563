// walcut history check's rules (recovery/history.h) on a small hand-made
// world: a two-node bank cluster, a client history, the WAL facts and the
// restored states that go with it. The world as built passes; each test
// below doctors one input so that exactly one rule must catch it (switching
// that rule off makes the test fail).
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "recovery/history.h"
#include "recovery_support.h"

using namespace walcut::recovery;
using namespace walcut::recovery::testing;
using walfmt::TxId;

namespace {

constexpr uint64_t kEpoch = 1'800'000'000'000'000;  // wall clock of cluster time 0
constexpr uint64_t kMs = 1000;

struct Committed {
  TxId tx;
  std::map<std::string, std::string> writes;
  std::vector<walfmt::Lsn> commit;  // by node
};

// Two nodes, one backup: every key on both. Records are appended to both
// nodes' WALs in time order; a cut's CUT_START and CUT_FINISH too.
class World {
 public:
  World() {
    info = HandInfo(2, 1);
    info.workload = walfmt::Workload::kBank;
    info.accounts = 4;
    info.ring_keys = 0;
    info.initial_bank_total = 400;
    info.epoch_unix_us = kEpoch;
    wal.resize(2);
    // The initial data: a transaction of node 0 the history does not name.
    Commit(TxId{0, 1}, 1 * kMs,
           {{"acct/000000", "100"}, {"acct/000001", "100"}, {"acct/000002", "100"}, {"acct/000003", "100"}});
    for (const auto& [k, v] : committed.back().writes) wal_writes[TxId{0, 1}][k] = {walfmt::WriteOp::kPut, k, v};
    // T1: acct0 -> acct1 30, acknowledged before cut 1.
    Client(TxId{0, 2}, HistoryOutcome::kCommitted, 20, 21, 22, {{"acct/000000", "70"}, {"acct/000001", "130"}});
    Cut(1, 30, 31);
    // T2: acct2 -> acct3 10; T3 aborted (rolled back on both); an unanswered
    // transaction of node 0 that committed (acct1 -> acct2 5).
    Client(TxId{1, 1}, HistoryOutcome::kCommitted, 40, 41, 42, {{"acct/000002", "90"}, {"acct/000003", "110"}});
    Client(TxId{1, 2}, HistoryOutcome::kAborted, 43, 0, 44, {});
    Unanswered(0, 45);
    Commit(TxId{0, 3}, 46 * kMs, {{"acct/000001", "125"}, {"acct/000002", "95"}});
    for (const auto& [k, v] : committed.back().writes) wal_writes[TxId{0, 3}][k] = {walfmt::WriteOp::kPut, k, v};
    // T6 (acct1 -> acct2 5), reported in doubt (its 1PC primary was lost),
    // and committed.
    Client(TxId{1, 4}, HistoryOutcome::kInDoubt, 46, 0, 47, {});
    for (auto& n : wal) n.erase(TxId{1, 4});
    Commit(TxId{1, 4}, 47 * kMs, {{"acct/000001", "120"}, {"acct/000002", "100"}});
    for (const auto& [k, v] : committed.back().writes) wal_writes[TxId{1, 4}][k] = {walfmt::WriteOp::kPut, k, v};
    // Cut 2 starts at 50 ms; T5 (acct0 -> acct3 4) commits after CUT_START
    // but with a marker below 2: in cut 2's before sets, so in the cut.
    Cut(2, 50, 53);
    Client(TxId{1, 3}, HistoryOutcome::kCommitted, 49, 51, 52, {{"acct/000000", "66"}, {"acct/000003", "114"}});
    for (uint32_t n = 0; n < 2; ++n) {
      cuts.back().nodes[n].before.insert(TxId{1, 3});
      cuts.back().nodes[n].finish = Next(n);  // CUT_FINISH after T5's commit
    }
    // T4 after the last cut.
    Client(TxId{0, 4}, HistoryOutcome::kCommitted, 60, 61, 62, {{"acct/000003", "113"}, {"acct/000000", "67"}});
  }

  // The restored state of cut k by the cut rule, placed on both nodes.
  std::vector<NodeState> Restored(uint64_t k) const {
    const CutFacts& c = cuts.at(k - 1);
    std::map<std::string, std::string> s;
    for (const auto& t : committed) {
      const auto& n = c.nodes[0];
      const bool in = t.commit[0] < n.start ? n.after.count(t.tx) == 0 : n.before.count(t.tx) != 0;
      if (in) {
        for (const auto& [key, v] : t.writes) s[key] = v;
      }
    }
    return Place(info, s);
  }

  HistoryCheckInput Input() const {
    HistoryCheckInput in;
    in.info = info;
    in.history = history;
    in.wal = wal;
    in.wal_writes = wal_writes;
    in.cuts = cuts;
    in.restore = [this](uint64_t k) -> walfmt::Result<std::vector<NodeState>> {
      auto it = restored.find(k);
      return it != restored.end() ? it->second : Restored(k);
    };
    return in;
  }

  HistoryTx& Hist(const TxId& t) {
    return *std::find_if(history.txs.begin(), history.txs.end(), [&](const HistoryTx& h) { return h.tx == t; });
  }

  walfmt::ClusterInfo info;
  History history;
  std::vector<NodeTxs> wal;
  std::map<TxId, std::map<std::string, walfmt::Write>> wal_writes;
  std::vector<CutFacts> cuts;
  std::vector<Committed> committed;
  std::map<uint64_t, std::vector<NodeState>> restored;  // overrides Restored(k)

 private:
  walfmt::Lsn Next(uint32_t node) { return walfmt::Lsn{0, 0x40 + 0x10 * ++records_[node]}; }

  void Commit(const TxId& t, uint64_t cluster_us, std::map<std::string, std::string> writes) {
    Committed c{t, std::move(writes), {}};
    for (uint32_t n = 0; n < 2; ++n) {
      NodeTx& x = wal[n][t];
      x.first = Next(n);
      x.committed = true;
      x.commit = Next(n);
      x.commit_time_us = cluster_us;
      x.participants = {0, 1};
      c.commit.push_back(x.commit);
    }
    committed.push_back(std::move(c));
  }

  void Client(const TxId& t, HistoryOutcome o, uint64_t start_ms, uint64_t commit_ms, uint64_t ack_ms,
              std::map<std::string, std::string> writes) {
    HistoryTx h;
    h.line = history.txs.size() + 1;
    h.node = t.node;
    h.request = history.txs.size() + 1;
    h.tx = t;
    h.outcome = o;
    h.writes = writes;
    h.start_us = kEpoch + start_ms * kMs;
    h.ack_us = kEpoch + ack_ms * kMs;
    h.commit_time_us = commit_ms ? kEpoch + commit_ms * kMs : 0;
    history.txs.push_back(h);
    if (o == HistoryOutcome::kCommitted) {
      Commit(t, commit_ms * kMs, std::move(writes));
    } else {
      for (uint32_t n = 0; n < 2; ++n) {
        NodeTx& x = wal[n][t];
        x.first = Next(n);
        x.rolled_back = true;
        x.participants = {0, 1};
        Next(n);
      }
    }
  }

  void Unanswered(uint32_t node, uint64_t start_ms) {
    HistoryTx h;
    h.line = history.txs.size() + 1;
    h.node = node;
    h.outcome = HistoryOutcome::kUnknown;
    h.start_us = kEpoch + start_ms * kMs;
    history.txs.push_back(h);
  }

  void Cut(uint64_t k, uint64_t start_ms, uint64_t finish_ms) {
    CutFacts c;
    c.cut = k;
    c.consistent = true;
    c.status = "consistent";
    for (uint32_t n = 0; n < 2; ++n) {
      CutNodeFacts f;
      f.start = Next(n);
      f.start_time_us = start_ms * kMs;
      f.finish = Next(n);
      f.finish_time_us = finish_ms * kMs;
      c.nodes.push_back(f);
    }
    cuts.push_back(c);
  }

  uint64_t records_[2] = {};
};

std::string Describe(const HistoryReport& r) {
  std::string s;
  for (const auto& f : r.outcome_findings) s += fmt::format("\n  outcome: {}", f.message);
  for (const auto& c : r.cuts) {
    for (const auto& f : c.findings) s += fmt::format("\n  cut {} {}: {}", c.cut, HistoryRuleName(f.rule), f.message);
  }
  return s.empty() ? "no findings" : s;
}

HistoryReport Run(const World& w, HistoryCheckOptions opt = {}) {
  auto r = CheckHistory(w.Input(), opt);
  REQUIRE(r.ok());
  return std::move(*r);
}

// The findings of `rule` over the whole report.
std::vector<HistoryFinding> Of(const HistoryReport& r, HistoryRule rule) {
  std::vector<HistoryFinding> v;
  for (const auto& f : r.outcome_findings) {
    if (f.rule == rule) v.push_back(f);
  }
  for (const auto& c : r.cuts) {
    for (const auto& f : c.findings) {
      if (f.rule == rule) v.push_back(f);
    }
  }
  return v;
}

}  // namespace

TEST_CASE("history check: the hand-made world passes, with the counts of each cut") {
  World w;
  const HistoryReport r = Run(w);
  INFO(Describe(r));
  REQUIRE(r.ok());
  REQUIRE(r.cuts_checked == 2);
  REQUIRE(r.committed == 4);
  REQUIRE(r.aborted == 1);
  REQUIRE(r.in_doubt == 1);
  REQUIRE(r.unknown == 1);
  REQUIRE(r.wal_committed == 7);
  REQUIRE(r.unnamed == 2);
  const auto& c1 = r.cuts[0];
  CHECK(c1.history_in_cut == 1);         // T1
  CHECK(c1.unacknowledged_in_cut == 1);  // the initial data
  CHECK(c1.acknowledged_before == 1);
  CHECK(c1.started_after == 3);  // T2, T5, T4
  const auto& c2 = r.cuts[1];
  CHECK(c2.history_in_cut == 3);         // T1, T2, T5 (in the before sets)
  CHECK(c2.unacknowledged_in_cut == 3);  // the initial data, 0:3 (unanswered), 1:4 (in doubt)
  CHECK(c2.acknowledged_before == 2);
  CHECK(c2.started_after == 1);  // T4
  CHECK(c2.keys == 4);
  CHECK(c2.start_unix_us == kEpoch + 50 * kMs);
  CHECK(c2.finish_unix_us == kEpoch + 53 * kMs);
}

TEST_CASE("history check: the clock slack counts in the safe direction") {
  World w;
  HistoryCheckOptions opt;
  opt.clock_slack_us = 9 * kMs;  // T1 acknowledged 8 ms before cut 1: no longer held to rule 1
  HistoryReport r = Run(w, opt);
  CHECK(r.cuts[0].acknowledged_before == 0);
  CHECK(r.cuts[0].started_after == 2);  // T5 (49 > 31 + 9) and T4; not T2 (40)
  opt.clock_slack_us = 0;
  r = Run(w, opt);
  CHECK(r.cuts[0].acknowledged_before == 1);
  CHECK(r.ok());
}

TEST_CASE("history check rule 1: a transaction acknowledged before the cut started is in it") {
  World w;
  // T2 acknowledged at 25 ms (and started at 24), before cut 1 (30 ms); the
  // WAL commits it after cut 1.
  w.Hist(TxId{1, 1}).start_us = kEpoch + 24 * kMs;
  w.Hist(TxId{1, 1}).ack_us = kEpoch + 25 * kMs;
  const HistoryReport r = Run(w);
  INFO(Describe(r));
  const auto f = Of(r, HistoryRule::kAcknowledged);
  REQUIRE(f.size() == 1);
  CHECK(f[0].cut == 1);
  CHECK(f[0].tx == TxId{1, 1});
  CHECK(f[0].line == 2u);
  CHECK(f[0].found == "not in it on nodes 0,1");
  CHECK(f[0].message.find("before cut 1 started") != std::string::npos);
  CHECK(r.cuts[0].total_findings == 1);
  CHECK_FALSE(r.ok());
}

TEST_CASE("history check rule 2: a transaction started after the cut finished is not in it") {
  World w;
  // T1 started (as the client says) at 45 ms, after cut 1 finished (31 ms),
  // but the WAL has it in cut 1.
  w.Hist(TxId{0, 2}).start_us = kEpoch + 45 * kMs;
  w.Hist(TxId{0, 2}).ack_us = kEpoch + 46 * kMs;
  const HistoryReport r = Run(w);
  INFO(Describe(r));
  const auto f = Of(r, HistoryRule::kStartedAfter);
  REQUIRE(f.size() == 1);
  CHECK(f[0].cut == 1);
  CHECK(f[0].tx == TxId{0, 2});
  CHECK(f[0].found == "in it on nodes 0,1");
  CHECK(r.cuts[0].total_findings == 1);
  CHECK(r.cuts[1].total_findings == 0);
}

TEST_CASE("history check rule 3: an unanswered transaction in the cut on one participant only") {
  World w;
  // 0:3 (unknown to the client) committed before cut 2 on both nodes, but
  // node 1's CUT_FINISH(2) puts it in the after set.
  w.cuts[1].nodes[1].after.insert(TxId{0, 3});
  const HistoryReport r = Run(w);
  INFO(Describe(r));
  const auto f = Of(r, HistoryRule::kAllOrNothing);
  REQUIRE(f.size() == 1);
  CHECK(f[0].cut == 2);
  CHECK(f[0].tx == TxId{0, 3});
  CHECK(f[0].node == 1u);
  CHECK(f[0].message == "0:3 is in cut 2 on nodes 0 but not on nodes 1");
  CHECK(r.cuts[1].total_findings == 1);
}

TEST_CASE("history check rule 3: a transaction in doubt may commit, on all participants or none") {
  World w;
  w.cuts[1].nodes[0].after.insert(TxId{1, 4});
  HistoryReport r = Run(w);
  INFO(Describe(r));
  auto f = Of(r, HistoryRule::kAllOrNothing);
  REQUIRE(f.size() == 1);
  CHECK(f[0].tx == TxId{1, 4});
  CHECK(f[0].line == 5u);
  CHECK(Of(r, HistoryRule::kOutcome).empty());
  // Reported aborted, for any reason (participant-lost included: a decided
  // abort), it must not commit.
  for (const char* reason : {"conflict", "participant-lost"}) {
    INFO(reason);
    w = World();
    w.Hist(TxId{1, 4}).outcome = HistoryOutcome::kAborted;
    w.Hist(TxId{1, 4}).reason = reason;
    r = Run(w);
    INFO(Describe(r));
    f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 2);
    CHECK(f[0].tx == TxId{1, 4});
  }
}

TEST_CASE("history check rule 3: committed in the history <=> committed in the WAL") {
  SECTION("acknowledged committed, rolled back in the WAL") {
    World w;
    w.Hist(TxId{1, 2}).outcome = HistoryOutcome::kCommitted;
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 1);
    CHECK(f[0].tx == TxId{1, 2});
    CHECK(f[0].found == "rolled back");
  }
  SECTION("acknowledged committed, one participant has no TX_COMMIT") {
    World w;
    w.wal[1][TxId{0, 4}].committed = false;
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == 1u);
    CHECK(f[0].found == "not committed");
  }
  SECTION("acknowledged committed, a node holding a key it wrote has no record of it") {
    World w;
    w.wal[1].erase(TxId{0, 4});
    w.wal[0][TxId{0, 4}].participants = {0};
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == 1u);
    CHECK(f[0].found == "no record");
  }
  SECTION("reported aborted, committed in the WAL") {
    World w;
    w.Hist(TxId{0, 4}).outcome = HistoryOutcome::kAborted;
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 2);
    CHECK(f[0].expected == "not committed");
    CHECK(f[0].found == "committed");
  }
  SECTION("committed in the WAL, unknown to the history and not unanswered") {
    World w;
    w.history.txs.erase(std::remove_if(w.history.txs.begin(), w.history.txs.end(),
                                       [](const HistoryTx& h) { return h.outcome == HistoryOutcome::kUnknown; }),
                        w.history.txs.end());
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kOutcome);
    REQUIRE(f.size() == 1);
    CHECK(f[0].tx == TxId{0, 3});
    CHECK(f[0].expected == "at most 0");
  }
}

TEST_CASE("history check rule 4: the restored state is the history's") {
  SECTION("the history wrote another value") {
    World w;
    w.Hist(TxId{1, 1}).writes["acct/000002"] = "91";
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kState);
    // Cut 2 only (T2 is not in cut 1), then overwritten by 0:3: acct2 is 95
    // in the restore and in the expectation.
    CHECK(f.empty());
    w.Hist(TxId{1, 1}).writes["acct/000003"] = "111";  // nobody overwrites acct3 before T5
    w.Hist(TxId{1, 3}).writes["acct/000003"] = "115";
    const HistoryReport r2 = Run(w);
    INFO(Describe(r2));
    const auto f2 = Of(r2, HistoryRule::kState);
    REQUIRE(f2.size() == 2);  // acct/000003 on both nodes
    CHECK(f2[0].cut == 2);
    CHECK(f2[0].key == "acct/000003");
    CHECK(f2[0].expected == "115");
    CHECK(f2[0].found == "114");
  }
  SECTION("a key's last writer is the one its primary committed last, whenever the client heard of it") {
    // T1 (0:2) is acknowledged long after the later writers of acct1 (0:3,
    // then 1:4) committed, as a one-phase transaction's near node can hear
    // late: the primary's WAL order decides, not the client's time.
    World w;
    w.Hist(TxId{0, 2}).commit_time_us = kEpoch + 48 * kMs;
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    CHECK(Of(r, HistoryRule::kState).empty());
  }
  SECTION("the restore lost a key") {
    World w;
    auto s = w.Restored(1);
    s[1].erase("acct/000001");
    w.restored[1] = s;
    const HistoryReport r = Run(w);
    INFO(Describe(r));
    const auto f = Of(r, HistoryRule::kState);
    REQUIRE(f.size() == 1);
    CHECK(f[0].node == 1u);
    CHECK(f[0].found == "missing");
  }
  SECTION("the restore refuses the cut") {
    World w;
    HistoryCheckInput in = w.Input();
    in.restore = [](uint64_t) -> walfmt::Result<std::vector<NodeState>> {
      return walfmt::Status::InvalidArgument("refused");
    };
    auto r = CheckHistory(in, {});
    REQUIRE(r.ok());
    CHECK(Of(*r, HistoryRule::kState).size() == 2);
    in.restore = [](uint64_t) -> walfmt::Result<std::vector<NodeState>> { return walfmt::Status::Io("disk"); };
    CHECK(CheckHistory(in, {}).status().code() == walfmt::ErrorCode::kIo);
  }
}

TEST_CASE("history check rule 5: the workload's invariants on the restored state") {
  World w;
  // A transfer that creates money, in the history and the restore alike:
  // rule 4 agrees, the bank total does not.
  w.Hist(TxId{0, 2}).writes["acct/000001"] = "131";
  for (uint64_t k : {1, 2}) {
    auto s = w.Restored(k);
    for (auto& n : s) {
      if (k == 1) n["acct/000001"] = "131";
    }
    w.restored[k] = s;
  }
  const HistoryReport r = Run(w);
  INFO(Describe(r));
  CHECK(Of(r, HistoryRule::kState).empty());
  const auto f = Of(r, HistoryRule::kInvariant);
  REQUIRE(f.size() == 1);
  CHECK(f[0].cut == 1);
  CHECK(f[0].message.find("bank.total") != std::string::npos);
}

TEST_CASE("history check: at most 100 findings per cut, the rest counted") {
  World w;
  w.restored[1] = w.Restored(1);
  for (uint32_t i = 0; i < 150; ++i) {
    for (auto& n : w.restored[1]) n[fmt::format("junk/{:03}", i)] = "x";
  }
  const HistoryReport r = Run(w);
  CHECK(r.cuts[0].total_findings == 300);
  CHECK(r.cuts[0].findings.size() == kMaxHistoryFindings);
}

TEST_CASE("history check: a cut that is not consistent is not checked, and a cluster without an epoch is refused") {
  World w;
  w.cuts[0].consistent = false;
  w.cuts[0].status = "inconsistent";
  w.cuts[0].reason = "node 1 restarted";
  w.Hist(TxId{1, 1}).ack_us = kEpoch + 25 * kMs;  // would break rule 1 in cut 1
  HistoryReport r = Run(w);
  CHECK(r.ok());
  CHECK(r.cuts_checked == 1);
  CHECK_FALSE(r.cuts[0].checked);
  w.info.epoch_unix_us.reset();
  auto bad = CheckHistory(w.Input(), {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == walfmt::ErrorCode::kInvalidArgument);
  CHECK(bad.status().message().find("epoch_unix_us") != std::string::npos);
}

TEST_CASE("history check: the history file's lines are checked, naming file and line") {
  const std::string ok =
      R"({"client":0,"request":1,"node":0,"tx":"0:2","outcome":"committed","reads":{},"writes":{"a":"1"},)"
      R"("start_us":10,"ack_us":20,"commit_time_us":15})";
  const std::string unknown =
      R"({"client":0,"request":2,"node":1,"tx":null,"outcome":"unknown","reads":{},"writes":{},)"
      R"("start_us":30,"ack_us":0,"commit_time_us":0})";
  auto h = ParseHistory(ok + "\n\n" + unknown + "\n", "h.jsonl");
  REQUIRE(h.ok());
  REQUIRE(h->txs.size() == 2);
  CHECK(h->txs[0].tx == TxId{0, 2});
  CHECK(h->txs[0].writes.at("a") == "1");
  CHECK(h->txs[1].line == 3);
  CHECK_FALSE(h->txs[1].tx);

  auto err = [](const std::string& text) {
    auto r = ParseHistory(text, "h.jsonl");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == walfmt::ErrorCode::kInvalidArgument);
    return r.status().message();
  };
  CHECK(err(ok + "\n{not json\n") == "h.jsonl:2: not a JSON object");
  CHECK(err(ok + "\n" + ok + "\n") == "h.jsonl:2: transaction 0:2 is already on line 1");
  std::string s = ok;
  s.replace(s.find("\"committed\""), 11, "\"maybe\"");
  CHECK(err(s).find("h.jsonl:1: field 'outcome'") == 0);
  s = ok;
  s.replace(s.find("\"0:2\""), 5, "null");
  CHECK(err(s).find("h.jsonl:1: field 'tx'") == 0);
  s = ok;
  s.replace(s.find("\"start_us\":10,"), 14, "");
  CHECK(err(s).find("h.jsonl:1: field 'start_us'") == 0);
  s = unknown;
  s.replace(s.find("null"), 4, "\"1:1\"");
  CHECK(err(s).find("h.jsonl:1: field 'tx': expected null") == 0);
}

TEST_CASE("history check: a history file read in pieces keeps its line numbers") {
  TempDir dir("history-lines");
  const std::string path = dir.str() + "/h.jsonl";
  std::string text;
  const size_t lines = 6000;  // about 1.4 MiB: more than one piece
  for (size_t i = 1; i <= lines; ++i) {
    text += fmt::format(R"({{"client":0,"request":{},"node":0,"tx":"0:{}","outcome":"committed","reads":{{}},)"
                        R"("writes":{{"acct/000001":"{}"}},"start_us":{},"ack_us":{},"commit_time_us":{},"pad":"{}"}})"
                        "\n",
                        i, i, i, i, i + 1, i, std::string(120, 'x'));
  }
  WriteAll(path, text);
  auto h = LoadHistory(path);
  REQUIRE(h.ok());
  REQUIRE(h->txs.size() == lines);
  CHECK(h->txs.back().line == lines);
  CHECK(h->txs.back().tx == TxId{0, lines});
  WriteAll(path, text + "{\"client\":\n");
  auto bad = LoadHistory(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == fmt::format("{}:{}: not a JSON object", path, lines + 1));
  WriteAll(path, text + text.substr(0, text.find('\n') + 1));
  bad = LoadHistory(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == fmt::format("{}:{}: transaction 0:1 is already on line 1", path, lines + 1));
  CHECK(LoadHistory(dir.str() + "/none.jsonl").status().code() == walfmt::ErrorCode::kNotFound);
}

TEST_CASE("history check of a cluster directory: every consistent cut of the WAL is checked, the others named") {
  // The healthy sample: six consistent cuts. An empty history names none of
  // the WAL's transactions; what matters here is which cuts are checked.
  auto r = CheckClusterHistory(std::string(WALCUT_SOURCE_DIR) + "/samples/healthy", History{}, HistoryCheckOptions{});
  INFO(r.status().message());
  REQUIRE(r.ok());
  REQUIRE(r->cuts.size() == 6);
  CHECK(r->cuts_checked == 6);
  for (const auto& c : r->cuts) {
    CHECK(c.checked);
    CHECK(c.status == "consistent");
  }
}
