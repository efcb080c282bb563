#include "node/workload.h"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

namespace walcut::node {
namespace {

bool ParseI64(const std::string& s, int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// Transfers `amount` from one account to another; aborts when the source
// cannot pay.
class BankTransfer final : public Program {
 public:
  BankTransfer(uint32_t from, uint32_t to, int64_t amount)
      : from_(AccountKey(from)), to_(AccountKey(to)), amount_(amount) {}
  Step Next(const ReadSet& reads) override {
    Step s;
    if (stage_++ == 0) {
      s.kind = Step::kRead;
      s.keys = {from_, to_};
      return s;
    }
    int64_t a = 0, b = 0;
    auto fa = reads.find(from_);
    auto fb = reads.find(to_);
    if (fa == reads.end() || fb == reads.end() || !fa->second || !fb->second || !ParseI64(*fa->second, a) ||
        !ParseI64(*fb->second, b)) {
      s.kind = Step::kAbort;
      s.reason = AbortReason::kBadRead;
      return s;
    }
    if (a < amount_) {
      s.kind = Step::kAbort;
      s.reason = AbortReason::kInsufficientFunds;
      return s;
    }
    s.kind = Step::kCommit;
    s.writes = {{walfmt::WriteOp::kPut, from_, std::to_string(a - amount_)},
                {walfmt::WriteOp::kPut, to_, std::to_string(b + amount_)}};
    return s;
  }

 private:
  std::string from_, to_;
  int64_t amount_;
  int stage_ = 0;
};

// FoundationDB's cycle test: with k -> r -> r2 -> r3 in the ring, rewire it to
// k -> r2 -> r -> r3. Three keys change; the ring stays one ring of the same
// length. Reads are sequential (each key is learnt from the previous value).
class CycleSwap final : public Program {
 public:
  explicit CycleSwap(uint32_t start) : k_(start) {}
  Step Next(const ReadSet& reads) override {
    Step s;
    s.kind = Step::kRead;
    switch (stage_++) {
      case 0:
        s.keys = {RingKey(k_)};
        return s;
      case 1:
        if (!Value(reads, k_, r_)) break;
        s.keys = {RingKey(r_)};
        return s;
      case 2:
        if (!Value(reads, r_, r2_)) break;
        s.keys = {RingKey(r2_)};
        return s;
      case 3: {
        uint32_t r3 = 0;
        if (!Value(reads, r2_, r3)) break;
        s.kind = Step::kCommit;
        s.writes = {{walfmt::WriteOp::kPut, RingKey(k_), std::to_string(r2_)},
                    {walfmt::WriteOp::kPut, RingKey(r2_), std::to_string(r_)},
                    {walfmt::WriteOp::kPut, RingKey(r_), std::to_string(r3)}};
        return s;
      }
      default:
        break;
    }
    s.kind = Step::kAbort;
    s.reason = AbortReason::kBadRead;
    return s;
  }

 private:
  static bool Value(const ReadSet& reads, uint32_t key, uint32_t& out) {
    auto it = reads.find(RingKey(key));
    if (it == reads.end() || !it->second) return false;
    int64_t v = 0;
    if (!ParseI64(*it->second, v) || v < 0) return false;
    out = static_cast<uint32_t>(v);
    return true;
  }
  uint32_t k_, r_ = 0, r2_ = 0;
  int stage_ = 0;
};

// Writes initial data: lock the keys (nobody else touches them), then put.
class Load final : public Program {
 public:
  explicit Load(std::vector<walfmt::Write> w) : writes_(std::move(w)) {}
  Step Next(const ReadSet&) override {
    Step s;
    if (stage_++ == 0) {
      s.kind = Step::kRead;
      for (const auto& w : writes_) s.keys.push_back(w.key);
      return s;
    }
    s.kind = Step::kCommit;
    s.writes = std::move(writes_);
    return s;
  }

 private:
  std::vector<walfmt::Write> writes_;
  int stage_ = 0;
};

}  // namespace

std::vector<walfmt::Write> InitialWrites(const WorkloadParams& p) {
  std::vector<walfmt::Write> w;
  for (uint32_t i = 0; i < p.accounts; ++i) {
    w.push_back({walfmt::WriteOp::kPut, AccountKey(i), std::to_string(p.initial_balance)});
  }
  for (uint32_t i = 0; i < p.ring; ++i) {
    w.push_back({walfmt::WriteOp::kPut, RingKey(i), std::to_string((i + 1) % p.ring)});
  }
  return w;
}

int64_t InitialBankTotal(const WorkloadParams& p) { return static_cast<int64_t>(p.accounts) * p.initial_balance; }

std::unique_ptr<Program> MakeLoadProgram(std::vector<walfmt::Write> writes) {
  return std::make_unique<Load>(std::move(writes));
}

std::unique_ptr<Program> MakeWorkloadProgram(const WorkloadParams& p, Rng& rng) {
  bool bank = p.workload == Workload::kBank;
  if (p.workload == Workload::kMixed) bank = rng.Below(2) == 0;
  if (bank) {
    const uint32_t from = static_cast<uint32_t>(rng.Below(p.accounts));
    uint32_t to = static_cast<uint32_t>(rng.Below(p.accounts - 1));
    if (to >= from) ++to;  // distinct accounts
    const int64_t amount = static_cast<int64_t>(rng.Range(1, p.max_transfer));
    return std::make_unique<BankTransfer>(from, to, amount);
  }
  return std::make_unique<CycleSwap>(static_cast<uint32_t>(rng.Below(p.ring)));
}

std::string CheckBank(const std::map<std::string, std::string>& state, const WorkloadParams& p) {
  if (p.accounts == 0) return {};
  int64_t total = 0;
  for (uint32_t i = 0; i < p.accounts; ++i) {
    auto it = state.find(AccountKey(i));
    if (it == state.end()) return fmt::format("account {} is missing", AccountKey(i));
    int64_t v = 0;
    if (!ParseI64(it->second, v)) return fmt::format("account {} holds '{}', not a number", it->first, it->second);
    if (v < 0) return fmt::format("account {} is negative: {}", it->first, v);
    total += v;
  }
  if (total != InitialBankTotal(p)) {
    return fmt::format("bank total is {}, expected {}", total, InitialBankTotal(p));
  }
  return {};
}

std::string CheckRing(const std::map<std::string, std::string>& state, const WorkloadParams& p) {
  if (p.ring == 0) return {};
  std::vector<bool> seen(p.ring, false);
  uint32_t cur = 0;
  for (uint32_t steps = 0; steps < p.ring; ++steps) {
    if (seen[cur]) return fmt::format("ring closes after {} of {} keys (at {})", steps, p.ring, RingKey(cur));
    seen[cur] = true;
    auto it = state.find(RingKey(cur));
    if (it == state.end()) return fmt::format("ring key {} is missing", RingKey(cur));
    int64_t v = 0;
    if (!ParseI64(it->second, v) || v < 0 || v >= static_cast<int64_t>(p.ring)) {
      return fmt::format("ring key {} holds '{}', not a key index", it->first, it->second);
    }
    cur = static_cast<uint32_t>(v);
  }
  if (cur != 0) return fmt::format("ring does not return to its start after {} keys", p.ring);
  return {};
}

}  // namespace walcut::node
