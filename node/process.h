// A real node: one process that runs one Node (the protocol of node/node.h)
// over TCP on the loopback, with the system clock and an fdatasync'd WAL.
// `walcut node` runs it; `walcut cluster up` starts one per node. The
// cluster directory holds cluster.json (as `walcut run` writes it) and
// runtime.json (node/runtime_file.h: the ports, the processes, the options).
//
// One thread, one event loop (standalone Asio). Everything the Node does is
// an event: a frame from a peer, a client's transaction, a control request,
// a timer. Group commit: the records the events of one loop turn append are
// written with one fdatasync, and nothing the node sends after asking for a
// sync (a vote, an acknowledgement, a client's answer) leaves before it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "walfmt/status.h"

namespace walcut::node {

// When a node's WAL reaches the disk. With kAlways and kGroup a commit is
// acknowledged only once its records are on disk.
enum class SyncMode : uint8_t {
  kAlways,  // every sync the protocol asks for is one write and fdatasync, at once
  kGroup,   // one write and fdatasync per turn of the event loop, for every sync asked in it
  kOff,     // one write per turn, no fdatasync (a crash of the machine may lose acknowledged commits)
};
std::string_view SyncModeName(SyncMode m);  // "always", "group", "off"
bool ParseSyncMode(std::string_view text, SyncMode& out);

struct ProcessOptions {
  std::string dir;  // the cluster directory: cluster.json and runtime.json
  uint32_t node = 0;
  // Where the node's log lines go (a connection refused and why, a peer
  // lost); none when empty. One line per call, no newline.
  std::function<void(const std::string&)> log;
  // Set (by another thread) when the node is to stop, as SIGTERM does: for a
  // program that takes the termination signals itself (walcut's CLI waits for
  // them on a thread of its own). Polled every few milliseconds; may be null.
  const std::atomic<bool>* stop = nullptr;
};

// A full snapshot's name (`walcut cluster snapshot --name`): 1 to 64
// letters, digits, '.', '_' or '-', not starting with '.' or '-'; it names
// the directory DIR/snapshots/NAME.
bool ValidSnapshotName(std::string_view name);

// Runs node `opt.node` of the cluster in opt.dir until it is told to stop
// (a Shutdown request, SIGTERM or SIGINT). A node whose WAL directory holds
// segments recovers from them (the torn tail cut off, undecided transactions
// resolved with the other nodes); otherwise it starts the cluster's WAL, and
// node 0 writes the initial data once every node is connected. Errors: the
// files cannot be read (kNotFound, kCorruption), the port is taken or a
// write fails (kIo).
walfmt::Status RunNodeProcess(const ProcessOptions& opt);

}  // namespace walcut::node
