// The queue recipe's idempotent steps (see queue_steps.hpp).
#include "queue_steps.hpp"

#include <dlock/error.hpp>

#include "queue_items.hpp"

#include <boost/asio/this_coro.hpp>

namespace dlock::zk::detail {

asio::awaitable<void> setup_cancellation() {
  co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
  co_await asio::this_coro::throw_if_cancelled(false);
}

asio::awaitable<error_code> ensure_path(client& zk, retry_policy policy, std::string path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    auto create = [&zk, prefix = path.substr(0, slash)] {
      return zk.create(prefix, std::string(), create_mode::persistent, as_tuple_awaitable());
    };
    auto [ec, made] = co_await with_retries(policy, on_cancel::stop, std::move(create));
    if (ec && ec != error::node_exists) co_return ec;
    if (slash == std::string::npos) co_return error_code{};
  }
}

asio::awaitable<item_list> list_items(client& zk, retry_policy policy, std::string path) {
  auto list = [&zk, path] { return zk.get_children(path, as_tuple_awaitable()); };
  auto [ec, children, parent] = co_await with_retries(policy, on_cancel::stop, std::move(list));
  if (ec == error::no_node) co_return item_list{};
  co_return item_list{ec, ec ? std::vector<std::string>{} : queue_items_in_order(children)};
}

asio::awaitable<item_list> watch_items(client& zk, retry_policy policy, std::string path, watch& changed) {
  for (;;) {
    auto list = [&zk, path, &changed] { return zk.get_children(path, changed, as_tuple_awaitable()); };
    auto [ec, children, parent] = co_await with_retries(policy, on_cancel::stop, std::move(list));
    if (!ec) co_return item_list{ec, queue_items_in_order(children)};
    if (ec != error::no_node) co_return item_list{ec, {}};
    if (error_code made = co_await ensure_path(zk, policy, path)) co_return item_list{made, {}};
    if (co_await cancelled()) co_return item_list{make_error_code(asio::error::operation_aborted), {}};
  }
}

asio::awaitable<std::tuple<error_code, std::string, stat>> read_item(client& zk, retry_policy policy,
                                                                     std::string node) {
  auto read = [&zk, node] { return zk.get(node, as_tuple_awaitable()); };
  co_return co_await with_retries(policy, on_cancel::stop, std::move(read));
}

namespace {
// Disconnected longer than the session timeout (the servers have likely
// expired it), or closed: retrying on this session would wait for nothing.
bool session_over(client& zk) {
  auto state = zk.state();
  return state == session_state::lost || state == session_state::closed;
}
}  // namespace

asio::awaitable<error_code> delete_on_session(client& zk, retry_policy policy, std::string node,
                                              std::int64_t session) {
  retry_counter retries(policy);
  bool unanswered = false;  // a try failed to a connection loss: it may have landed
  for (;;) {
    // Saying `lost` ("the node is still there") after an unanswered try
    // could hide a delete that landed.
    if (zk.session_id() != session)
      co_return make_error_code(unanswered ? dlock::error::removal_uncertain : dlock::error::lost);
    if (unanswered && session_over(zk)) co_return make_error_code(dlock::error::removal_uncertain);
    auto [ec] = co_await zk.remove(node, -1, uncancellable());
    if (!ec || ec == error::no_node) co_return error_code{};
    if (!is_retryable(ec)) co_return unanswered ? make_error_code(dlock::error::removal_uncertain) : ec;
    unanswered = true;
    // From here only this session can settle it: retried while it may live
    // (about a session timeout at most), never given up while a retry could
    // still tell.
    retries.count_failure();
    co_await pause(retries.delay(), on_cancel::ignore);
  }
}

}  // namespace dlock::zk::detail
