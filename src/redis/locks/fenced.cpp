// Fenced writes: a prologue in front of the caller's script that compares
// the token with the highest one recorded at the fence key, in the same
// atomic step as the write.
#include <dlock/redis/fenced.hpp>

#include "detail/op_base.hpp"
#include "redis/locks/algorithm/scripts.hpp"


namespace dlock::redis {

script fenced_script(std::string_view body) {
  // KEYS[1] is the fence key and ARGV[1] the token: checked, recorded, then
  // removed so that `body` sees its own KEYS and ARGV. Equal is allowed: one
  // holder writes many times.
  // Compared as text, exactly (locks/algorithm/scripts.hpp): as Lua numbers
  // (doubles) two tokens above 2^53 may look equal.
  std::string source = redis::detail::exact_integer_lua;
  source +=
      "do local token = ARGV[1] "
      "local highest = redis.call('get', KEYS[1]) or '0' "
      "if not int_text(highest) then return redis.error_reply('ERR the fence key ' .. KEYS[1] .. "
      "' does not hold an integer') end "
      "if int_less(token, highest) then return redis.error_reply('STALE_TOKEN fencing token ' .. ARGV[1] .. "
      "' is lower than ' .. highest .. ', already seen') end "
      "if int_less(highest, token) then redis.call('set', KEYS[1], ARGV[1]) end "
      "table.remove(KEYS, 1) table.remove(ARGV, 1) end\n";
  source += body;
  return script(std::move(source));
}

namespace detail {
namespace {

const script& fenced_set_script() {
  static const script s = fenced_script("return redis.call('set', KEYS[1], ARGV[1])");
  return s;
}

bool stale(error_code ec, const reply& r) {
  return ec == redis::error::server_error && r.is_error() && r.string().starts_with("STALE_TOKEN");
}

// The eval's completion, mapped: the caller's handler keeps its executor
// and cancellation slot (the op base delivers on its executor).
template <class... Values>
struct fenced_reply {
  dlock::detail::op_base<void(error_code, Values...)> op;
  asio::any_io_executor executor;

  using cancellation_slot_type = asio::cancellation_slot;
  cancellation_slot_type get_cancellation_slot() const noexcept { return op.handler_slot(); }

  void operator()(error_code ec, reply r) {
    if (stale(ec, r)) ec = dlock::error::stale_token;
    if constexpr (sizeof...(Values) == 0)
      op.complete(dlock::detail::completion::dispatch, executor, ec);
    else
      op.complete(dlock::detail::completion::dispatch, executor, ec, std::move(r));
  }
};

template <class Handler>
void refuse(connection& conn, Handler handler) {
  dlock::detail::post_completion(conn.get_executor(), std::move(handler), make_error_code(dlock::error::invalid_argument));
}

}  // namespace

void start_fenced_eval(connection& conn, const script& fenced, std::string fence_key, std::int64_t fencing_token,
                       std::vector<std::string> keys, std::vector<std::string> args,
                       asio::any_completion_handler<void(error_code, reply)> handler) {
  if (fence_key.empty() || fencing_token <= 0) {
    return dlock::detail::post_completion(conn.get_executor(), std::move(handler), make_error_code(dlock::error::invalid_argument),
                                          reply());
  }
  keys.insert(keys.begin(), std::move(fence_key));
  args.insert(args.begin(), std::to_string(fencing_token));
  using op_type = dlock::detail::op_base<void(error_code, reply)>;
  conn.eval(fenced, keys, args, fenced_reply<reply>{op_type(std::move(handler)), conn.get_executor()});
}

void start_fenced_set(connection& conn, std::string key, std::string value, std::int64_t fencing_token,
                      asio::any_completion_handler<void(error_code)> handler) {
  if (key.empty() || fencing_token <= 0) return refuse(conn, std::move(handler));
  std::string fence_key = key + ":fenced_by";
  using op_type = dlock::detail::op_base<void(error_code)>;
  conn.eval(fenced_set_script(), {std::string_view(fence_key), std::string_view(key)},
            {std::string_view(std::to_string(fencing_token)), std::string_view(value)},
            fenced_reply<>{op_type(std::move(handler)), conn.get_executor()});
}

}  // namespace detail
}  // namespace dlock::redis
