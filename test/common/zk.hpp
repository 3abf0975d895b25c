// ZooKeeper helpers shared by the tests.
#pragma once

#include "common/await.hpp"

#include <dlock/zk/client.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <chrono>
#include <string>

namespace dlock::test {

/// Forces the expiry of `victim`'s session the way Curator's tests do: a
/// second handle opens the same session (id and password) and closes it.
/// The victim reconnects at once and steals the session back, so a twin is
/// often not connected when it closes (and then sends no CLOSE): repeat
/// until the victim's session id changes (it reopened a fresh session) or
/// the victim says it is lost. Returns true once that happened.
inline boost::asio::awaitable<bool> expire_session(zk::client& victim, zk::options base) {
  namespace asio = boost::asio;
  auto executor = co_await asio::this_coro::executor;
  const auto id = victim.session_id();
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (victim.session_id() != id || victim.state() == zk::session_state::lost) co_return true;
    zk::options same = base;
    same.session_id = id;
    same.session_password = victim.session_password();
    same.reopen_on_expiry = false;
    zk::client twin(executor, same);
    // Errors are expected here (the victim steals the session back): just try again.
    co_await twin.connect(asio::as_tuple(asio::deferred));
    co_await twin.close(asio::as_tuple(asio::deferred));
    asio::steady_timer pause(executor, std::chrono::milliseconds(100));
    co_await pause.async_wait(asio::as_tuple(asio::deferred));
  }
  co_return victim.session_id() != id || victim.state() == zk::session_state::lost;
}

/// Deletes `path` and everything below it (what is missing is skipped): a
/// test's cleanup, whatever state the test left.
inline boost::asio::awaitable<void> delete_tree(zk::client& c, std::string path) {
  auto [ec, children, st] = co_await c.get_children(path, with_ec);
  for (const auto& child : children) co_await delete_tree(c, path + "/" + child);
  co_await c.remove(path, -1, with_ec);
}

}  // namespace dlock::test
