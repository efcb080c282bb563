// Workloads: what a transaction does, as a small program the near node runs.
// A program asks for keys to lock and read (one round at a time, because a
// cycle transaction learns its next key from the value it read), and finally
// returns its writes or gives up. Programs never see the network: the near node
// feeds them the values the primaries returned.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "node/rng.h"
#include "walfmt/record.h"
#include "walfmt/workload.h"

namespace walcut::node {

using walfmt::ParseWorkload;
using walfmt::Workload;
using walfmt::WorkloadName;

enum class AbortReason : uint8_t {
  kNone = 0,
  kConflict = 1,           // a key was locked by another transaction
  kInsufficientFunds = 2,  // bank: the source account cannot pay
  kVoteNo = 3,             // a participant refused the prepare (injected)
  kBadRead = 4,            // a key the program needed was missing: a bug, tests require zero
  kParticipantLost = 5,    // a participant crashed before the decision
};

// Values read so far; a missing key reads as nullopt.
using ReadSet = std::map<std::string, std::optional<std::string>>;

struct Step {
  enum Kind : uint8_t { kRead, kCommit, kAbort } kind = kRead;
  std::vector<std::string> keys;            // kRead: lock and read these
  std::vector<walfmt::Write> writes;        // kCommit
  AbortReason reason = AbortReason::kNone;  // kAbort
};

class Program {
 public:
  virtual ~Program() = default;
  virtual Step Next(const ReadSet& reads) = 0;
};

// Key names (walfmt/workload.h).
using walfmt::AccountKey;
using walfmt::RingKey;

struct WorkloadParams {
  Workload workload = Workload::kBank;
  uint32_t accounts = 0;  // bank keys (0 when the workload has none)
  uint32_t ring = 0;      // cycle keys
  int64_t initial_balance = 1000;
  uint32_t max_transfer = 200;
};

// The initial data of the cluster: written by ordinary transactions before the
// first cut, so the empty cluster at creation stays a valid base.
std::vector<walfmt::Write> InitialWrites(const WorkloadParams& p);
int64_t InitialBankTotal(const WorkloadParams& p);

std::unique_ptr<Program> MakeLoadProgram(std::vector<walfmt::Write> writes);
std::unique_ptr<Program> MakeWorkloadProgram(const WorkloadParams& p, Rng& rng);

// Checks of a state (key -> value for every key, primary copies): the bank
// total and the single ring. Return an empty string when the state is fine,
// else what is wrong.
std::string CheckBank(const std::map<std::string, std::string>& state, const WorkloadParams& p);
std::string CheckRing(const std::map<std::string, std::string>& state, const WorkloadParams& p);

}  // namespace walcut::node
