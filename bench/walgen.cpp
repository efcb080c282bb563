// walgen: writes a cluster directory of synthetic but realistic WAL for
// benchmarks, with walfmt's own writer.
//
//   walgen OUT_DIR --nodes N --bytes BYTES_PER_NODE --seed S --segment-size BYTES
//          [--compress] [--archive-last] [--sync-every N] [--backups B] [--quiet]
//
// Layout: OUT_DIR/node-<i>/wal/<16 hex>.wal (and .wal.zst with --compress),
// the layout every walcut command reads.
//
// The record stream is that of a small KV cluster running transactions:
// many transactions are in flight at once, so their records interleave in
// each node's WAL. A transaction is coordinated by a near node and touches a
// primary and its backups (the participants); every participant writes
//   TX_DATA (1-4 writes, mostly 1-2: keys of 16-23 bytes, values of 40-200
//            bytes, so records of 100-300 bytes, up to about 900; one record,
//            sometimes two), then
//   TX_PREPARE (two-phase commit only; about 70% of the transactions), then
//   TX_COMMIT carrying the marker (about 97%) or TX_ROLLBACK.
// Each node starts with NODE_START and SNAPSHOT (the base); now and then a
// consistent cut runs: CUT_START on every node, then CUT_FINISH with the
// before/after sets once the transactions tracked there finished (rarely a
// CUT_ABORT instead). Values are text drawn from a word pool, so the WAL
// compresses about as well as real application data.
//
// Every node stops at the first transaction boundary after it reached
// BYTES_PER_NODE, once all nodes have; the in-flight transactions and a
// running cut are finished first, so the WAL is complete and consistent.
// Same arguments, same bytes: everything derives from --seed.
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "walfmt/cluster_layout.h"
#include "walfmt/file_io.h"
#include "walfmt/reader.h"
#include "walfmt/record.h"
#include "walfmt/source.h"
#include "walfmt/writer.h"

namespace fs = std::filesystem;
using namespace walfmt;

namespace {

// xoshiro256** seeded through splitmix64: fast, and the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& x : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      x = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    const uint64_t r = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return r;
  }
  // Uniform in [0, n) (n > 0; the tiny modulo bias does not matter here).
  uint64_t Below(uint64_t n) { return Next() % n; }
  uint64_t Between(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  bool Chance(uint32_t per_mille) { return Below(1000) < per_mille; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

constexpr std::string_view kWords[] = {
    "account", "balance", "transfer", "order",  "item",   "price",   "quantity", "status",  "pending",
    "shipped", "paid",    "customer", "region", "europe", "america", "asia",     "true",    "false",
    "null",    "amount",  "currency", "eur",    "usd",    "note",    "created",  "updated", "version",
    "owner",   "alice",   "bob",      "carol",  "dave",   "session", "token",    "cart",    "warehouse"};

// A pool of text that values are cut from: words, numbers and punctuation.
std::string MakeTextPool(Rng& rng, size_t n) {
  std::string pool;
  pool.reserve(n + 64);
  while (pool.size() < n) {
    switch (rng.Below(4)) {
      case 0:
        pool += std::to_string(rng.Below(100000));
        break;
      case 1:
        pool += "\",\"";
        break;
      default:
        pool += kWords[rng.Below(std::size(kWords))];
        break;
    }
    pool += rng.Chance(300) ? ':' : ' ';
  }
  pool.resize(n);
  return pool;
}

constexpr std::string_view kTables[] = {"acct/", "order/", "item/", "sess/", "user/", "stock/"};
constexpr std::string_view kSuffixes[] = {"", "", "", "/bal", "/meta", "/v2"};

struct Options {
  std::string out;
  uint32_t nodes = 3;
  uint64_t bytes = 64u << 20;
  uint64_t seed = 1;
  uint64_t segment_size = 16u << 20;
  bool compress = false;
  bool archive_last = false;
  uint32_t sync_every = 64;
  uint32_t backups = 1;
  uint32_t in_flight = 0;  // 0: 8 per node
  uint64_t cut_every = 20000;
  bool quiet = false;
};

struct Tx {
  TxId id;
  std::vector<uint32_t> participants;  // sorted
  bool one_phase = false;
  bool commit = true;
  uint64_t marker = 0;
  int phase = 0;  // 0 data, 1 prepare, 2 decide, 3 finish
};

struct NodeState {
  std::unique_ptr<WalWriter> w;
  uint64_t bytes_done = 0;  // of the segments already rolled
  uint64_t records = 0;
  uint64_t since_sync = 0;
  std::array<uint64_t, kMaxKnownRecordType + 1> by_type{};
  // Cut bookkeeping for the running cut.
  bool in_cut = false;
  std::vector<TxId> tracked;  // not yet finished here
  std::vector<TxId> before, after;
  bool abort_cut = false;
  uint64_t Bytes() const { return bytes_done + w->end().offset; }
};

class Generator {
 public:
  explicit Generator(const Options& o)
      : o_(o), rng_(o.seed), pool_(MakeTextPool(rng_, 1u << 20)), next_cut_at_(o.cut_every / 2) {}

  int Run() {
    const uint64_t cluster_id = Rng(o_.seed ^ 0xC1C1C1C1ull).Next();
    nodes_.resize(o_.nodes);
    for (uint32_t i = 0; i < o_.nodes; ++i) {
      WriterOptions wo;
      wo.wal_dir = o_.out + "/" + NodeWalDirName(static_cast<uint32_t>(i));
      wo.node_id = i;
      wo.cluster_id = cluster_id;
      wo.segment_bytes = o_.segment_size;
      wo.archive_compressed = o_.compress;
      auto w = WalWriter::Create(wo, now_);
      if (!w.ok()) return Fail(w.status());
      nodes_[i].w = std::move(*w);
      if (!Append(i, NodeStart{0, now_})) return 3;
      if (!Append(i, Snapshot{"base-" + std::to_string(o_.seed), now_, rng_.Next()})) return 3;
    }
    next_seq_.assign(o_.nodes, 0);
    const uint32_t in_flight = o_.in_flight ? o_.in_flight : 8 * o_.nodes;
    for (uint32_t i = 0; i < in_flight; ++i) flight_.push_back(NewTx());

    bool draining = false;
    while (!flight_.empty()) {
      now_ += rng_.Between(1, 8);
      const size_t slot = rng_.Below(flight_.size());
      Tx& tx = flight_[slot];
      if (!Advance(tx)) return 3;
      if (tx.phase > 3) {
        ++finished_;
        if (!draining && AllFull()) draining = true;
        if (draining) {
          flight_[slot] = flight_.back();
          flight_.pop_back();
        } else {
          flight_[slot] = NewTx();
        }
        if (!draining && !cut_running_ && finished_ >= next_cut_at_) {
          if (!StartCut()) return 3;
        }
      }
    }
    for (uint32_t i = 0; i < o_.nodes; ++i) {
      if (nodes_[i].in_cut && !FinishCutIfDone(i)) return 3;
    }
    uint64_t total_records = 0, total_bytes = 0;
    std::array<uint64_t, kMaxKnownRecordType + 1> by_type{};
    for (uint32_t i = 0; i < o_.nodes; ++i) {
      NodeState& n = nodes_[i];
      total_bytes += n.Bytes();
      total_records += n.records;
      for (size_t t = 0; t < by_type.size(); ++t) by_type[t] += n.by_type[t];
      if (Status st = n.w->Close(); !st.ok()) return Fail(st);
      if (o_.compress && o_.archive_last) {
        if (Status st = ArchiveLast(o_.out + "/" + NodeWalDirName(static_cast<uint32_t>(i)), o_.segment_size); !st.ok())
          return Fail(st);
      }
    }
    // Summary on stdout, one JSON object (the bench script reads it).
    std::printf("{\"nodes\":%u,\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"transactions\":%" PRIu64
                ",\"cuts\":%" PRIu64 ",\"by_type\":{",
                o_.nodes, total_records, total_bytes, finished_, cuts_);
    bool first = true;
    for (uint16_t t = 1; t <= kMaxKnownRecordType; ++t) {
      std::printf("%s\"%s\":%" PRIu64, first ? "" : ",", std::string(RecordTypeName(RecordType(t))).c_str(),
                  by_type[t]);
      first = false;
    }
    std::printf("}}\n");
    return 0;
  }

 private:
  static int Fail(const Status& st) {
    std::fprintf(stderr, "walgen: %s\n", st.message().c_str());
    return 3;
  }

  bool AllFull() const {
    for (const NodeState& n : nodes_) {
      if (n.Bytes() < o_.bytes) return false;
    }
    return true;
  }

  Tx NewTx() {
    Tx t;
    const uint32_t near = static_cast<uint32_t>(rng_.Below(o_.nodes));
    t.id = TxId{near, ++next_seq_[near]};
    // A primary and its backups (the next nodes on the ring); 1PC when all
    // keys live on one primary, 2PC across two primaries otherwise.
    t.one_phase = rng_.Chance(300);
    const uint32_t copies = std::min(o_.nodes, 1 + o_.backups);
    const uint32_t primaries = t.one_phase ? 1 : std::min<uint32_t>(o_.nodes, 2);
    const uint32_t first = static_cast<uint32_t>(rng_.Below(o_.nodes));
    for (uint32_t p = 0; p < primaries; ++p) {
      for (uint32_t c = 0; c < copies; ++c) t.participants.push_back((first + p * copies + c) % o_.nodes);
    }
    std::sort(t.participants.begin(), t.participants.end());
    t.participants.erase(std::unique(t.participants.begin(), t.participants.end()), t.participants.end());
    t.commit = !rng_.Chance(30);
    return t;
  }

  void MakeKey(std::string& k) {
    const std::string_view table = kTables[rng_.Below(std::size(kTables))];
    // Skewed: a tenth of the keys take half the writes.
    const uint64_t id = rng_.Chance(500) ? rng_.Below(100000) : rng_.Below(1000000000000ull);
    char digits[16];
    std::snprintf(digits, sizeof digits, "%012" PRIu64, id);
    k.assign(table);
    k.append(digits, 12);
    k.append(kSuffixes[rng_.Below(std::size(kSuffixes))]);
  }

  void MakeValue(std::string& v, uint64_t seq) {
    // From 40 to 200 bytes, short ones more often (mean about 93).
    const size_t len = static_cast<size_t>(40 + std::min(rng_.Below(161), rng_.Below(161)));
    v.assign("{\"seq\":");
    v.append(std::to_string(seq));
    v.append(",\"data\":\"");
    const size_t body = len > v.size() + 2 ? len - v.size() - 2 : 1;
    const size_t at = rng_.Below(pool_.size() - body);
    v.append(pool_, at, body);
    v.append("\"}");
  }

  bool Append(uint32_t node, const Record& r) {
    NodeState& n = nodes_[node];
    const Lsn before = n.w->end();
    auto at = n.w->Append(r);
    if (!at.ok()) {
      Fail(at.status());
      return false;
    }
    if (at->segment != before.segment) n.bytes_done += before.offset;
    ++n.records;
    ++n.by_type[static_cast<size_t>(TypeOf(r))];
    if (++n.since_sync >= o_.sync_every) {
      n.since_sync = 0;
      n.w->set_time_us(now_);
      if (Status st = n.w->Sync(); !st.ok()) {
        Fail(st);
        return false;
      }
    }
    return true;
  }

  bool Advance(Tx& tx) {
    switch (tx.phase) {
      case 0: {  // data on every participant
        for (uint32_t p : tx.participants) {
          const int records = rng_.Chance(250) ? 2 : 1;
          for (int r = 0; r < records; ++r) {
            data_.tx = tx.id;
            // 1-4 writes: 1 half the time, then 2, 3, 4 (mean 1.8).
            const uint64_t r100 = rng_.Below(100);
            const size_t writes = r100 < 50 ? 1 : r100 < 80 ? 2 : r100 < 92 ? 3 : 4;
            data_.writes.resize(writes);
            for (Write& w : data_.writes) {
              MakeKey(w.key);
              if (rng_.Chance(50)) {
                w.op = WriteOp::kDelete;
                w.value.clear();
              } else {
                w.op = WriteOp::kPut;
                MakeValue(w.value, tx.id.seq);
              }
            }
            if (!Append(p, data_)) return false;
          }
        }
        tx.phase = tx.one_phase ? 2 : 1;
        return true;
      }
      case 1:  // prepare (2PC): each participant votes
        for (uint32_t p : tx.participants) {
          if (!Append(p, TxPrepare{tx.id, now_, tx.participants})) return false;
        }
        tx.phase = 2;
        return true;
      case 2:  // the decider decides and stamps its cut id
        tx.marker = cut_id_;
        tx.phase = 3;
        return true;
      case 3: {
        const uint16_t flags = tx.one_phase ? kTxFlagOnePhase : 0;
        for (uint32_t p : tx.participants) {
          const bool ok = tx.commit ? Append(p, TxCommit{tx.id, tx.marker, now_, flags, tx.participants})
                                    : Append(p, TxRollback{tx.id, now_, flags, tx.participants});
          if (!ok) return false;
          if (!OnFinished(p, tx)) return false;
        }
        tx.phase = 4;
        return true;
      }
    }
    return true;
  }

  // Cut k starts on every node: the transactions prepared there (or being
  // decided, for 1PC) are tracked until they finish.
  bool StartCut() {
    ++cut_id_;
    ++cuts_;
    cut_running_ = true;
    next_cut_at_ = finished_ + o_.cut_every;
    const uint32_t aborting = rng_.Chance(100) ? static_cast<uint32_t>(rng_.Below(o_.nodes)) : o_.nodes;
    for (uint32_t i = 0; i < o_.nodes; ++i) {
      NodeState& n = nodes_[i];
      n.in_cut = true;
      n.abort_cut = i == aborting;
      n.tracked.clear();
      n.before.clear();
      n.after.clear();
      if (!Append(i, CutStart{cut_id_, now_})) return false;
      for (const Tx& tx : flight_) {
        if (tx.phase >= 2 && std::binary_search(tx.participants.begin(), tx.participants.end(), i)) {
          n.tracked.push_back(tx.id);
        }
      }
    }
    for (uint32_t i = 0; i < o_.nodes; ++i) {
      if (!FinishCutIfDone(i)) return false;
    }
    return true;
  }

  bool OnFinished(uint32_t node, const Tx& tx) {
    NodeState& n = nodes_[node];
    if (!n.in_cut) return true;
    auto it = std::find(n.tracked.begin(), n.tracked.end(), tx.id);
    if (it == n.tracked.end()) return true;
    n.tracked.erase(it);
    if (tx.commit) (tx.marker < cut_id_ ? n.before : n.after).push_back(tx.id);
    return FinishCutIfDone(node);
  }

  bool FinishCutIfDone(uint32_t node) {
    NodeState& n = nodes_[node];
    if (!n.in_cut || !n.tracked.empty()) return true;
    n.in_cut = false;
    const bool ok =
        n.abort_cut ? Append(node, CutAbort{cut_id_, now_, CutAbortReason::kOther, "simulated: a participant was lost"})
                    : Append(node, CutFinish{cut_id_, now_, n.before, n.after});
    if (!ok) return false;
    // A node syncs before it reports a finished cut.
    n.since_sync = 0;
    if (Status st = n.w->Sync(); !st.ok()) {
      Fail(st);
      return false;
    }
    cut_running_ = false;
    for (const NodeState& m : nodes_) cut_running_ = cut_running_ || m.in_cut;
    return true;
  }

  // The last (open) segment is normally left plain; with --archive-last it is
  // compressed too, so the whole WAL is .wal.zst.
  static Status ArchiveLast(const std::string& dir, uint64_t segment_size) {
    auto segs = ListSegments(dir, nullptr);
    if (!segs.ok()) return segs.status();
    if (segs->empty() || segs->back().compressed) return Status::Ok();
    const std::string plain = segs->back().path;
    // The segment walgen itself just closed: no larger than --segment-size,
    // or one record when a record does not fit (it gets a segment of its own).
    auto data = ReadWholeFile(
        plain, std::max<uint64_t>(segment_size, kSegmentHeaderSize + kRecordHeaderSize + kMaxRecordPayload));
    if (!data.ok()) return data.status();
    auto packed = ZstdCompress({reinterpret_cast<const uint8_t*>(data->data()), data->size()}, 1);
    if (!packed.ok()) return packed.status();
    const std::string zst = dir + "/" + SegmentFileName(segs->back().index, true);
    if (Status st = WriteFileAtomic(zst, *packed); !st.ok()) return st;
    std::error_code ec;
    fs::remove(plain, ec);
    if (ec) return Status::Io(plain + ": " + ec.message());
    return Status::Ok();
  }

  Options o_;
  Rng rng_;
  std::string pool_;
  std::vector<NodeState> nodes_;
  std::vector<uint64_t> next_seq_;
  std::vector<Tx> flight_;
  TxData data_;
  uint64_t now_ = 1'700'000'000'000'000ull;  // a fixed epoch: output depends only on the arguments
  uint64_t finished_ = 0;
  uint64_t cuts_ = 0;
  uint64_t cut_id_ = 0;
  bool cut_running_ = false;
  uint64_t next_cut_at_ = 0;  // set in the constructor
};

// "350MiB", "1G", "65536", "64k": binary units.
bool ParseSize(const std::string& s, uint64_t& out) {
  size_t i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  if (i == 0) return false;
  uint64_t v = std::strtoull(s.substr(0, i).c_str(), nullptr, 10);
  std::string unit = s.substr(i);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else if (unit == "k" || unit == "kib" || unit == "kb") {
    shift = 10;
  } else if (unit == "m" || unit == "mib" || unit == "mb") {
    shift = 20;
  } else if (unit == "g" || unit == "gib" || unit == "gb") {
    shift = 30;
  } else {
    return false;
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return false;
  out = v << shift;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string bytes = "64MiB", seg = "16MiB";
  CLI::App app{"walgen: writes a synthetic cluster WAL (OUT_DIR/node-<i>/wal/) for benchmarks"};
  app.add_option("out_dir", o.out, "cluster directory to create (must not hold WAL yet)")->required();
  app.add_option("--nodes", o.nodes, "number of nodes")->check(CLI::Range(1u, 64u))->capture_default_str();
  app.add_option("--bytes", bytes, "WAL bytes per node (suffixes K, M, G: binary)")->capture_default_str();
  app.add_option("--seed", o.seed, "seed: same arguments, same bytes")->capture_default_str();
  app.add_option("--segment-size", seg, "segment size (suffixes K, M, G)")->capture_default_str();
  app.add_flag("--compress", o.compress, "archive rolled segments as .wal.zst");
  app.add_flag("--archive-last", o.archive_last, "with --compress, compress the last segment too");
  app.add_option("--sync-every", o.sync_every, "Sync() the writer every N records per node")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--backups", o.backups, "backups per partition")->check(CLI::Range(0u, 8u))->capture_default_str();
  app.add_option("--in-flight", o.in_flight, "transactions in flight at once (0: 8 per node)");
  app.add_option("--cut-every", o.cut_every, "start a consistent cut every N transactions")
      ->check(CLI::Range(uint64_t{1}, UINT64_MAX))
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "no timing line on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;  // --help: 0; any usage error: 2
  }
  if (!ParseSize(bytes, o.bytes) || !ParseSize(seg, o.segment_size)) {
    std::fprintf(stderr, "walgen: --bytes and --segment-size take a size like 350MiB, 16M or 65536\n");
    return 2;
  }
  if (o.segment_size < 4096) {
    std::fprintf(stderr, "walgen: --segment-size must be at least 4096 bytes\n");
    return 2;
  }
  if (o.archive_last && !o.compress) {
    std::fprintf(stderr, "walgen: --archive-last needs --compress\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Generator g(o);
  const int rc = g.Run();
  if (rc == 0 && !o.quiet) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "walgen: %u nodes x %.1f MiB in %.2f s (%.0f MiB/s)\n", o.nodes,
                 static_cast<double>(o.bytes) / (1 << 20), s, static_cast<double>(o.bytes) * o.nodes / (1 << 20) / s);
  }
  return rc;
}
