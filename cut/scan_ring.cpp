#include "cut/scan_ring.h"

namespace walcut::cut::scan {

void CommitRing::Fit(uint64_t peak_in_flight) {
  peak_ = peak_in_flight;
  const size_t cap = std::max<size_t>({recent_, 4 * peak_, 1});
  if (ring_.size() < cap) ring_.resize(cap);
  cap_ = ring_.size();
}

RingEntry* CommitRing::Recent(const TxId& t) {
  // Newest first: a transaction id is looked up right after its commit.
  const size_t used = Used();
  for (size_t i = 0; i < used; ++i) {
    const size_t at = (next_ + ring_.size() - 1 - i) % ring_.size();
    if (at < used && ring_[at].tx == t) return &ring_[at];
  }
  return nullptr;
}

std::span<const uint32_t> CommitRing::PartsOf(const RingEntry& e) const {
  if (e.parts_count <= kInlineParticipants) return {e.parts.data(), e.parts_count};
  return more_.at(static_cast<size_t>(&e - ring_.data()));
}

Done CommitRing::ToDone(const RingEntry& e) const {
  return Done{e.at, e.first_seen, e.time_us, e.marker, e.f, e.recovered, e.rolled_back, Participants(PartsOf(e))};
}

void CommitRing::CopyTo(TxMap<Done>& out) const {
  const size_t used = Used();
  for (size_t i = used; i-- > 0;) {
    const size_t slot = (next_ + ring_.size() - 1 - i) % ring_.size();
    if (slot < used) out[ring_[slot].tx] = ToDone(ring_[slot]);
  }
}

}  // namespace walcut::cut::scan
