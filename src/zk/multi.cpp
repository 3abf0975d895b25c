// client::multi: one zoo_amulti call on the strand.
//
// zoo_amulti keeps pointers into the caller's memory until its completion
// runs: the zoo_op_result_t array, each create's path buffer and each set's
// Stat. All of it lives in the request object, which the C client holds
// (c_hold) until that completion, so a cancelled multi, or one whose client
// is destroyed (zookeeper_close completes it with ZCLOSING), writes into
// live memory.
#include "request.hpp"

#include <climits>

namespace dlock::zk {

op op::create(std::string path, std::string data, create_mode mode) {
  return op{kind::create, std::move(path), std::move(data), mode, -1};
}
op op::remove(std::string path, std::int32_t version) {
  return op{kind::remove, std::move(path), {}, create_mode::persistent, version};
}
op op::set(std::string path, std::string data, std::int32_t version) {
  return op{kind::set, std::move(path), std::move(data), create_mode::persistent, version};
}
op op::check(std::string path, std::int32_t version) {
  return op{kind::check, std::move(path), {}, create_mode::persistent, version};
}

namespace detail {
namespace {

// Room for the sequence suffix the server appends ("%010d", sign included).
constexpr std::size_t sequence_suffix_room = 16;

/// Codes the C client gives every operation of a request that got no
/// answer, or that the server refused as a whole: no operation is to blame.
bool whole_request_error(int rc) noexcept {
  if (lost_with_the_connection(rc)) return true;
  switch (rc) {
    case ZCLOSING:
    case ZSESSIONEXPIRED:
    case ZAUTHFAILED:
    case ZINVALIDSTATE:
    case ZSESSIONMOVED:
    case ZNOTREADONLY:
    case ZTHROTTLEDOP:
    case ZSESSIONCLOSEDREQUIRESASLAUTH:
    case ZMARSHALLINGERROR:
    case ZSYSTEMERROR:
      return true;
    default:
      return false;
  }
}

class multi_request : public request<multi_result> {
 public:
  using request::request;

  void take(std::vector<op> ops) {
    ops_ = std::move(ops);
    // Sized once, never resized: the C client keeps pointers into them.
    c_ops_.assign(ops_.size(), zoo_op_t{});
    c_results_.assign(ops_.size(), zoo_op_result_t{});
    path_buffers_.assign(ops_.size(), std::string());
    stats_.assign(ops_.size(), Stat{});
  }

  /// Strand only (reads the session's ACL).
  int send(zhandle_t* zh, const ACL_vector* acl, void_completion_t completion, pending_base* context) {
    for (std::size_t i = 0; i < ops_.size(); ++i) init(i, acl);
    return zoo_amulti(zh, static_cast<int>(ops_.size()), c_ops_.data(), c_results_.data(), completion, context);
  }

  multi_result collect(int rc) const {
    multi_result r;
    r.results.resize(ops_.size());
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      // An answered transaction's codes are the server's, ZRUNTIMEINCONSISTENCY
      // included ("not attempted"); an unanswered one's are the request's.
      int err = c_results_[i].err;
      if (err != ZOK) r.results[i].error = whole_request_error(rc) ? reply_error(err) : make_error_code_from_c(err);
      // Only a committed transaction has paths and stats to report.
      if (rc != ZOK) continue;
      if (ops_[i].type == op::kind::create) r.results[i].path = path_buffers_[i].c_str();
      if (ops_[i].type == op::kind::set) r.results[i].stat = to_stat(&stats_[i]);
    }
    if (rc != ZOK) r.failed_op = failed_op(rc);
    return r;
  }

 private:
  void init(std::size_t i, const ACL_vector* acl) {
    const op& o = ops_[i];
    zoo_op_t* c = &c_ops_[i];
    switch (o.type) {
      case op::kind::create:
        path_buffers_[i].assign(o.path.size() + sequence_suffix_room, '\0');
        return zoo_create_op_init(c, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), acl,
                                  c_mode(o.mode), path_buffers_[i].data(), static_cast<int>(path_buffers_[i].size()));
      case op::kind::remove: return zoo_delete_op_init(c, o.path.c_str(), o.version);
      case op::kind::set:
        return zoo_set_op_init(c, o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version,
                               &stats_[i]);
      case op::kind::check: return zoo_check_op_init(c, o.path.c_str(), o.version);
    }
  }

  // The server fails one operation (those before it report ZOK, those after
  // ZRUNTIMEINCONSISTENCY); a request without an answer gives all the same code.
  std::optional<std::size_t> failed_op(int rc) const {
    if (whole_request_error(rc)) return std::nullopt;
    std::optional<std::size_t> found;
    for (std::size_t i = 0; i < c_results_.size(); ++i) {
      int err = c_results_[i].err;
      if (err == ZOK || err == ZRUNTIMEINCONSISTENCY) continue;
      if (found) return std::nullopt;  // more than one to blame: none is
      found = i;
    }
    return found;
  }

  std::vector<op> ops_;
  std::vector<zoo_op_t> c_ops_;
  std::vector<zoo_op_result_t> c_results_;
  std::vector<std::string> path_buffers_;  // creates only
  std::vector<Stat> stats_;                // sets only
};

// Inside zookeeper_process or zookeeper_close, on the strand; the C client
// has filled c_results_ (and the buffers) before calling this.
void on_multi(int rc, const void* context) {
  auto m = take_c_hold<multi_request>(context);
  m->owner->reply_received(rc, m->sent_at);
  if (m->done()) return;  // cancelled: the results go with the request
  m->complete(reply_error(rc), m->collect(rc));
}

/// The first operation that cannot be sent: a bad path, or a container
/// create. The server answers a container create inside a multi with a path
/// and a Stat, and the C client (3.8) reads only the path: every result
/// after it would be read from the wrong bytes.
std::optional<std::size_t> first_rejected(const std::vector<op>& ops) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    bool create = ops[i].type == op::kind::create;
    if (create && ops[i].mode == create_mode::container) return i;
    if (validate_path(ops[i].path, create && is_sequential(ops[i].mode))) return i;
  }
  return std::nullopt;
}

}  // namespace

void start_multi(const session_ptr& s, std::vector<op> ops, handler<multi_result> h) {
  auto m = make_request<multi_request>(s, std::move(h));
  // Nothing to apply: an empty transaction is trivially committed (and the
  // C client would send it to the server all the same).
  if (ops.empty()) return m->complete({}, {});
  if (auto bad = first_rejected(ops)) {
    multi_result r;
    r.failed_op = bad;
    return m->complete(make_error_code(dlock::error::invalid_argument), std::move(r));
  }
  if (ops.size() > static_cast<std::size_t>(INT_MAX))
    return m->complete(make_error_code(dlock::error::invalid_argument), {});
  m->take(std::move(ops));
  send_on_strand(s, m, [s, raw = m.get()](zhandle_t* zh, pending_base* context) {
    return raw->send(zh, s->default_acl(), &on_multi, context);
  });
}

}  // namespace detail
}  // namespace dlock::zk
