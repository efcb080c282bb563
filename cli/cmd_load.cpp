// walcut load DIR: clients that run transactions against a real cluster
// (walcut cluster up) over the wire, for a given time. Closed loop by
// default (each client sends its next transaction when the last one is
// answered); with --rate R, open loop at R transactions per second in all,
// each latency counted from when the transaction was due (so a slow cluster
// cannot hide its queueing). At the end: throughput, latency percentiles
// (a log-linear histogram, node/histogram.h) and aborts by reason; with
// --history FILE every transaction as a JSON line.

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cluster_common.h"
#include "cli/command.h"
#include "cli/numbers.h"
#include "cli/output.h"
#include "node/histogram.h"
#include "node/rng.h"
#include "walfmt/duration.h"
#include "walfmt/file_io.h"
#include "walfmt/workload.h"

namespace walcut::cli {
namespace {

using walfmt::Status;
namespace wire = node::wire;

constexpr auto kAnswerTimeout = std::chrono::seconds(10);

struct LoadOpts {
  std::string dir;
  uint32_t clients = 8;
  std::string duration = "10s";
  std::string workload;  // default: the cluster's
  uint64_t rate = 0;     // 0: closed loop
  std::string history;
  uint64_t seed = 1;
  Format format = Format::kText;
};

// One transaction as the client saw it.
struct TxRecord {
  uint32_t client = 0;
  uint64_t request = 0;
  uint32_t node = 0;
  uint64_t start_us = 0;  // wall clock, when it was sent (open loop: when it was due)
  uint64_t ack_us = 0;    // when the answer arrived (0: none)
  enum class Outcome { kCommitted, kAborted, kRefused, kInDoubt, kUnknown } outcome = Outcome::kUnknown;
  wire::TxResult result;
};

const char* OutcomeName(TxRecord::Outcome o) {
  switch (o) {
    case TxRecord::Outcome::kCommitted:
      return "committed";
    case TxRecord::Outcome::kAborted:
      return "aborted";
    case TxRecord::Outcome::kRefused:
      return "refused";
    case TxRecord::Outcome::kInDoubt:
      return "in-doubt";
    case TxRecord::Outcome::kUnknown:
      return "unknown";
  }
  return "?";
}

const char* ReasonName(node::AbortReason r) {
  switch (r) {
    case node::AbortReason::kNone:
      return "none";
    case node::AbortReason::kConflict:
      return "conflict";
    case node::AbortReason::kInsufficientFunds:
      return "insufficient-funds";
    case node::AbortReason::kVoteNo:
      return "vote-no";
    case node::AbortReason::kBadRead:
      return "bad-read";
    case node::AbortReason::kParticipantLost:
      return "participant-lost";
  }
  return "?";
}

uint64_t WallMicros() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

struct Shared {
  const RealCluster* cluster = nullptr;
  std::string dir;
  walfmt::Workload workload = walfmt::Workload::kBank;
  std::chrono::steady_clock::time_point end;
  uint64_t rate = 0;
  uint32_t clients = 1;
  uint64_t seed = 1;
  bool keep = false;  // keep every record (--history)
  std::atomic<uint64_t> committed{0};
  std::atomic<uint64_t> aborted{0};
  std::atomic<uint64_t> failed{0};
};

struct ClientResult {
  node::Histogram latency;  // committed transactions, microseconds
  uint64_t committed = 0;
  uint64_t refused = 0;
  uint64_t in_doubt = 0;
  uint64_t unknown = 0;
  uint64_t aborted_by[6] = {};
  std::vector<TxRecord> records;
};

// One client: a connection to one node, moved to the next live node when
// that one stops answering.
void RunClient(Shared& sh, uint32_t id, ClientResult& out) {
  const RealCluster& cl = *sh.cluster;
  const uint32_t nodes = cl.info.nodes;
  uint32_t node = id % nodes;
  std::unique_ptr<node::Client> conn;
  uint64_t seq = 0;
  const auto start = std::chrono::steady_clock::now();
  const double interval_us = sh.rate ? 1e6 * sh.clients / static_cast<double>(sh.rate) : 0;
  uint64_t seed_state = sh.seed ^ (uint64_t{id} << 32);
  while (std::chrono::steady_clock::now() < sh.end) {
    uint64_t due_us = 0;
    if (sh.rate) {
      const auto due = start + std::chrono::microseconds(static_cast<uint64_t>(interval_us * static_cast<double>(seq)));
      if (due >= sh.end) break;
      std::this_thread::sleep_until(due);
      due_us =
          WallMicros() -
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - due).count());
    }
    if (!conn) {
      auto c =
          node::Client::Connect(cl.rt.host, cl.rt.ports[node], cl.info.cluster_id, wire::Role::kClient, kCallTimeout);
      if (!c.ok()) {
        node = (node + 1) % nodes;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      conn = std::move(*c);
    }
    TxRecord rec;
    rec.client = id;
    rec.request = (uint64_t{id} << 40) | ++seq;
    rec.node = node;
    rec.start_us = sh.rate ? due_us : WallMicros();
    wire::TxRequest req{rec.request, sh.workload, node::SplitMix64(seed_state)};
    auto m = conn->Call(req, kAnswerTimeout);
    const wire::TxResult* r = m.ok() ? std::get_if<wire::TxResult>(&*m) : nullptr;
    if (r == nullptr || r->request_id != rec.request) {
      // No answer: the node died or the connection broke. The outcome is
      // unknown to the client (it may have committed).
      ++out.unknown;
      sh.failed.fetch_add(1, std::memory_order_relaxed);
      if (sh.keep) out.records.push_back(std::move(rec));
      conn.reset();
      node = (node + 1) % nodes;
      continue;
    }
    rec.ack_us = WallMicros();
    rec.result = *r;
    switch (r->outcome) {
      case wire::Outcome::kCommitted:
        rec.outcome = TxRecord::Outcome::kCommitted;
        ++out.committed;
        sh.committed.fetch_add(1, std::memory_order_relaxed);
        out.latency.Record(rec.ack_us > rec.start_us ? rec.ack_us - rec.start_us : 0);
        break;
      case wire::Outcome::kAborted:
        rec.outcome = TxRecord::Outcome::kAborted;
        ++out.aborted_by[static_cast<size_t>(r->reason) % 6];
        sh.aborted.fetch_add(1, std::memory_order_relaxed);
        break;
      case wire::Outcome::kInDoubt:
        rec.outcome = TxRecord::Outcome::kInDoubt;
        ++out.in_doubt;
        sh.failed.fetch_add(1, std::memory_order_relaxed);
        break;
      case wire::Outcome::kRefused:
        rec.outcome = TxRecord::Outcome::kRefused;
        ++out.refused;
        sh.failed.fetch_add(1, std::memory_order_relaxed);
        conn.reset();  // a node that refuses (recovering): try the next one
        node = (node + 1) % nodes;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        break;
    }
    if (sh.keep) out.records.push_back(std::move(rec));
  }
}

// Times are wall-clock microseconds since the Unix epoch; the node's commit
// time, in cluster time, is moved onto that clock with the cluster's epoch.
nlohmann::ordered_json RecordJson(const TxRecord& r, uint64_t epoch_us) {
  nlohmann::ordered_json j;
  j["client"] = r.client;
  j["request"] = r.request;
  j["node"] = r.node;
  if (r.outcome == TxRecord::Outcome::kCommitted || r.outcome == TxRecord::Outcome::kAborted ||
      r.outcome == TxRecord::Outcome::kInDoubt) {
    j["tx"] = r.result.tx.ToString();
  } else {
    j["tx"] = nullptr;
  }
  j["outcome"] = OutcomeName(r.outcome);
  if (r.outcome == TxRecord::Outcome::kAborted) j["reason"] = ReasonName(r.result.reason);
  if (r.outcome == TxRecord::Outcome::kRefused) j["reason"] = r.result.message;
  nlohmann::ordered_json reads = nlohmann::ordered_json::object();
  for (const auto& [k, v] : r.result.reads) reads[k] = v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
  nlohmann::ordered_json writes = nlohmann::ordered_json::object();
  for (const auto& w : r.result.writes) writes[w.key] = w.value;
  j["reads"] = std::move(reads);
  j["writes"] = std::move(writes);
  j["start_us"] = r.start_us;
  j["ack_us"] = r.ack_us;
  j["commit_time_us"] = r.result.commit_time_us ? epoch_us + r.result.commit_time_us : 0;
  return j;
}

int Fail(const Status& st) {
  PrintError(st.message());
  return ExitForStatus(st);
}

// The summary: text, or JSON with --json.
void PrintReport(const LoadOpts& o, const ClientResult& all, double secs) {
  uint64_t aborted = 0;
  for (uint64_t a : all.aborted_by) aborted += a;
  const double tps = all.committed / std::max(secs, 1e-9);
  if (o.format == Format::kJson) {
    nlohmann::ordered_json j;
    j["schema"] = "walcut.load/1";
    j["clients"] = o.clients;
    j["mode"] = o.rate ? "open" : "closed";
    if (o.rate) j["rate"] = o.rate;
    j["seconds"] = secs;
    j["committed"] = all.committed;
    j["committed_per_second"] = tps;
    nlohmann::ordered_json lat;
    for (auto [name, p] : {std::pair{"p50", 50.0}, {"p90", 90.0}, {"p99", 99.0}, {"p99_9", 99.9}}) {
      lat[name] = all.latency.Percentile(p);
    }
    lat["max"] = all.latency.Max();
    j["latency_us"] = std::move(lat);
    nlohmann::ordered_json ab;
    for (size_t i = 1; i < 6; ++i) ab[ReasonName(static_cast<node::AbortReason>(i))] = all.aborted_by[i];
    j["aborted"] = aborted;
    j["aborted_by_reason"] = std::move(ab);
    j["refused"] = all.refused;
    j["in_doubt"] = all.in_doubt;
    j["unanswered"] = all.unknown;
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("{} clients, {} loop{}, {:.1f} s: {} committed, {:.0f}/s\n", o.clients, o.rate ? "open" : "closed",
               o.rate ? fmt::format(" at {}/s", o.rate) : std::string(), secs, all.committed, tps);
    fmt::print("latency (committed): p50 {} us  p90 {} us  p99 {} us  p99.9 {} us  max {} us\n",
               all.latency.Percentile(50), all.latency.Percentile(90), all.latency.Percentile(99),
               all.latency.Percentile(99.9), all.latency.Max());
    std::string reasons;
    for (size_t i = 1; i < 6; ++i) {
      if (all.aborted_by[i]) {
        reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", all.aborted_by[i],
                               ReasonName(static_cast<node::AbortReason>(i)));
      }
    }
    fmt::print("aborted: {}{}; refused: {}; in doubt: {}; unanswered: {}\n", aborted,
               reasons.empty() ? "" : " (" + reasons + ")", all.refused, all.in_doubt, all.unknown);
  }
}

int RunLoad(const LoadOpts& o) {
  const std::string dir = AbsoluteDir(o.dir);
  auto cl = LoadRealCluster(dir);
  if (!cl.ok()) return Fail(cl.status());
  auto dur = walfmt::ParseDuration(o.duration);
  if (!dur.ok() || *dur < 1000 || *dur > 24ull * 3600 * 1000000) {
    return Fail(Status::InvalidArgument(fmt::format("--duration: '{}': a duration from 1ms to 24h", o.duration)));
  }
  Shared sh;
  sh.cluster = &*cl;
  sh.dir = dir;
  sh.workload = cl->info.workload;
  if (!o.workload.empty() && !walfmt::ParseWorkload(o.workload, sh.workload)) {
    return Fail(Status::InvalidArgument(fmt::format("--workload: '{}' is not bank, cycle or mixed", o.workload)));
  }
  if (sh.workload != cl->info.workload && cl->info.workload != walfmt::Workload::kMixed) {
    return Fail(Status::InvalidArgument(fmt::format("--workload {}: the cluster was created with {}",
                                                    walfmt::WorkloadName(sh.workload),
                                                    walfmt::WorkloadName(cl->info.workload))));
  }
  sh.rate = o.rate;
  sh.clients = o.clients;
  sh.seed = o.seed;
  sh.keep = !o.history.empty();
  const auto t0 = std::chrono::steady_clock::now();
  sh.end = t0 + std::chrono::microseconds(*dur);
  std::vector<ClientResult> results(o.clients);
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < o.clients; ++i) threads.emplace_back([&sh, &results, i] { RunClient(sh, i, results[i]); });
  const bool progress = !Quiet() && isatty(STDERR_FILENO);
  while (progress && std::chrono::steady_clock::now() < sh.end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const uint64_t c = sh.committed.load();
    fmt::print(stderr, "\r\x1b[Kload {:.1f}s: {} committed ({:.0f}/s), {} aborted, {} unanswered", secs, c,
               c / std::max(secs, 0.001), sh.aborted.load(), sh.failed.load());
  }
  for (auto& t : threads) t.join();
  if (progress) fmt::print(stderr, "\r\x1b[K");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  ClientResult all;
  for (auto& r : results) {
    all.latency.Merge(r.latency);
    all.committed += r.committed;
    all.refused += r.refused;
    all.in_doubt += r.in_doubt;
    all.unknown += r.unknown;
    for (size_t i = 0; i < 6; ++i) all.aborted_by[i] += r.aborted_by[i];
  }
  if (!o.history.empty()) {
    std::vector<const TxRecord*> recs;
    for (auto& r : results) {
      for (auto& rec : r.records) recs.push_back(&rec);
    }
    std::sort(recs.begin(), recs.end(), [](const TxRecord* a, const TxRecord* b) {
      return a->start_us != b->start_us ? a->start_us < b->start_us : a->request < b->request;
    });
    std::string text;
    for (const TxRecord* r : recs) text += RecordJson(*r, cl->info.epoch_unix_us.value_or(0)).dump() + "\n";
    if (Status st = walfmt::WriteFileAtomic(o.history, text); !st.ok()) return Fail(st);
  }
  PrintReport(o, all, secs);
  return kExitOk;
}

void RegisterLoad(CLI::App& root, Registry& reg) {
  auto o = std::make_shared<LoadOpts>();
  CLI::App* sub = root.add_subcommand("load", "Run client transactions against a running cluster (walcut cluster up)");
  sub->add_option("dir", o->dir, "Cluster directory")->required();
  AddNumber(sub, "--clients", o->clients, {1, 1024}, "Concurrent clients")->default_str("8");
  sub->add_option("--duration", o->duration, "How long (a duration: 500ms, 10s, 2m)")->capture_default_str();
  sub->add_option("--workload", o->workload, "bank, cycle or mixed (default: the cluster's)");
  AddNumber(sub, "--rate", o->rate, {1, 10000000},
            "Open loop: this many transactions per second in all (default: closed loop)");
  sub->add_option("--history", o->history, "Write every transaction to FILE as JSON lines");
  AddNumber(sub, "--seed", o->seed, {0, UINT64_MAX}, "Seed of the transactions' programs")->default_str("1");
  AddFormatOption(sub, o->format);
  reg.Add(sub, [o] { return RunLoad(*o); });
}

const CommandRegistrar kRegister{53, RegisterLoad};
}  // namespace

}  // namespace walcut::cli
