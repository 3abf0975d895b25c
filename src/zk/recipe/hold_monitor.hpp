// What the core of a ZooKeeper lock and that of a semaphore share, written
// once: watching the session for the holder, the acquire in flight, the
// close that stops both, and the default identifier. Everything on the
// client's strand.
#pragma once

#include "zk/recipe/acquire_op_base.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/detail/lock_options.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace dlock::zk::detail {

/// A base of lock_core and semaphore_core.
struct hold_monitor {
  std::weak_ptr<acquire_op_base> current;  // the acquire in flight
  bool monitoring = false;                 // a wait for the session's next change is armed
  bool closed = false;
  asio::cancellation_signal monitor_stop;

  /// The object goes away: no more watching, and the acquire in flight is cancelled.
  void stop_monitor_and_acquire();
};

/// Why a hold made by session `owner` is lost, judged from the session's
/// `state` (or from `ec`, the failure of the wait for it): closed; expired
/// (lost, or another session than the owner now); suspended, under
/// loss_policy::standard. Empty while it holds.
error_code session_loss(const client& zk, error_code ec, session_state state, std::optional<std::int64_t> owner,
                        loss_policy policy);

/// Waits for `core`'s session to change (once: `monitoring` until then),
/// then `changed(core, ec, state)` on its strand.
template <class Core>
void watch_session(const std::shared_ptr<Core>& core,
                   void (*changed)(const std::shared_ptr<Core>&, error_code, session_state)) {
  if (core->monitoring || core->closed) return;
  core->monitoring = true;
  core->zk.wait_state_change(asio::bind_cancellation_slot(
      core->monitor_stop.slot(), asio::bind_executor(core->strand, [core, changed](error_code ec, session_state s) {
        changed(core, ec, s);
      })));
}

/// "host:pid": the identifier written into the nodes when none is given.
std::string default_identifier();

}  // namespace dlock::zk::detail
