// Client (node/client.h): Asio's asynchronous operations run for at most the
// timeout on a private io_context, which makes each call blocking and bounded.

#include "node/client.h"

#include <array>
#include <csignal>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <asio.hpp>

namespace walcut::node {

using asio::ip::tcp;
using walfmt::Status;

struct Client::Impl {
  asio::io_context io;
  tcp::socket sock{io};
  wire::FrameReader reader;
  std::string where;

  // Runs the io_context until `done` or the timeout; on timeout the socket
  // is closed (the pending operation ends with an error).
  bool RunUntil(const bool& done, std::chrono::milliseconds timeout) {
    io.restart();
    io.run_for(timeout);
    if (!done) {
      std::error_code ec;
      sock.close(ec);
      io.restart();
      io.run_for(std::chrono::milliseconds(100));
      return false;
    }
    return true;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

walfmt::Result<std::unique_ptr<Client>> Client::Connect(const std::string& host, uint16_t port, uint64_t cluster_id,
                                                        wire::Role role, std::chrono::milliseconds timeout) {
  // A node that dies while a tool writes to it is an error of that call,
  // not the end of the tool (walcut load keeps going on the other nodes).
  std::signal(SIGPIPE, SIG_IGN);
  auto impl = std::make_unique<Impl>();
  impl->where = fmt::format("{}:{}", host, port);
  std::error_code ec;
  const tcp::endpoint ep(asio::ip::make_address(host, ec), port);
  if (ec) return Status::InvalidArgument(fmt::format("{}: {}", impl->where, ec.message()));
  bool done = false;
  std::error_code result;
  impl->sock.async_connect(ep, [&](const std::error_code& e) {
    result = e;
    done = true;
  });
  if (!impl->RunUntil(done, timeout)) return Status::Io(fmt::format("{}: connect: timed out", impl->where));
  if (result) return Status::Io(fmt::format("{}: connect: {}", impl->where, result.message()));
  impl->sock.set_option(tcp::no_delay(true), ec);
  std::unique_ptr<Client> c(new Client(std::move(impl)));
  const uint32_t who = role == wire::Role::kClient ? wire::kClient : wire::kControl;
  if (Status st = c->Send(wire::Hello{cluster_id, who, 0, role, wire::kProtocolVersion}); !st.ok()) return st;
  return c;
}

Status Client::Send(const wire::Message& m) {
  std::string frame;
  if (Status st = wire::AppendFrame(frame, wire::Encode(m)); !st.ok()) return st;
  std::error_code ec;
  asio::write(impl_->sock, asio::buffer(frame), ec);
  if (ec) return Status::Io(fmt::format("{}: send: {}", impl_->where, ec.message()));
  return Status::Ok();
}

walfmt::Result<wire::Message> Client::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto f = impl_->reader.Next();
    if (!f.ok()) return Status::Corruption(fmt::format("{}: {}", impl_->where, f.status().message()));
    if (f->has_value()) {
      auto m = wire::Decode(**f);
      if (!m.ok()) return Status::Corruption(fmt::format("{}: {}", impl_->where, m.status().message()));
      return std::move(*m);
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !impl_->sock.is_open()) {
      return Status::Io(fmt::format("{}: no answer within {} ms", impl_->where, timeout.count()));
    }
    std::array<char, 64 * 1024> buf;
    bool done = false;
    std::error_code result;
    size_t got = 0;
    impl_->sock.async_read_some(asio::buffer(buf), [&](const std::error_code& e, size_t n) {
      result = e;
      got = n;
      done = true;
    });
    if (!impl_->RunUntil(done, left)) {
      return Status::Io(fmt::format("{}: no answer within {} ms", impl_->where, timeout.count()));
    }
    if (result) {
      return Status::Io(fmt::format("{}: {}", impl_->where,
                                    result == asio::error::eof ? "the node closed the connection" : result.message()));
    }
    impl_->reader.Feed(std::string_view(buf.data(), got));
  }
}

walfmt::Result<wire::Message> Client::Call(const wire::Message& m, std::chrono::milliseconds timeout) {
  if (Status st = Send(m); !st.ok()) return st;
  return Receive(timeout);
}

}  // namespace walcut::node
