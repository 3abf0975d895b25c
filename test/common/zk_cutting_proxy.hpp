// A TCP proxy between a ZooKeeper client and server that injects faults at a
// chosen step, on demand:
//   cut_after(op, delay, nth)  forward the nth request of an opcode, then drop
//                              the connection before its reply ("applied,
//                              reply lost");
//   cut_before(op, nth)        drop the nth request of an opcode unsent and
//                              cut the connection ("lost, never applied");
//   hold_replies(op, d, nth)   after the nth request of an opcode, hold every
//                              reply for `d` (a reply late past a timeout);
//   refuse_for(d)              reset every new connection for `d` (a member
//                              that is down, or refuses, for a while);
//   black_hole(on)             forward nothing either way, close nothing (a
//                              silent partition);
//   cut_all()                  drop every open connection now;
//   reset_all()                the same with an RST.
// Each call arms one trigger, which fires once; triggers armed together
// count their requests independently (for one opcode, the first armed counts).
// It also counts the requests it forwarded per opcode, so a test can run an
// operation once to count its steps, then once per step with a fault there.
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

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {

/// ZooKeeper's OpCode values, for the proxy's triggers.
namespace zk_opcode {
inline constexpr std::int32_t create = 1;
inline constexpr std::int32_t remove = 2;  // "delete"
inline constexpr std::int32_t exists = 3;
inline constexpr std::int32_t get_data = 4;
inline constexpr std::int32_t set_data = 5;
inline constexpr std::int32_t get_children = 8;
inline constexpr std::int32_t sync = 9;
inline constexpr std::int32_t ping = 11;
inline constexpr std::int32_t get_children2 = 12;
inline constexpr std::int32_t multi = 14;
inline constexpr std::int32_t create2 = 15;
inline constexpr std::int32_t create_container = 19;
inline constexpr std::int32_t close_session = -11;
/// For the triggers: any request but a ping (the nth step of an operation).
inline constexpr std::int32_t any = -2;
}  // namespace zk_opcode

class zk_cutting_proxy {
 public:
  using tcp = boost::asio::ip::tcp;
  using clock = std::chrono::steady_clock;

  /// Listens on 127.0.0.1 (an ephemeral port) and forwards to `server`, on
  /// its own thread: the client's blocking zookeeper_close must not stall it.
  explicit zk_cutting_proxy(tcp::endpoint server)
      : state_(std::make_shared<state>(io_.get_executor(), server)) {
    boost::asio::co_spawn(io_, accept_loop(state_), boost::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  /// "host:port" of the server.
  explicit zk_cutting_proxy(const std::string& server)
      : zk_cutting_proxy(tcp::endpoint(boost::asio::ip::make_address(server.substr(0, server.rfind(':'))),
                                       static_cast<std::uint16_t>(std::stoi(server.substr(server.rfind(':') + 1))))) {}
  ~zk_cutting_proxy() {
    boost::asio::post(io_, [s = state_] { s->stop(); });
    thread_.join();
  }
  zk_cutting_proxy(const zk_cutting_proxy&) = delete;
  zk_cutting_proxy& operator=(const zk_cutting_proxy&) = delete;

  /// "127.0.0.1:<port>", for the client's hosts string.
  std::string address() const { return "127.0.0.1:" + std::to_string(state_->acceptor.local_endpoint().port()); }

  /// After the `nth` next request with this opcode (ZooKeeper's OpCode, e.g.
  /// 2 for delete) is forwarded, wait `delay` (for the server to apply it)
  /// and cut the connection before the reply reaches the client.
  void cut_after(std::int32_t opcode, std::chrono::milliseconds delay, int nth = 1) {
    std::lock_guard lock(state_->mutex);
    state_->triggers.push_back({trigger_kind::cut, opcode, nth, delay, {}});
  }
  /// The `nth` next request with this opcode is not forwarded: the connection
  /// is cut instead, so the client sees a connection loss for a request the
  /// server never got.
  void cut_before(std::int32_t opcode, int nth = 1) {
    std::lock_guard lock(state_->mutex);
    state_->triggers.push_back({trigger_kind::drop, opcode, nth, {}, {}});
  }
  /// After the `nth` next request with this opcode is forwarded, every reply
  /// of that connection waits until `hold` has passed (order is kept).
  void hold_replies(std::int32_t opcode, std::chrono::milliseconds hold, int nth = 1) {
    std::lock_guard lock(state_->mutex);
    state_->triggers.push_back({trigger_kind::hold, opcode, nth, hold, {}});
  }
  /// After the `nth` next request with this opcode is forwarded, the
  /// client's io_context `client` is blocked for `d` (a GC-like pause, a
  /// long handler: no ping goes out meanwhile); its replies wait a moment so
  /// that the pause begins first.
  void pause_client(std::int32_t opcode, boost::asio::any_io_executor client, std::chrono::milliseconds d,
                    int nth = 1) {
    std::lock_guard lock(state_->mutex);
    state_->triggers.push_back({trigger_kind::pause_client, opcode, nth, d, std::move(client)});
  }
  /// Every connection accepted in the next `d` is reset at once.
  void refuse_for(std::chrono::milliseconds d) {
    std::lock_guard lock(state_->mutex);
    state_->refuse_until = clock::now() + d;
  }
  /// While on, nothing is forwarded either way and nothing is closed.
  void black_hole(bool on) { state_->black_holed = on; }
  /// Drops every open connection now.
  void cut_all() { close_every_link(false); }
  /// Resets every open connection now: the client gets an RST, not a FIN,
  /// so its very next write fails (a crashed peer, a middlebox's reset).
  void reset_all() { close_every_link(true); }
  /// Faults injected so far (cuts, drops and holds).
  int cuts() const { return state_->cuts; }
  /// Reads from a server that arrived while a hold was on: replies the
  /// server has sent, that the client does not have yet.
  int held_replies() const { return state_->held_replies; }
  /// Requests forwarded so far with this opcode.
  int forwarded(std::int32_t opcode) const {
    std::lock_guard lock(state_->mutex);
    auto it = state_->counts.find(opcode);
    return it == state_->counts.end() ? 0 : it->second;
  }
  /// Requests forwarded so far, pings left out.
  int forwarded_requests() const {
    std::lock_guard lock(state_->mutex);
    int n = 0;
    for (auto& [op, count] : state_->counts)
      if (op != zk_opcode::ping) n += count;
    return n;
  }

 private:
  enum class trigger_kind { none, cut, hold, drop, pause_client };
  struct fault_trigger {
    trigger_kind kind = trigger_kind::none;
    std::int32_t opcode = -1;
    int nth = 1;
    std::chrono::milliseconds delay{0};
    boost::asio::any_io_executor client{};  // pause_client's
  };

  using socket_ptr = std::shared_ptr<tcp::socket>;

  struct link {  // one client connection
    socket_ptr client, upstream;
    bool muted = false;
    clock::time_point hold_until{};
  };
  using link_ptr = std::shared_ptr<link>;

  struct state {
    state(boost::asio::any_io_executor ex, tcp::endpoint s)
        : acceptor(ex, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)), server(s) {}
    void close_all(bool reset = false) {
      boost::system::error_code ignored;
      for (auto& w : links)
        if (auto l = w.lock()) {
          if (reset) l->client->set_option(tcp::socket::linger(true, 0), ignored);
          l->client->close(ignored);
          l->upstream->close(ignored);
        }
      links.clear();
    }
    void stop() {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      close_all();
    }
    // What a request about to be forwarded triggers, under the mutex.
    fault_trigger on_request(std::int32_t opcode) {
      std::lock_guard lock(mutex);
      ++counts[opcode];
      auto matches = [opcode](auto& t) {
        return t.opcode == opcode || (t.opcode == zk_opcode::any && opcode != zk_opcode::ping);
      };
      auto it = std::find_if(triggers.begin(), triggers.end(), matches);
      if (it == triggers.end() || --it->nth > 0) return {};
      auto fired = *it;
      triggers.erase(it);
      ++cuts;
      if (fired.kind == trigger_kind::drop) --counts[opcode];  // not forwarded after all
      return fired;
    }
    bool refusing() {
      std::lock_guard lock(mutex);
      return clock::now() < refuse_until;
    }

    tcp::acceptor acceptor;
    tcp::endpoint server;
    mutable std::mutex mutex;
    std::vector<fault_trigger> triggers;  // armed, each fires once
    std::map<std::int32_t, int> counts;
    clock::time_point refuse_until{};
    std::atomic<bool> black_holed{false};
    std::atomic<int> cuts{0};
    std::atomic<int> held_replies{0};
    std::vector<std::weak_ptr<link>> links;
  };
  using state_ptr = std::shared_ptr<state>;

  static constexpr auto with_ec = boost::asio::as_tuple(boost::asio::deferred);

  // On the proxy's thread; returns once done.
  void close_every_link(bool reset) {
    std::promise<void> done;
    boost::asio::post(io_, [s = state_, &done, reset] {
      s->close_all(reset);
      done.set_value();
    });
    done.get_future().wait();
  }
  static constexpr std::uint32_t max_frame_length = 1u << 20;

  static boost::asio::awaitable<void> accept_loop(state_ptr s) {
    for (;;) {
      auto [ec, accepted] = co_await s->acceptor.async_accept(with_ec);
      if (ec) co_return;
      if (s->refusing()) {
        boost::system::error_code ignored;
        accepted.set_option(tcp::socket::linger(true, 0), ignored);  // an RST, not a FIN
        accepted.close(ignored);
        continue;
      }
      auto l = std::make_shared<link>();
      l->client = std::make_shared<tcp::socket>(std::move(accepted));
      l->upstream = std::make_shared<tcp::socket>(s->acceptor.get_executor());
      auto [connect_ec] = co_await l->upstream->async_connect(s->server, with_ec);
      if (connect_ec) continue;
      s->links.push_back(l);
      auto ex = s->acceptor.get_executor();
      boost::asio::co_spawn(ex, copy_replies(s, l), boost::asio::detached);
      boost::asio::co_spawn(ex, copy_requests(s, l), boost::asio::detached);
    }
  }

  static void close_link(const link_ptr& l) {
    boost::system::error_code ignored;
    l->client->close(ignored);
    l->upstream->close(ignored);
  }

  // Server -> client: bytes as they come, after any hold; dropped once muted
  // or while black-holed.
  static boost::asio::awaitable<void> copy_replies(state_ptr s, link_ptr l) {
    std::array<char, 16384> buffer;
    boost::asio::steady_timer pause(l->client->get_executor());
    for (;;) {
      auto [ec, n] = co_await l->upstream->async_read_some(boost::asio::buffer(buffer), with_ec);
      if (ec) break;
      if (l->hold_until > clock::now()) {
        ++s->held_replies;
        pause.expires_at(l->hold_until);
        co_await pause.async_wait(with_ec);
      }
      if (l->muted || s->black_holed) continue;
      auto [write_ec, written] = co_await boost::asio::async_write(*l->client, boost::asio::buffer(buffer, n), with_ec);
      if (write_ec) break;
    }
    close_link(l);
  }

  // Client -> server, frame by frame (4-byte big-endian length, then the
  // frame; after the first frame, the connect request, each frame starts
  // with xid and opcode).
  static boost::asio::awaitable<void> copy_requests(state_ptr s, link_ptr l) {
    bool first = true;
    for (;;) {
      std::array<unsigned char, 4> length_bytes;
      auto [ec, n] = co_await boost::asio::async_read(*l->client, boost::asio::buffer(length_bytes), with_ec);
      if (ec) break;
      std::uint32_t length = (std::uint32_t(length_bytes[0]) << 24) | (std::uint32_t(length_bytes[1]) << 16) |
                             (std::uint32_t(length_bytes[2]) << 8) | std::uint32_t(length_bytes[3]);
      // A length past jute.maxbuffer (1 MiB) is not a frame: a client that
      // resumed a half-written request on a new connection. The server
      // closes such a connection ("Len error"); so does the proxy.
      if (length > max_frame_length) break;
      std::vector<unsigned char> frame(4 + length);
      std::copy(length_bytes.begin(), length_bytes.end(), frame.begin());
      auto [body_ec, m] =
          co_await boost::asio::async_read(*l->client, boost::asio::buffer(frame.data() + 4, length), with_ec);
      if (body_ec) break;
      if (s->black_holed) continue;
      std::int32_t opcode = -1;
      if (!first && length >= 8)
        opcode = static_cast<std::int32_t>((std::uint32_t(frame[8]) << 24) | (std::uint32_t(frame[9]) << 16) |
                                           (std::uint32_t(frame[10]) << 8) | std::uint32_t(frame[11]));
      first = false;
      bool counted = opcode >= 0 || opcode == zk_opcode::close_session;  // not the connect request
      auto fired = counted ? s->on_request(opcode) : fault_trigger{};
      if (fired.kind == trigger_kind::drop) break;  // never sent: cut now
      auto [write_ec, w] = co_await boost::asio::async_write(*l->upstream, boost::asio::buffer(frame), with_ec);
      if (write_ec) break;
      if (fired.kind == trigger_kind::hold) l->hold_until = clock::now() + fired.delay;
      if (fired.kind == trigger_kind::pause_client) {
        boost::asio::post(fired.client, [d = fired.delay] { std::this_thread::sleep_for(d); });
        l->hold_until = clock::now() + std::chrono::milliseconds(20);
      }
      if (fired.kind == trigger_kind::cut) {
        // Stop relaying replies at once, give the server time to apply the request, then cut.
        l->muted = true;
        boost::asio::steady_timer pause(l->client->get_executor(), fired.delay);
        co_await pause.async_wait(with_ec);
        break;
      }
    }
    close_link(l);
  }

  boost::asio::io_context io_;
  state_ptr state_;
  std::thread thread_;
};

}  // namespace dlock::test
