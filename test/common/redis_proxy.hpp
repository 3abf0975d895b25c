// A TCP proxy between a Redis client and server that injects faults at a
// chosen command, on demand (the Redis counterpart of zk_cutting_proxy):
//   cut_after(delay, nth)    forward the nth next command, wait `delay` (for
//                            the server to run it), then drop the connection
//                            before its reply ("applied, reply lost");
//   drop_reply(nth)          forward the nth next command but never its reply,
//                            and keep the connection (the client's command
//                            timeout fires; the replies that follow are
//                            forwarded as they come);
//   hold_replies(d, nth)     after the nth next command, hold every reply of
//                            that connection for `d` (order is kept);
//   refuse_for(d)            reset every new connection for `d`;
//   cut_all()                drop every open connection now;
//   answer_error(text, applied, nth)
//                            the nth next command is answered `-text`: the
//                            server's own refusal (OOM, READONLY, BUSY: a
//                            stand-in command the server rejects is sent
//                            instead, so nothing runs and order is kept), or
//                            with `applied`, after the server ran it (a
//                            script that failed after its first write);
//   pause_client(ex, d, nth) after the nth next command, the client's
//                            io_context `ex` is blocked for `d` (a GC-like
//                            pause of the client between a request and its
//                            reply; the replies wait a moment so that the
//                            pause begins first); run_in_client(ex, f, nth)
//                            blocks it with `f` instead.
// It counts the commands it forwarded (RESP arrays from the client; inline
// commands are not framed), so a test can run an operation once to count
// its steps, then once per step with a fault there.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace dlock::test {

namespace resp {

/// The length in bytes of the first complete RESP2/RESP3 value in `data`, or
/// nullopt when `data` holds only part of it. Throws std::runtime_error on a
/// type byte RESP does not have (the proxy then drops the connection).
inline std::optional<std::size_t> frame_length(std::string_view data, std::size_t at = 0) {
  if (at >= data.size()) return std::nullopt;
  auto line_end = data.find("\r\n", at);
  if (line_end == std::string_view::npos) return std::nullopt;
  auto after_line = line_end + 2;
  auto number = [&] { return std::stoll(std::string(data.substr(at + 1, line_end - at - 1))); };
  switch (data[at]) {
    case '+': case '-': case ':': case '_': case ',': case '#': case '(':
      return after_line - at;
    case '$': case '!': case '=': {
      auto n = number();
      if (n < 0) return after_line - at;  // null bulk string
      auto end = after_line + static_cast<std::size_t>(n) + 2;
      if (end > data.size()) return std::nullopt;
      return end - at;
    }
    case '*': case '~': case '>': case '%': case '|': {
      auto n = number();
      if (n < 0) return after_line - at;  // null array
      if (data[at] == '%' || data[at] == '|') n *= 2;  // maps and attributes: key and value
      auto next = after_line;
      for (long long i = 0; i < n; ++i) {
        auto element = frame_length(data, next);
        if (!element) return std::nullopt;
        next += *element;
      }
      // An attribute precedes the value it describes: both are one reply.
      if (data[at] == '|') {
        auto value = frame_length(data, next);
        if (!value) return std::nullopt;
        next += *value;
      }
      return next - at;
    }
    default:
      throw std::runtime_error("not RESP");
  }
}

}  // namespace resp

class redis_proxy {
 public:
  using tcp = boost::asio::ip::tcp;
  using clock = std::chrono::steady_clock;

  /// Listens on 127.0.0.1 (an ephemeral port) and forwards to `server`, on its own thread.
  redis_proxy(const std::string& host, std::uint16_t port)
      : state_(std::make_shared<state>(io_.get_executor(), tcp::endpoint(boost::asio::ip::make_address(host), port))) {
    boost::asio::co_spawn(io_, accept_loop(state_), boost::asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~redis_proxy() {
    boost::asio::post(io_, [s = state_] { s->stop(); });
    thread_.join();
  }
  redis_proxy(const redis_proxy&) = delete;
  redis_proxy& operator=(const redis_proxy&) = delete;

  std::string host() const { return "127.0.0.1"; }
  std::uint16_t port() const { return state_->acceptor.local_endpoint().port(); }

  /// Forward the `nth` next command, wait `delay`, then drop its connection
  /// (no reply from then on reaches the client).
  void cut_after(std::chrono::milliseconds delay, int nth = 1) { arm({trigger_kind::cut, nth, delay, {}, {}, {}}); }
  /// Forward the `nth` next command but swallow its reply; the connection stays.
  void drop_reply(int nth = 1) { arm({trigger_kind::drop, nth, {}, {}, {}, {}}); }
  /// After the `nth` next command, every reply of its connection waits until `hold` has passed.
  void hold_replies(std::chrono::milliseconds hold, int nth = 1) { arm({trigger_kind::hold, nth, hold, {}, {}, {}}); }
  /// The `nth` next command is answered `-text`: refused before it ran, or
  /// (`applied`) after the server ran it.
  void answer_error(std::string text, bool applied, int nth = 1) {
    arm({applied ? trigger_kind::error_after_running : trigger_kind::error_instead, nth, {}, std::move(text), {}, {}});
  }
  /// After the `nth` next command, `client`'s io_context is blocked for `d`.
  void pause_client(boost::asio::any_io_executor client, std::chrono::milliseconds d, int nth = 1) {
    run_in_client(std::move(client), [d] { std::this_thread::sleep_for(d); }, nth);
  }
  /// After the `nth` next command, `pause` runs on `client`'s io_context
  /// before its reply can be read: whatever it does, the client waits.
  void run_in_client(boost::asio::any_io_executor client, std::function<void()> pause, int nth = 1) {
    arm({trigger_kind::pause_client, nth, {}, {}, std::move(client), std::move(pause)});
  }
  /// Every connection accepted in the next `d` is reset at once.
  void refuse_for(std::chrono::milliseconds d) {
    std::lock_guard lock(state_->mutex);
    state_->refuse_until = clock::now() + d;
  }
  /// Forgets an armed trigger that has not fired.
  void disarm() { arm({}); }
  /// Drops every open connection now.
  void cut_all() {
    std::promise<void> done;
    boost::asio::post(io_, [s = state_, &done] {
      s->close_all();
      done.set_value();
    });
    done.get_future().wait();
  }
  /// Faults injected so far.
  int faults() const { return state_->faults; }
  /// Commands forwarded so far.
  int forwarded_commands() const { return state_->commands; }

 private:
  enum class trigger_kind { none, cut, drop, hold, error_instead, error_after_running, pause_client };
  struct fault_trigger {
    trigger_kind kind = trigger_kind::none;
    int nth = 1;
    std::chrono::milliseconds delay{0};
    std::string error;                    // the error kinds' text
    boost::asio::any_io_executor client;  // pause_client's
    std::function<void()> pause;          // pause_client's: what blocks the client
  };

  void arm(fault_trigger t) {
    std::lock_guard lock(state_->mutex);
    state_->trigger = t;
  }

  using socket_ptr = std::shared_ptr<tcp::socket>;

  struct link {  // one client connection
    socket_ptr client, upstream;
    bool muted = false;
    clock::time_point hold_until{};
    std::uint64_t commands = 0;           // forwarded on this link
    std::uint64_t replies = 0;            // seen from the server on this link
    std::set<std::uint64_t> to_drop;      // 1-based reply numbers never forwarded
    std::map<std::uint64_t, std::string> to_replace;  // 1-based reply numbers answered with these instead
  };
  using link_ptr = std::shared_ptr<link>;

  struct state {
    state(boost::asio::any_io_executor ex, tcp::endpoint s)
        : acceptor(ex, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)), server(s) {}
    void close_all() {
      boost::system::error_code ignored;
      for (auto& w : links)
        if (auto l = w.lock()) {
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
    fault_trigger on_command() {
      std::lock_guard lock(mutex);
      ++commands;
      if (trigger.kind == trigger_kind::none || --trigger.nth > 0) return {};
      auto fired = trigger;
      trigger = {};
      ++faults;
      return fired;
    }
    bool refusing() {
      std::lock_guard lock(mutex);
      return clock::now() < refuse_until;
    }

    tcp::acceptor acceptor;
    tcp::endpoint server;
    std::mutex mutex;
    fault_trigger trigger;
    clock::time_point refuse_until{};
    std::atomic<int> commands{0};
    std::atomic<int> faults{0};
    std::vector<std::weak_ptr<link>> links;
  };
  using state_ptr = std::shared_ptr<state>;

  static constexpr auto with_ec = boost::asio::as_tuple(boost::asio::deferred);

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
      boost::asio::co_spawn(ex, copy_commands(s, l), boost::asio::detached);
    }
  }

  static void close_link(const link_ptr& l) {
    boost::system::error_code ignored;
    l->client->close(ignored);
    l->upstream->close(ignored);
  }

  // Server -> client, reply by reply: after any hold; dropped once muted or
  // when the reply's number is marked.
  static boost::asio::awaitable<void> copy_replies(state_ptr, link_ptr l) {
    std::array<char, 16384> buffer;
    std::string pending;
    boost::asio::steady_timer pause(l->client->get_executor());
    for (;;) {
      auto [ec, n] = co_await l->upstream->async_read_some(boost::asio::buffer(buffer), with_ec);
      if (ec) break;
      pending.append(buffer.data(), n);
      std::string out;
      try {
        while (auto length = resp::frame_length(pending)) {
          ++l->replies;
          if (auto replaced = l->to_replace.find(l->replies); replaced != l->to_replace.end()) {
            out.append("-").append(replaced->second).append("\r\n");
            l->to_replace.erase(replaced);
          } else if (!l->to_drop.erase(l->replies)) {
            out.append(pending, 0, *length);
          }
          pending.erase(0, *length);
        }
      } catch (const std::exception&) {
        break;
      }
      if (l->hold_until > clock::now()) {
        pause.expires_at(l->hold_until);
        co_await pause.async_wait(with_ec);
      }
      if (l->muted || out.empty()) continue;
      auto [write_ec, written] = co_await boost::asio::async_write(*l->client, boost::asio::buffer(out), with_ec);
      if (write_ec) break;
    }
    close_link(l);
  }

  // Client -> server, command by command.
  static boost::asio::awaitable<void> copy_commands(state_ptr s, link_ptr l) {
    std::array<char, 16384> buffer;
    std::string pending;
    for (;;) {
      auto [ec, n] = co_await l->client->async_read_some(boost::asio::buffer(buffer), with_ec);
      if (ec) break;
      pending.append(buffer.data(), n);
      bool cut = false;
      try {
        while (auto length = resp::frame_length(pending)) {
          auto command = pending.substr(0, *length);
          pending.erase(0, *length);
          ++l->commands;
          auto fired = s->on_command();
          if (fired.kind == trigger_kind::drop) l->to_drop.insert(l->commands);
          if (fired.kind == trigger_kind::error_instead || fired.kind == trigger_kind::error_after_running)
            l->to_replace[l->commands] = fired.error;
          // Refused before it ran: the server gets a command it rejects, in
          // the same place, so that the replies keep their order.
          if (fired.kind == trigger_kind::error_instead) command = "*1\r\n$19\r\nDLOCK-NOT-A-COMMAND\r\n";
          if (fired.kind == trigger_kind::pause_client) {
            boost::asio::post(fired.client, std::move(fired.pause));
            l->hold_until = clock::now() + std::chrono::milliseconds(20);
          }
          auto [write_ec, w] = co_await boost::asio::async_write(*l->upstream, boost::asio::buffer(command), with_ec);
          if (write_ec) {
            cut = true;
            break;
          }
          if (fired.kind == trigger_kind::hold) l->hold_until = clock::now() + fired.delay;
          if (fired.kind == trigger_kind::cut) {
            // Stop relaying replies at once, give the server time to run the command, then cut.
            l->muted = true;
            boost::asio::steady_timer pause(l->client->get_executor(), fired.delay);
            co_await pause.async_wait(with_ec);
            cut = true;
            break;
          }
        }
      } catch (const std::exception&) {
        cut = true;
      }
      if (cut) break;
    }
    close_link(l);
  }

  boost::asio::io_context io_;
  state_ptr state_;
  std::thread thread_;
};

}  // namespace dlock::test
