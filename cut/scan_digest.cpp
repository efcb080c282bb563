#include "cut/scan_digest.h"

namespace walcut::cut::scan {

void FirstCutDigests::Flush() {
  if (acc_count_ == 0) return;
  for (uint32_t set = 0; set < acc_set_.size(); ++set) {
    TxDigest& a = acc_set_[set];
    if (a.n == 0) continue;
    if (acc_peers_ < kSetPeers) {
      acc_peer_.resize(kSetPeers);
      acc_peers_ = kSetPeers;
    }
    for (uint32_t p = 0; p < kSetPeers; ++p) {
      if ((set >> p & 1) == 0) continue;
      acc_peer_[p].x ^= a.x;
      acc_peer_[p].n += a.n;
    }
    a = TxDigest{};
  }
  auto& fc = s_.first_cut[acc_f_];
  fc.count += acc_count_;
  fc.owned += acc_owned_;
  for (uint32_t p = 0; p < acc_peer_.size(); ++p) {
    TxDigest& a = acc_peer_[p];
    if (p == node_ || (a.n == 0 && a.x == 0)) {
      a = TxDigest{};
      continue;
    }
    TxDigest& d = s_.shared[p][acc_f_];
    d.x ^= a.x;
    d.n += a.n;
    a = TxDigest{};
  }
  acc_count_ = 0;
  acc_owned_ = 0;
}

void FirstCutDigests::Digest(uint32_t peer, uint64_t f, uint64_t h, int sign) {
  TxDigest& d = s_.shared[peer][f];
  d.x ^= h;
  d.n += static_cast<uint64_t>(sign);
}

void FirstCutDigests::Bucket(const TxId& t, std::span<const uint32_t> parts, uint64_t f, int sign) {
  auto& fc = s_.first_cut[f];
  const bool owned = parts.empty() || parts.front() >= node_;
  fc.count += static_cast<uint64_t>(sign);
  if (owned) fc.owned += static_cast<uint64_t>(sign);
  const uint64_t h = HashTx(t);
  for (uint32_t p : parts) {
    if (p != node_) Digest(p, f, h, sign);
  }
}

void FirstCutDigests::Relabel(uint64_t c) {
  if (auto it = s_.first_cut.find(1); it != s_.first_cut.end()) {
    FirstCutCount& to = s_.first_cut[c];
    to.count += it->second.count;
    to.owned += it->second.owned;
    s_.first_cut.erase(1);
  }
  for (auto& [peer, m] : s_.shared) {
    if (auto it = m.find(1); it != m.end()) {
      TxDigest& to = m[c];
      to.x ^= it->second.x;
      to.n += it->second.n;
      m.erase(1);
    }
  }
}

void FirstCutDigests::Totals(FirstCutCount& count, std::map<uint32_t, TxDigest>& shared) {
  Flush();
  for (const auto& [f, c] : s_.first_cut) {
    count.count += c.count;
    count.owned += c.owned;
  }
  for (const auto& [peer, buckets] : s_.shared) {
    TxDigest d;
    for (const auto& [f, b] : buckets) {
      d.x ^= b.x;
      d.n += b.n;
    }
    if (d.n != 0 || d.x != 0) shared[peer] = d;
  }
}

void FirstCutDigests::DropEmpty() {
  for (auto it = s_.first_cut.begin(); it != s_.first_cut.end();) {
    it = it->second.count == 0 ? s_.first_cut.erase(it) : std::next(it);
  }
  for (auto& [peer, m] : s_.shared) {
    for (auto it = m.begin(); it != m.end();) it = it->second.n == 0 ? m.erase(it) : std::next(it);
  }
}

}  // namespace walcut::cut::scan
