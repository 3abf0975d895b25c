// What every zk::client operation is made of: a request (the pending
// handler, the session it went to, the watch it arms), the checks before it
// is sent and its one zoo_a* call on the strand. Shared by ops.cpp and multi.cpp.
#pragma once

#include "watch_state.hpp"

#include <dlock/error.hpp>
#include <dlock/zk/path.hpp>

#include <chrono>

namespace dlock::zk::detail {

inline zk::stat to_stat(const Stat* s) noexcept {
  zk::stat r;
  if (!s) return r;
  r.czxid = s->czxid;
  r.mzxid = s->mzxid;
  r.pzxid = s->pzxid;
  r.ctime = s->ctime;
  r.mtime = s->mtime;
  r.version = s->version;
  r.cversion = s->cversion;
  r.aversion = s->aversion;
  r.ephemeral_owner = s->ephemeralOwner;
  r.data_length = s->dataLength;
  r.num_children = s->numChildren;
  return r;
}

inline int c_mode(create_mode mode) noexcept {
  switch (mode) {
    case create_mode::persistent: return ZOO_PERSISTENT;
    case create_mode::ephemeral: return ZOO_EPHEMERAL;
    case create_mode::persistent_sequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case create_mode::ephemeral_sequential: return ZOO_EPHEMERAL_SEQUENTIAL;
    case create_mode::container: return ZOO_CONTAINER;
  }
  return ZOO_PERSISTENT;
}

inline bool is_sequential(create_mode mode) noexcept {
  return mode == create_mode::persistent_sequential || mode == create_mode::ephemeral_sequential;
}

/// One request: the pending handler, the session it went to, and the watch it arms (if any).
template <class... Args>
class request : public pending<Args...> {
 public:
  request(const session_ptr& s, handler<Args...> h) : pending<Args...>(s->strand(), std::move(h)), owner(s.get()) {}

  void fail(error_code ec) {
    this->complete(ec, Args{}...);
    if (watch) watch->finish_with(ec);
  }

  session* owner;  // alive while the C client holds this request
  std::shared_ptr<watch_state> watch;
  // A create's node name is its own (a sequential create): if it is cancelled
  // and its removal is lost with the connection, sending the removal again
  // cannot delete a node somebody else made since under the same name.
  bool unique_name = false;
  /// When the zoo_a* call was made: its reply proves the server heard us since.
  std::chrono::steady_clock::time_point sent_at{};

 protected:
  void on_cancel() override {
    this->abort();
    if (watch) watch->cancel();  // a cancelled arming leaves no watch behind
  }
};

template <class R>
std::shared_ptr<R> make_request(const session_ptr& s, auto handler) {
  return std::make_shared<R>(s, std::move(handler));
}

/// Fails `op` with `ec` before it was shared with anyone (bad input).
template <class R>
void reject(const std::shared_ptr<R>& op, error_code ec) {
  op->fail(ec);
}

/// Runs `send(zh, context)` on the strand, inline when already there.
template <class R, class Send>
void send_on_strand(const session_ptr& s, std::shared_ptr<R> op, Send send) {
  op->start_cancellation();
  auto run = [s, op, send = std::move(send)]() mutable {
    if (op->done()) return;  // cancelled before it reached the strand
    error_code ec;
    zhandle_t* zh = s->handle_for_request(ec);
    if (!zh) return op->fail(ec);
    op->c_hold = op;
    op->sent_at = std::chrono::steady_clock::now();
    int rc;
    {
      c_call_guard guard;
      rc = send(zh, static_cast<pending_base*>(op.get()));
    }
    if (rc != ZOK) {
      op->c_hold.reset();
      return op->fail(make_error_code_from_c(rc));
    }
    s->request_sent();
  };
  run_on_strand(*s, std::move(run));
}

inline std::shared_ptr<watch_state> arm(const session_ptr& s, watch* w, const std::string& path, int c_type) {
  if (!w) return nullptr;
  auto& state = watch_access::state(*w);
  if (state) cancel_watch(state);  // re-arming replaces the previous watch
  state = std::make_shared<watch_state>(s, path, c_type);
  watch_access::executor(*w) = s->strand();
  return state;
}

template <class R>
bool check_path(const std::shared_ptr<R>& op, const std::string& path, bool sequential = false) {
  if (auto ec = validate_path(path, sequential)) {
    if (op->watch) op->watch->fail_unshared(ec);
    reject(op, ec);
    return false;
  }
  return true;
}

}  // namespace dlock::zk::detail
