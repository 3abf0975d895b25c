// Reading and following the leader of an election (the campaign itself is
// the mutex recipe: see src/zk/locks).
#include <dlock/zk/leader_election.hpp>

#include <dlock/error.hpp>
#include <dlock/zk/path.hpp>

#include "zk/recipe/node_names.hpp"
#include "zk/recipe/retry.hpp"

#include "detail/spawn_to_handler.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <tuple>

namespace dlock::zk::detail {
namespace {

constexpr auto with_ec = asio::as_tuple(asio::deferred);
using leader_result = std::tuple<error_code, std::optional<std::string>>;

// These reads have no options of their own: the default retries.
constexpr retry_policy read_retries{};

// The pause before retry `retry`. True when a cancel cut it short: the
// caller then stops with operation_aborted.
asio::awaitable<bool> pause_cancelled(int retry) {
  asio::steady_timer timer(co_await asio::this_coro::executor, with_jitter(backoff_delay(read_retries, retry)));
  auto [ec] = co_await timer.async_wait(with_ec);
  auto state = co_await asio::this_coro::cancellation_state;
  co_return ec == asio::error::operation_aborted || state.cancelled() != asio::cancellation_type::none;
}

const leader_result aborted{make_error_code(asio::error::operation_aborted), std::nullopt};

// The oldest candidate's node name, if any. no_node (no election yet) is "none".
asio::awaitable<std::tuple<error_code, std::optional<std::string>>> first_candidate(client& zk, std::string path) {
  auto [ec, children, parent] = co_await zk.get_children(path, with_ec);
  if (ec == error::no_node) co_return std::tuple{error_code{}, std::optional<std::string>{}};
  if (ec) co_return std::tuple{ec, std::optional<std::string>{}};
  auto contenders = sort_contenders(children);
  if (contenders.empty()) co_return std::tuple{error_code{}, std::optional<std::string>{}};
  co_return std::tuple{error_code{}, std::optional<std::string>(contenders.front().name)};
}

// Each coroutine owns a borrowed handle on the session: it may outlive the
// election object and the user's client (it then meets a closed session).
asio::awaitable<leader_result> current_leader(client zk, std::string path) {
  if (error_code bad = validate_path(path)) co_return leader_result{bad, std::nullopt};
  for (int failures = 1;; ++failures) {
    auto [ec, first] = co_await first_candidate(zk, path);
    error_code again = ec;  // why we look again
    if (!ec) {
      if (!first) co_return leader_result{ec, std::nullopt};
      auto [get_ec, data, meta] = co_await zk.get(path + "/" + *first, with_ec);
      if (get_ec != error::no_node && !is_retryable(get_ec))
        co_return leader_result{get_ec, get_ec ? std::nullopt : std::optional<std::string>(std::move(data))};
      again = get_ec;  // no_node: the leader just left, look again at once
    } else if (!is_retryable(ec)) {
      co_return leader_result{ec, std::nullopt};
    }
    if (!may_retry(read_retries, failures)) co_return leader_result{make_error_code(error::connection_loss), std::nullopt};
    if (is_retryable(again) && co_await pause_cancelled(failures)) co_return aborted;
  }
}

// Waits for the leader to differ from `last_seen`, with one watch at a time:
// on the leader's node (it changes only when that node goes) or, with no
// candidate, on the election node's children (or its creation). Candidates
// may share an identifier (the default one, in one process), so a new
// leader's node counts as a change even when its data is the same.
asio::awaitable<leader_result> observe_leader(client zk, std::string path, std::optional<std::string> last_seen) {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  if (error_code bad = validate_path(path)) co_return leader_result{bad, std::nullopt};
  std::optional<std::string> leader_node;  // the node found leading with `last_seen`'s data
  int losses = 0;  // in a row: unbounded (an observer follows until cancelled), but paced
  for (;;) {
    if (losses > 0 && co_await pause_cancelled(losses)) co_return aborted;
    watch changed;
    auto [ec, children, parent] = co_await zk.get_children(path, with_ec);
    if (is_retryable(ec)) {
      losses = std::min(losses + 1, 64);
      continue;
    }
    if (ec && ec != error::no_node) co_return leader_result{ec, std::nullopt};
    auto contenders = sort_contenders(children);
    if (contenders.empty()) {
      if (last_seen) co_return leader_result{error_code{}, std::nullopt};  // the leader left, nobody follows
      // Arm a watch for the first candidate: on the children, or on the
      // election node's creation when it does not exist yet.
      error_code armed;
      bool look_again = false;
      if (ec == error::no_node) {
        auto [exists_ec, meta] = co_await zk.exists(path, changed, with_ec);
        armed = exists_ec;
        look_again = meta.has_value();  // created meanwhile
      } else {
        auto [list_ec, again, st] = co_await zk.get_children(path, changed, with_ec);
        armed = list_ec;
        look_again = !sort_contenders(again).empty();  // a candidate arrived meanwhile
      }
      if (armed && !is_retryable(armed)) co_return leader_result{armed, std::nullopt};
      if (armed) {
        losses = std::min(losses + 1, 64);
        continue;
      }
      if (look_again) {
        losses = 0;
        continue;
      }
    } else {
      std::string node = path + "/" + std::string(contenders.front().name);
      auto [get_ec, data, meta] = co_await zk.get(node, changed, with_ec);
      if (is_retryable(get_ec)) {
        losses = std::min(losses + 1, 64);
        continue;
      }
      if (get_ec == error::no_node) {  // the leader just left: look again at once
        losses = 0;
        continue;
      }
      if (get_ec) co_return leader_result{get_ec, std::nullopt};
      bool another_node = leader_node && *leader_node != node;
      if (data != last_seen || another_node) co_return leader_result{error_code{}, std::move(data)};
      leader_node = node;
    }
    auto [wait_ec, event] = co_await changed.wait(with_ec);
    if (wait_ec) co_return leader_result{wait_ec, std::nullopt};
    losses = 0;
  }
}

}  // namespace

void start_current_leader(client zk, std::string path, election_handler<std::optional<std::string>> h) {
  auto executor = zk.get_executor();
  dlock::detail::spawn_to_handler(executor, current_leader(std::move(zk), std::move(path)), std::move(h));
}

void start_observe(client zk, std::string path, std::optional<std::string> last_seen,
                   election_handler<std::optional<std::string>> h) {
  auto executor = zk.get_executor();
  dlock::detail::spawn_to_handler(executor, observe_leader(std::move(zk), std::move(path), std::move(last_seen)),
                                  std::move(h));
}

}  // namespace dlock::zk::detail
