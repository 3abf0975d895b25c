// A TCP proxy between a ZooKeeper client and server that can drop the
// connection right after forwarding a request of a given type, before its
// reply: the "request applied, reply lost" case, on demand.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <thread>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dlock::test {

class zk_cutting_proxy {
 public:
  using tcp = boost::asio::ip::tcp;

  /// Listens on 127.0.0.1 (an ephemeral port) and forwards to `server`, on
  /// its own thread: the client's blocking zookeeper_close must not stall it.
  explicit zk_cutting_proxy(tcp::endpoint server)
      : state_(std::make_shared<state>(io_.get_executor(), server)) {
    boost::asio::co_spawn(io_, accept_loop(state_), boost::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~zk_cutting_proxy() {
    boost::asio::post(io_, [s = state_] { s->stop(); });
    thread_.join();
  }

  /// "127.0.0.1:<port>", for the client's hosts string.
  std::string address() const { return "127.0.0.1:" + std::to_string(state_->acceptor.local_endpoint().port()); }

  /// After the next request with this opcode (ZooKeeper's OpCode, e.g. 2 for
  /// delete) is forwarded, wait `delay` (for the server to apply it) and cut
  /// the connection before the reply reaches the client.
  void cut_after(std::int32_t opcode, std::chrono::milliseconds delay) {
    state_->cut_delay = delay;
    state_->cut_opcode = opcode;  // atomic: arms after the delay is set
  }
  int cuts() const { return state_->cuts; }

 private:
  struct state {
    state(boost::asio::any_io_executor ex, tcp::endpoint s)
        : acceptor(ex, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)), server(s) {}
    void stop() {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      for (auto& w : sockets)
        if (auto sock = w.lock()) sock->close(ignored);
    }
    tcp::acceptor acceptor;
    tcp::endpoint server;
    std::atomic<std::int32_t> cut_opcode{-1};
    std::chrono::milliseconds cut_delay{0};
    std::atomic<int> cuts{0};
    std::vector<std::weak_ptr<tcp::socket>> sockets;
  };
  using state_ptr = std::shared_ptr<state>;
  using socket_ptr = std::shared_ptr<tcp::socket>;

  static constexpr auto with_ec = boost::asio::as_tuple(boost::asio::deferred);

  static boost::asio::awaitable<void> accept_loop(state_ptr s) {
    for (;;) {
      auto [ec, accepted] = co_await s->acceptor.async_accept(with_ec);
      if (ec) co_return;
      auto client = std::make_shared<tcp::socket>(std::move(accepted));
      auto upstream = std::make_shared<tcp::socket>(s->acceptor.get_executor());
      auto [connect_ec] = co_await upstream->async_connect(s->server, with_ec);
      if (connect_ec) continue;
      s->sockets.push_back(client);
      s->sockets.push_back(upstream);
      auto ex = s->acceptor.get_executor();
      auto muted = std::make_shared<bool>(false);
      boost::asio::co_spawn(ex, copy_replies(upstream, client, muted), boost::asio::detached);
      boost::asio::co_spawn(ex, copy_requests(s, client, upstream, muted), boost::asio::detached);
    }
  }

  static void close_both(const socket_ptr& a, const socket_ptr& b) {
    boost::system::error_code ignored;
    a->close(ignored);
    b->close(ignored);
  }

  // Server -> client: bytes as they come; dropped once the connection is muted.
  static boost::asio::awaitable<void> copy_replies(socket_ptr from, socket_ptr to, std::shared_ptr<bool> muted) {
    std::array<char, 16384> buffer;
    for (;;) {
      auto [ec, n] = co_await from->async_read_some(boost::asio::buffer(buffer), with_ec);
      if (ec) break;
      if (*muted) continue;
      auto [write_ec, written] = co_await boost::asio::async_write(*to, boost::asio::buffer(buffer, n), with_ec);
      if (write_ec) break;
    }
    close_both(from, to);
  }

  // Client -> server, frame by frame (4-byte big-endian length, then the
  // frame; after the first frame, the connect request, each frame starts
  // with xid and opcode).
  static boost::asio::awaitable<void> copy_requests(state_ptr s, socket_ptr from, socket_ptr to,
                                                    std::shared_ptr<bool> muted) {
    bool first = true;
    for (;;) {
      std::array<unsigned char, 4> length_bytes;
      auto [ec, n] = co_await boost::asio::async_read(*from, boost::asio::buffer(length_bytes), with_ec);
      if (ec) break;
      std::uint32_t length = (std::uint32_t(length_bytes[0]) << 24) | (std::uint32_t(length_bytes[1]) << 16) |
                             (std::uint32_t(length_bytes[2]) << 8) | std::uint32_t(length_bytes[3]);
      std::vector<unsigned char> frame(4 + length);
      std::copy(length_bytes.begin(), length_bytes.end(), frame.begin());
      auto [body_ec, m] = co_await boost::asio::async_read(*from, boost::asio::buffer(frame.data() + 4, length), with_ec);
      if (body_ec) break;
      std::int32_t opcode = -1;
      if (!first && length >= 8)
        opcode = static_cast<std::int32_t>((std::uint32_t(frame[8]) << 24) | (std::uint32_t(frame[9]) << 16) |
                                           (std::uint32_t(frame[10]) << 8) | std::uint32_t(frame[11]));
      first = false;
      auto [write_ec, w] = co_await boost::asio::async_write(*to, boost::asio::buffer(frame), with_ec);
      if (write_ec) break;
      if (opcode >= 0 && opcode == s->cut_opcode) {
        s->cut_opcode = -1;
        ++s->cuts;
        // Stop relaying replies at once, give the server time to apply the request, then cut.
        *muted = true;
        boost::asio::steady_timer pause(from->get_executor(), s->cut_delay);
        co_await pause.async_wait(with_ec);
        break;
      }
    }
    close_both(from, to);
  }

  boost::asio::io_context io_;
  state_ptr state_;
  std::thread thread_;
};

}  // namespace dlock::test
