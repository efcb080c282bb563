// What the files of `walcut check` (recovery/check.h) share. Internal to
// recovery/:
//   check.cpp          the report's names and counts, the state file, and
//                      RunCheck, which runs the ladder level by level
//   check_files.cpp    level files: every segment verified, the state file
//                      read and written
//   check_cuts.cpp     level cuts: items per cut and node from the
//                      reconstructed cuts
//   check_restore.cpp  level restore: the selected cuts restored, read back
//                      and their invariants checked; the default invariant
//                      checker
//   check_node.cpp     one node where its WAL lives (CheckOptions::node)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cut/cuts.h"
#include "cut/load.h"
#include "recovery/check.h"
#include "walfmt/status.h"

namespace walcut::recovery::check_detail {

// Reports progress to opt.progress, when there is one.
void Progress(const CheckOptions& opt, const std::string& stage, uint64_t bytes_done, uint64_t bytes_total);
// The WAL bytes of the segments in `wal_dirs` (a progress total).
uint64_t WalBytes(const std::vector<std::string>& wal_dirs);

// An item that passes until a finding says otherwise.
CheckItem MakeItem(CheckLevel level, std::string group, std::string name);

// Level files on the WAL directories of `layout`: its items, rep.files, and
// the state file when opt.state_path names one.
void RunFiles(const CheckOptions& opt, const walfmt::ClusterLayout& layout, CheckReport& rep);

// Level cuts on the reconstructed cuts: the counts, the cluster's WAL items,
// and the items of every cut (of opt.cut only, when it is set).
void RunCuts(const CheckOptions& opt, const cut::ClusterCuts& cc, CheckReport& rep);

// Level restore: the selected cut, or every consistent cut, restored and
// checked; a restore that passed is the next one's base when
// opt.chain_restores is set.
void RunRestores(const CheckOptions& opt, const cut::ClusterCuts& cc, const walfmt::ClusterLayout& layout,
                 CheckReport& rep);

// The check of one node (opt.node is set).
walfmt::Result<CheckReport> RunNodeCheck(const CheckOptions& opt);

// ---- shared by the restore of a cut and of one node ---------------------------

// An item of level restore in group "cut-K".
CheckItem RestoreItem(uint64_t k, const char* name);

// A new directory walcut-check-XXXXXX under opt.temp_dir ($TMPDIR, /tmp);
// nullopt, with the error in rep.errors, when it cannot be made.
std::optional<std::string> MakeTempDir(const CheckOptions& opt, CheckReport& rep);

// Removes a temporary directory and what it holds; a failure goes to rep.errors.
void RemoveTemp(const std::string& tmp, CheckReport& rep);

// Whether a failed restore is a finding about the data (damaged WAL, refused
// cut) rather than a failure of the tool.
bool IsRestoreFinding(const walfmt::Status& st);
// The finding of such a restore: "restore-damaged" or "restore-refused".
CheckFinding RestoreFinding(const walfmt::Status& st, uint64_t k, std::optional<uint32_t> node);

}  // namespace walcut::recovery::check_detail
