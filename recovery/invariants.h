// Workload invariants on the states of all nodes at one point (a full
// snapshot, a restored cut): docs/cut-rule.md section 2, check 6. The checks return
// structured findings and never print.
//
// Keys live where the topology says (walfmt/topology.h): a key's primary node
// and that primary's backups each hold a copy; no other node holds it. The
// workload's key space comes from cluster.json: acct/000000 ..
// acct/<accounts-1> (decimal balances) and ring/000000 .. ring/<ring_keys-1>
// (each the decimal index of the next key of the ring).
//
// bank:  every account is present on every node that holds it; backup copies
//        equal the primary's; no balance is negative; the primary copies add
//        up to initial_bank_total.
// cycle: every ring key is present where it must be; copies agree; each
//        value is a valid index; following the values from ring/000000 visits
//        every key exactly once and comes back to ring/000000.
// placement (always): a node holds no key that the topology does not give
//        it, and no key outside the workload's key space.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recovery/state_set.h"
#include "walfmt/cluster_layout.h"
#include "walfmt/workload.h"

namespace walcut::recovery {

// Key names of the workloads (walfmt/workload.h).
using walfmt::AccountKey;
using walfmt::ParseAccountKey;
using walfmt::ParseRingKey;
using walfmt::RingKey;

// Check names, stable (they appear in JSON output).
namespace check {
inline constexpr const char* kBankMissing = "bank.missing";           // an account absent from a node that holds it
inline constexpr const char* kBankNotNumber = "bank.not-a-number";    // a balance that is not a decimal integer
inline constexpr const char* kBankNegative = "bank.negative";         // a balance below zero
inline constexpr const char* kBankReplica = "bank.replica-mismatch";  // a backup copy differs from the primary's
inline constexpr const char* kBankTotal = "bank.total";               // the primary copies do not add up
inline constexpr const char* kCycleMissing = "cycle.missing";
inline constexpr const char* kCycleBadValue = "cycle.bad-value";  // not the index of a ring key
inline constexpr const char* kCycleReplica = "cycle.replica-mismatch";
inline constexpr const char* kCycleBroken = "cycle.broken";     // the walk reaches a key without a valid next
inline constexpr const char* kCycleSubRing = "cycle.sub-ring";  // the walk returns to ring/000000 too early
inline constexpr const char* kCycleVisitedTwice =
    "cycle.visited-twice";                                         // the walk enters a loop not through ring/000000
inline constexpr const char* kCycleUnreached = "cycle.unreached";  // keys the walk from ring/000000 never visits
inline constexpr const char* kPlacement = "placement";             // a node holds a key that is not its to hold
inline constexpr const char* kUnknownKey = "unknown-key";          // a key outside the workload's key space
inline constexpr const char* kRecorded = "recorded";               // a file differs from what cluster.json recorded
inline constexpr const char* kNodeCount = "node-count";            // the states are not one per node of the cluster
}  // namespace check

struct Finding {
  std::string check;              // one of check::k*
  std::optional<uint32_t> node;   // the node at fault; nullopt for the whole cluster (bank.total, the ring walk)
  std::optional<uint32_t> peer;   // the node compared against (the primary, for a replica mismatch)
  std::vector<std::string> keys;  // the keys involved (at most kMaxKeysPerFinding; `key_count` has them all)
  uint64_t key_count = 0;
  std::string expected;
  std::string found;
  std::string message;  // one line for people, naming node and keys
};

// A finding lists at most this many keys (a sub-ring of 10^6 keys is not
// printed whole); Finding::key_count is always the full number.
inline constexpr size_t kMaxKeysPerFinding = 16;

struct InvariantOptions {
  bool bank = false;
  bool cycle = false;
  bool placement = true;
  size_t max_findings = 1000;  // findings beyond this are counted, not kept
};

struct InvariantReport {
  std::vector<Finding> findings;  // in check order: placement, bank, cycle; by key within each
  uint64_t total_findings = 0;    // including those not kept (max_findings)
  // What was checked, for the summary line.
  uint64_t keys_checked = 0;          // key copies looked at, over all nodes
  std::optional<int64_t> bank_total;  // sum of the primary copies, when every one is a number
  uint64_t ring_walked = 0;           // keys visited from ring/000000 before the walk stopped
  bool ok() const { return total_findings == 0; }
};

// The options for a workload: bank and/or cycle as the workload has them.
InvariantOptions OptionsFor(walfmt::Workload w);

// Runs the checks on `states` (by node id; no pointer may be null). States
// for another number of nodes than info.nodes give one check::kNodeCount
// finding and nothing else: keys cannot be placed on nodes that are not there.
InvariantReport CheckInvariants(const walfmt::ClusterInfo& info, const std::vector<const NodeState*>& states,
                                const InvariantOptions& options);

// Compares a full snapshot's files with what cluster.json recorded when it
// was taken (per node fingerprint and WAL position): a file rewritten since
// then passes its own checksums but not this. Check name check::kRecorded.
std::vector<Finding> CheckRecorded(const StateSet& set, const walfmt::FullSnapshotInfo& recorded);

}  // namespace walcut::recovery
