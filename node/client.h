// A blocking connection to one node of a real cluster (node/process.h), for
// the tools: `walcut load`'s clients, `walcut cut start`, `walcut cluster`.
// One request at a time; every wait is bounded by a timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "node/wire.h"
#include "walfmt/status.h"

namespace walcut::node {

class Client {
 public:
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Connects to host:port and sends the Hello of `role`. Errors: kIo (refused,
  // timed out).
  static walfmt::Result<std::unique_ptr<Client>> Connect(const std::string& host, uint16_t port, uint64_t cluster_id,
                                                         wire::Role role, std::chrono::milliseconds timeout);
  walfmt::Status Send(const wire::Message& m);
  // The next message from the node. Errors: kIo (closed, timed out),
  // kCorruption (a damaged frame).
  walfmt::Result<wire::Message> Receive(std::chrono::milliseconds timeout);
  // Send, then Receive.
  walfmt::Result<wire::Message> Call(const wire::Message& m, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace walcut::node
