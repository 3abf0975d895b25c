// The sentinels, as one connection sees them: asked in turn where the
// master is, the one that answered kept as a subscription to
// `+switch-master`, and every other one subscribed too: the sentinel that
// leads a failover announces it only at its end, a second after the others.
// What the answers mean is sentinel.hpp's; when the connection moves is
// its lifecycle's. This is the glue that talks to the sentinels, through
// connections of their own.
#pragma once

#include "redis/connection/request.hpp"
#include "redis/connection/sentinel.hpp"

#include <dlock/redis/options.hpp>

#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace dlock::redis::detail {

class connection_impl;

class sentinel_watch : public reply_sink, public std::enable_shared_from_this<sentinel_watch> {
 public:
  sentinel_watch(asio::any_io_executor executor, const options& master, std::weak_ptr<connection_impl> owner);

  /// Asks the sentinels for the master, for the owner's attempt `attempt`;
  /// the sentinel that names it becomes the subscription.
  void discover(std::uint64_t attempt);
  void close();

  const asio::any_io_executor& sink_executor() const noexcept override { return executor_; }
  void on_reply(std::size_t index, error_code ec, const reply& answer) override;

 private:
  enum class purpose { attempt, watch };  // for the owner's attempt, or to find a missed switch
  enum command_index : std::size_t { query, subscribe, ping, commands };

  void drop_link();
  void start_round(purpose why);
  void ask_next();
  void on_linked(std::uint64_t generation, error_code ec);
  void send(command c, command_index what);
  void on_answer(command_index what, error_code ec, const reply& answer);
  void found(const server_address& master);
  void round_failed(error e);
  void on_message(const reply& message);
  void on_link_closed(std::uint64_t generation);
  void arm_ping();
  void listen_to_the_others();
  void stop_listening();
  void arm_rewatch();
  options link_options(std::size_t sentinel) const;

  asio::any_io_executor executor_;
  sentinel_options sentinels_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds rewatch_delay_;
  std::weak_ptr<connection_impl> owner_;
  std::shared_ptr<connection_impl> link_;  // to the sentinel asked last
  std::vector<std::shared_ptr<connection_impl>> listeners_;  // subscribed only, to the others
  std::uint64_t generation_ = 0;           // of link_: answers on older links are ignored
  std::size_t linked_ = 0;                 // the sentinel link_ goes to
  std::size_t first_ = 0;                  // the sentinel that answered last: asked first
  std::optional<sentinel_round> round_;
  purpose purpose_ = purpose::attempt;
  std::uint64_t attempt_ = 0;
  asio::steady_timer ping_timer_;
  asio::steady_timer rewatch_timer_;
  bool closed_ = false;
};

}  // namespace dlock::redis::detail
