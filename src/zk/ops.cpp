// The initiating functions behind dlock::zk::client: validate, then one
// zoo_a* call on the strand; the C completion records and posts the result.
#include "request.hpp"

namespace dlock::zk::detail {
namespace {

// --- C completions: inside zookeeper_process or zookeeper_close, on the strand.

void on_created(int rc, const char* path, const Stat* st, const void* context) {
  auto op = take_c_hold<request<created>>(context);
  op->owner->reply_received(rc, op->sent_at);
  if (rc == ZOK && op->done() && path) op->owner->remove_orphan_later(path, op->unique_name);  // cancelled: undo
  if (rc == ZOK) op->complete({}, created{path ? path : "", to_stat(st)});
  else op->complete(reply_error(rc), {});
}

void on_removed(int rc, const void* context) {
  auto op = take_c_hold<request<>>(context);
  op->owner->reply_received(rc, op->sent_at);
  op->complete(reply_error(rc));
}

void on_data(int rc, const char* value, int length, const Stat* st, const void* context) {
  auto op = take_c_hold<request<std::string, zk::stat>>(context);
  op->owner->reply_received(rc, op->sent_at);
  if (op->watch) op->watch->arming_reply(rc, rc == ZOK);
  if (rc == ZOK) op->complete({}, std::string(value ? value : "", value && length > 0 ? length : 0), to_stat(st));
  else op->complete(reply_error(rc), {}, {});
}

void on_synced(int rc, const char*, const void* context) {
  auto op = take_c_hold<request<>>(context);
  op->owner->reply_received(rc, op->sent_at);
  op->complete(reply_error(rc));
}

void on_set(int rc, const Stat* st, const void* context) {
  auto op = take_c_hold<request<zk::stat>>(context);
  op->owner->reply_received(rc, op->sent_at);
  if (rc == ZOK) op->complete({}, to_stat(st));
  else op->complete(reply_error(rc), {});
}

void on_exists(int rc, const Stat* st, const void* context) {
  auto op = take_c_hold<request<std::optional<zk::stat>>>(context);
  op->owner->reply_received(rc, op->sent_at);
  // An exists watch registers on a missing node too (it fires on creation).
  if (op->watch) op->watch->arming_reply(rc, rc == ZOK || rc == ZNONODE);
  if (rc == ZOK) op->complete({}, to_stat(st));
  else if (rc == ZNONODE) op->complete({}, std::nullopt);
  else op->complete(reply_error(rc), std::nullopt);
}

void on_children(int rc, const String_vector* names, const Stat* st, const void* context) {
  auto op = take_c_hold<request<std::vector<std::string>, zk::stat>>(context);
  op->owner->reply_received(rc, op->sent_at);
  if (op->watch) op->watch->arming_reply(rc, rc == ZOK);
  if (rc != ZOK) return op->complete(reply_error(rc), {}, {});
  std::vector<std::string> children;
  if (names) {
    children.reserve(static_cast<std::size_t>(names->count));
    for (std::int32_t i = 0; i < names->count; ++i) children.emplace_back(names->data[i]);
  }
  op->complete({}, std::move(children), to_stat(st));
}

}  // namespace

void start_create(const session_ptr& s, std::string path, std::string data, create_mode mode, handler<created> h) {
  auto op = make_request<request<created>>(s, std::move(h));
  if (!check_path(op, path, is_sequential(mode))) return;
  op->unique_name = is_sequential(mode);
  send_on_strand(s, op, [s, path = std::move(path), data = std::move(data), mode](zhandle_t* zh, pending_base* ctx) {
    return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), s->default_acl(), c_mode(mode),
                        &on_created, ctx);
  });
}

void start_sync(const session_ptr& s, std::string path, handler<> h) {
  auto op = make_request<request<>>(s, std::move(h));
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path)](zhandle_t* zh, pending_base* ctx) {
    return zoo_async(zh, path.c_str(), &on_synced, ctx);
  });
}

void start_remove(const session_ptr& s, std::string path, std::int32_t version, handler<> h) {
  auto op = make_request<request<>>(s, std::move(h));
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path), version](zhandle_t* zh, pending_base* ctx) {
    return zoo_adelete(zh, path.c_str(), version, &on_removed, ctx);
  });
}

void start_get(const session_ptr& s, std::string path, watch* w, handler<std::string, stat> h) {
  auto op = make_request<request<std::string, zk::stat>>(s, std::move(h));
  op->watch = arm(s, w, path, ZWATCHTYPE_DATA);
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path), ws = op->watch.get()](zhandle_t* zh, pending_base* ctx) {
    if (ws) return zoo_awget(zh, path.c_str(), &watch_state::on_event, ws, &on_data, ctx);
    return zoo_aget(zh, path.c_str(), 0, &on_data, ctx);
  });
}

void start_set(const session_ptr& s, std::string path, std::string data, std::int32_t version, handler<stat> h) {
  auto op = make_request<request<zk::stat>>(s, std::move(h));
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path), data = std::move(data), version](zhandle_t* zh, pending_base* ctx) {
    return zoo_aset(zh, path.c_str(), data.data(), static_cast<int>(data.size()), version, &on_set, ctx);
  });
}

void start_exists(const session_ptr& s, std::string path, watch* w, handler<std::optional<stat>> h) {
  auto op = make_request<request<std::optional<zk::stat>>>(s, std::move(h));
  op->watch = arm(s, w, path, ZWATCHTYPE_DATA);
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path), ws = op->watch.get()](zhandle_t* zh, pending_base* ctx) {
    if (ws) return zoo_awexists(zh, path.c_str(), &watch_state::on_event, ws, &on_exists, ctx);
    return zoo_aexists(zh, path.c_str(), 0, &on_exists, ctx);
  });
}

void start_get_children(const session_ptr& s, std::string path, watch* w,
                        handler<std::vector<std::string>, stat> h) {
  auto op = make_request<request<std::vector<std::string>, zk::stat>>(s, std::move(h));
  op->watch = arm(s, w, path, ZWATCHTYPE_CHILD);
  if (!check_path(op, path)) return;
  send_on_strand(s, op, [path = std::move(path), ws = op->watch.get()](zhandle_t* zh, pending_base* ctx) {
    if (ws) return zoo_awget_children2(zh, path.c_str(), &watch_state::on_event, ws, &on_children, ctx);
    return zoo_aget_children2(zh, path.c_str(), 0, &on_children, ctx);
  });
}

}  // namespace dlock::zk::detail
