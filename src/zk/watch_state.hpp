// The shared state of one zk::watch: what the C client, the arming request
// and the waiting handler all point to. Strand only, except where noted.
#pragma once

#include "session.hpp"

#include <optional>
#include <utility>

namespace dlock::zk::detail {

struct watch_access {
  static std::shared_ptr<watch_state>& state(watch& w) noexcept { return w.state_; }
  static asio::any_io_executor& executor(watch& w) noexcept { return w.executor_; }
};

class watch_state : public std::enable_shared_from_this<watch_state> {
 public:
  /// `c_type`: ZWATCHTYPE_DATA (get, exists) or ZWATCHTYPE_CHILD (get_children).
  watch_state(session_ptr owner, std::string path, int c_type)
      : owner_(std::move(owner)), path_(std::move(path)), c_type_(c_type) {}

  /// The watcher function given to the C client (context = this).
  static void on_event(zhandle_t*, int type, int state, const char* path, void* context);

  /// The arming request's reply; `registered` says whether the C client kept the watch.
  void arming_reply(int rc, bool registered);
  /// Before the state is shared with the strand (nothing else can see it yet).
  void fail_unshared(error_code ec) { outcome_.emplace(ec, watch_event{}); }
  void wait(std::shared_ptr<pending<watch_event>> op);
  void cancel();
  /// The session (and so the C client's hold) is gone.
  void finish_with(error_code ec) { finish(ec, {}); }
  void remove_from_c_client(zhandle_t* zh);
  const session_ptr& owner() const noexcept { return owner_; }

 private:
  void finish(error_code ec, watch_event event);

  session_ptr owner_;
  std::string path_;
  int c_type_;
  bool in_c_client_ = false;
  bool cancelled_ = false;
  std::optional<std::pair<error_code, watch_event>> outcome_;
  std::shared_ptr<pending<watch_event>> waiter_;
};

}  // namespace dlock::zk::detail
