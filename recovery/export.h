// The change set between two consistent cuts A < B (`walcut export`): what a
// restore of B holds that a restore of A does not.
//
// Pass 1, per node i: node i's WAL from cut A's continue-from position (where
// a restore based on a restore of A reads from; docs/cut-rule.md section 2)
// to CUT_FINISH_i(B), the transactions in cut B and not in cut A, as a
// restore of B from a restored base A applies them, but observed instead of
// applied (recovery/restore_node.h, NodeJob::on_apply): every key written,
// deletes included, with its last value, and (by transaction) every
// transaction's writes. Cut A = 0 is genesis: node i's WAL from its start.
//
// Pass 2 (the net change set, A > 0): node i's values at cut A of exactly the
// keys pass 1 wrote there: a restore of A (from the base `walcut restore`
// would choose for it) filtered to those keys (KeyFilter::Only). A key is a
// change when its value at A and at B differ (a key written back to its old
// value is none); absent counts as a value.
//
// Memory: the keys written with their values at A and at B (net), and the
// writes of the change set (by transaction); never a node's whole state.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/key_subset.h"
#include "recovery/restore.h"
#include "walfmt/lsn.h"
#include "walfmt/record.h"
#include "walfmt/status.h"

namespace walcut::recovery {

struct ExportRequest {
  uint64_t from_cut = 0;  // A; 0: genesis
  uint64_t to_cut = 0;    // B
  // Only these keys (--keys PREFIX): writes of other keys are dropped as
  // their TX_DATA is decoded. Whole: every key.
  KeySubset subset;
  std::optional<uint32_t> node;  // only this node's WAL is read
  bool net = true;               // the net change set (pass 2 reads cut A's values)
  bool by_transaction = false;   // the transactions, ordered (OrderTransactions)
  // Keep every key written with its value at B (NodeExport::written), for
  // a caller that joins change sets (an export through a repository's
  // increments).
  bool keep_written = false;
  // Cut A need not be consistent here, only have all of its evidence in
  // this WAL: a repository's increment holds its parent's cut from that
  // cut's continue-from positions on, checked when the parent was made.
  bool from_attested = false;
  unsigned jobs = 0;  // nodes read at once; 0: one per core
  // WAL bytes read so far over every node and both passes, about once per
  // MiB; called from worker threads, one at a time.
  std::function<void(uint64_t bytes)> progress;
};

struct KeyChange {
  std::string key;
  std::optional<std::string> old_value;  // nullopt: absent at cut A
  std::optional<std::string> new_value;  // nullopt: absent at cut B
};

struct NodeExport {
  uint32_t node = 0;
  walfmt::Lsn from;                // pass 1: first position read (cut A's continue-from; 0/00000000 for genesis)
  walfmt::Lsn to;                  // pass 1: CUT_FINISH_i(B)
  uint64_t txs = 0;                // transactions of B and not of A committed on the node
  uint64_t writes = 0;             // their writes (of the subset)
  uint64_t keys_written = 0;       // distinct keys among them
  uint64_t bytes_read = 0;         // both passes
  std::vector<KeyChange> changes;  // net: the keys whose value differs, in key order
  // With ExportRequest::keep_written: every key written, with its value at
  // B (nullopt: deleted).
  std::map<std::string, std::optional<std::string>, std::less<>> written;
};

struct TxWrite {
  uint32_t node = 0;
  walfmt::WriteOp op = walfmt::WriteOp::kPut;
  std::string key;
  std::string value;  // kPut only
};

struct ExportTx {
  walfmt::TxId tx;
  // Where it committed: (node, TX_COMMIT position), by node.
  std::vector<std::pair<uint32_t, walfmt::Lsn>> commits;
  std::vector<TxWrite> writes;  // by node, in WAL order on each
};

// The order of ExportResult::txs.
enum class TxOrder : uint8_t {
  // Consistent with the commit order on every node (exists unless two
  // transactions committed in opposite orders on two nodes).
  kCommit = 1,
  // Consistent, on every node, with the commit order of the writers of each
  // key (the conflict order): what applying the writes in order needs.
  kConflict = 2,
};
const char* TxOrderName(TxOrder o);  // "commit", "conflict"

struct ExportResult {
  uint64_t from_cut = 0;
  uint64_t to_cut = 0;
  KeySubset subset;  // as checked
  // How the values at cut A were read (net, A > 0): the base of its
  // restore and why; genesis otherwise.
  BaseInfo base_a;
  std::string base_why;
  std::vector<NodeExport> nodes;  // the nodes exported, by id
  // by_transaction: in `order`; with a subset, only those with a write of it.
  std::vector<ExportTx> txs;
  TxOrder order = TxOrder::kCommit;
  uint64_t bytes_read = 0;
};

// Checks the request (B is a consistent cut of `cc`; A is 0 or a consistent
// cut; A <= B; the node exists) and exports. A == B is an empty change set.
// kNotFound: a cut is not in the WAL; kInvalidArgument: refused (a cut that
// is not consistent, A after B, a bad subset or node, a WAL that no longer
// holds what the export must read, naming the node); kCorruption: the WAL
// range is damaged or the writes of the transactions form a cycle; kIo.
walfmt::Result<ExportResult> Export(const cut::ClusterCuts& cc, const cut::ClusterLayout& layout,
                                    const ExportRequest& req);

// Puts `txs` in an order consistent with the commit order on every node
// when one exists (returns kCommit), else with every key's writer order on
// its node (kConflict); ties go to the transaction whose commit on its
// lowest node comes first, then to the lower id. kCorruption, naming
// transactions, when even the writers' order has a cycle.
walfmt::Result<TxOrder> OrderTransactions(std::vector<ExportTx>& txs);

}  // namespace walcut::recovery
