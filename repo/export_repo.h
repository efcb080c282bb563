// `walcut export --repo REPO --from-cut A --to-cut B` (recovery/export.h):
// B is the cut of an increment (the newest one of that cut with a complete
// chain), A the cut of an artifact in its chain (a synthetic full or an
// increment). Each increment after A's artifact is exported from its own
// segments (its parent's cut to its own), and the change sets joined: the
// keys written, the last value winning; the transactions, ordered again
// over all of them (their positions are the live WAL's). For --net, the
// values at A come from A's artifact restored into a directory in `work`
// (removed after) for exactly the keys written.
#pragma once

#include <string>

#include "recovery/export.h"
#include "walfmt/status.h"

namespace walcut::repo {

struct RepoExportRequest {
  std::string repo;
  std::string work;  // where A's artifact is restored for --net (default: the system's temporary directory)
  recovery::ExportRequest exp;
};

// kNotFound: no artifact of cut B; kInvalidArgument: refused (A after B,
// A = 0, A not in B's chain); kCorruption: an artifact that does not
// restore or an increment that does not export.
walfmt::Result<recovery::ExportResult> ExportFromRepository(const RepoExportRequest& req);

}  // namespace walcut::repo
