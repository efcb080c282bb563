// Where keys live. Partitions are numbered 0..P-1; partition p has its primary
// on node p % N and its backups on the next B nodes. All partitions with the
// same primary therefore share one backup set, so replication is described
// per primary node ("the backups of node n" = n+1 .. n+B, modulo N).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace walfmt {

// FNV-1a, 64 bit. A fixed function (not std::hash, which differs between
// standard libraries) so that the key -> partition map is part of the format:
// cluster.json names it and the tools may recompute it.
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

class Topology {
 public:
  Topology(uint32_t nodes, uint32_t backups, uint32_t partitions)
      : nodes_(nodes), backups_(backups), partitions_(partitions) {}

  uint32_t nodes() const { return nodes_; }
  uint32_t backups() const { return backups_; }
  uint32_t partitions() const { return partitions_; }

  uint32_t PartitionOf(std::string_view key) const { return static_cast<uint32_t>(Fnv1a64(key) % partitions_); }
  uint32_t PrimaryOfPartition(uint32_t p) const { return p % nodes_; }
  uint32_t PrimaryOf(std::string_view key) const { return PrimaryOfPartition(PartitionOf(key)); }
  // The i-th backup (0-based) of the partitions whose primary is `primary`.
  uint32_t BackupOf(uint32_t primary, uint32_t i) const { return (primary + 1 + i) % nodes_; }
  std::vector<uint32_t> BackupsOf(uint32_t primary) const {
    std::vector<uint32_t> v;
    for (uint32_t i = 0; i < backups_; ++i) v.push_back(BackupOf(primary, i));
    return v;
  }
  // Whether `node` keeps a copy of `key` (as its primary or as a backup).
  bool Holds(uint32_t node, std::string_view key) const {
    const uint32_t p = PrimaryOf(key);
    return node == p || ((node + nodes_ - p) % nodes_ >= 1 && (node + nodes_ - p) % nodes_ <= backups_);
  }

 private:
  uint32_t nodes_;
  uint32_t backups_;
  uint32_t partitions_;
};

}  // namespace walfmt
