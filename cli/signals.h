// Termination signals and staging leftovers, for the commands that build an
// output in a staging directory beside it (walfmt/staging.h).
#pragma once

#include <atomic>
#include <string>

namespace walcut::cli {

// Called first thing in main, before any thread starts: SIGINT, SIGTERM and
// SIGHUP (those not ignored when walcut started) are blocked in every thread
// and handled by one thread that waits for them. On a signal it removes every
// registered staging path and lock file, says so on stderr, and ends the
// process by the same signal (so the shell sees 128+N).
void InstallSignalCleanup();

// Before a command writes OUT: every stale staging entry beside OUT (left by a
// walcut that was killed) is named on stderr, one "walcut: note:" line each;
// with `clean` they are removed instead ("walcut: removed stale ..."). Returns
// 0, or kExitIo when the directory cannot be listed or an entry not removed
// (the message is printed).
int NoteStaleStaging(const std::string& out, bool clean);

// For a command that runs until it is interrupted (dump --follow): while a
// flag is set here, the first SIGINT or SIGTERM sets it instead of ending
// the process, so that the command stops at its next check, writes what it
// holds and exits as usual. A second signal ends the process as above.
// nullptr unsets it.
void StopOnSignal(std::atomic<bool>* flag);

}  // namespace walcut::cli
