// dlock::detail::op_base, the base of every hand-written operation: complete
// once, cancellation forwarded to the operation's executor, the slot released
// before the handler runs, post / dispatch / in place. No sockets.
#include "detail/op_base.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace asio = boost::asio;
using dlock::error_code;
using dlock::detail::completion;
using dlock::detail::forwarding;

namespace {

using base = dlock::detail::op_base<void(error_code, int)>;

// A minimal operation: completes with its reply, or operation_aborted when cancelled.
struct test_op : std::enable_shared_from_this<test_op> {
  asio::io_context& io;
  base op;
  std::vector<asio::cancellation_type> cancels_seen;
  completion on_cancel_completes = completion::post;

  test_op(asio::io_context& ctx, base::handler_type h) : io(ctx), op(std::move(h)) {}

  void hook(forwarding how = forwarding::post,
            asio::cancellation_type honoured = dlock::detail::terminal_or_partial) {
    op.hook_cancellation(io.get_executor(),
                         [weak = weak_from_this()](asio::cancellation_type t) {
                           if (auto self = weak.lock()) self->on_cancel(t);
                         },
                         how, honoured);
  }
  void on_cancel(asio::cancellation_type t) {
    cancels_seen.push_back(t);
    op.complete(on_cancel_completes, io.get_executor(), asio::error::operation_aborted, -1);
  }
  void reply(int v, completion how = completion::post) { op.complete(how, io.get_executor(), {}, v); }
};

struct fixture {
  asio::io_context io;
  asio::cancellation_signal signal;
  int calls = 0;
  std::optional<error_code> ec;
  int value = 0;

  base::handler_type handler() {
    return asio::bind_cancellation_slot(signal.slot(), [this](error_code e, int v) {
      ++calls;
      ec = e;
      value = v;
    });
  }
  std::shared_ptr<test_op> make_op() { return std::make_shared<test_op>(io, handler()); }
};

}  // namespace

BOOST_FIXTURE_TEST_SUITE(op_base_tests, fixture)

BOOST_AUTO_TEST_CASE(completes_once_with_the_first_outcome) {
  auto op = make_op();
  op->reply(1);
  op->reply(2);
  op->op.complete(completion::in_place, io.get_executor(), asio::error::operation_aborted, 3);
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(!*ec);
  BOOST_TEST(value == 1);
  BOOST_TEST(op->op.done());
}

BOOST_AUTO_TEST_CASE(post_never_runs_inside_the_call) {
  auto op = make_op();
  op->reply(7, completion::post);
  BOOST_TEST(calls == 0);
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(value == 7);
}

BOOST_AUTO_TEST_CASE(in_place_runs_inside_the_call) {
  auto op = make_op();
  op->reply(7, completion::in_place);
  BOOST_TEST(calls == 1);
  BOOST_TEST(value == 7);
}

BOOST_AUTO_TEST_CASE(dispatch_runs_in_place_only_on_the_executor) {
  auto op = make_op();
  op->reply(7, completion::dispatch);
  BOOST_TEST(calls == 0);  // not on the io_context's thread: queued
  io.run();
  BOOST_TEST(calls == 1);

  io.restart();
  auto second = make_op();
  int calls_when_returned = -1;
  asio::post(io, [&] {
    second->reply(8, completion::dispatch);
    calls_when_returned = calls;
  });
  io.run();
  BOOST_TEST(calls_when_returned == 2);
}

BOOST_AUTO_TEST_CASE(cancel_before_completion_aborts_and_the_late_reply_is_dropped) {
  auto op = make_op();
  op->hook();
  signal.emit(asio::cancellation_type::terminal);
  BOOST_TEST(op->cancels_seen.empty());  // forwarded: runs on the executor, not inside emit()
  op->io.poll_one();                     // the forwarded cancel
  BOOST_TEST(op->cancels_seen.size() == 1u);
  op->reply(5);  // the reply arrives after the cancel
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(*ec == asio::error::operation_aborted);
  BOOST_TEST(value == -1);
}

BOOST_AUTO_TEST_CASE(cancel_after_completion_does_nothing) {
  auto op = make_op();
  op->hook();
  op->reply(5);
  io.run();
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  io.run();
  BOOST_TEST(op->cancels_seen.empty());
  BOOST_TEST(calls == 1);
  BOOST_TEST(!*ec);
}

BOOST_AUTO_TEST_CASE(the_slot_is_released_before_the_handler_runs) {
  // The handler emits on its own signal while it runs: a slot still hooked
  // would forward that to an operation already done.
  auto op = std::make_shared<test_op>(io, asio::bind_cancellation_slot(signal.slot(), [&](error_code e, int) {
                                        ++calls;
                                        ec = e;
                                        signal.emit(asio::cancellation_type::terminal);
                                      }));
  op->hook();
  op->reply(1, completion::in_place);
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(op->cancels_seen.empty());
}

BOOST_AUTO_TEST_CASE(a_cancel_that_completes_in_place_leaves_its_own_slot_alone) {
  // Dispatched to the executor it is emitted on, the cancel runs inside the
  // slot's handler, which releasing the slot would destroy mid-call. The
  // slot stays hooked instead, and a second emission finds the operation done.
  auto op = make_op();
  op->on_cancel_completes = completion::in_place;
  op->hook(forwarding::dispatch);
  asio::post(io, [&] { signal.emit(asio::cancellation_type::partial); });
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(*ec == asio::error::operation_aborted);
  BOOST_TEST(op->cancels_seen.size() == 1u);
  signal.emit(asio::cancellation_type::terminal);
  io.restart();
  io.run();
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(an_outcome_decided_by_a_posted_cancel_leaves_the_slot_to_its_owner) {
  auto op = make_op();
  op->hook(forwarding::post);
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  BOOST_TEST(calls == 1);
  BOOST_TEST(*ec == asio::error::operation_aborted);
  signal.emit(asio::cancellation_type::terminal);  // still hooked: finds the operation done
  io.restart();
  io.run();
  BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(only_the_honoured_types_reach_the_operation) {
  auto op = make_op();
  op->hook();  // terminal and partial
  signal.emit(asio::cancellation_type::total);
  io.poll();
  BOOST_TEST(op->cancels_seen.empty());
  BOOST_TEST(calls == 0);

  auto any_type = make_op();
  any_type->hook(forwarding::post, asio::cancellation_type::all);
  signal.emit(asio::cancellation_type::total);
  io.restart();
  io.run();
  BOOST_TEST(any_type->cancels_seen.size() == 1u);
  BOOST_TEST(calls == 1);
  BOOST_TEST(*ec == asio::error::operation_aborted);
}

BOOST_AUTO_TEST_CASE(a_cancel_reaching_a_destroyed_operation_is_dropped) {
  auto op = make_op();
  op->hook();
  op.reset();  // the handler goes with it, uncompleted
  signal.emit(asio::cancellation_type::terminal);
  io.run();
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(without_a_handler_completion_is_a_no_op) {
  base op;
  BOOST_TEST(!op.has_handler());
  op.complete(completion::in_place, io.get_executor(), {}, 1);
  BOOST_TEST(op.done());
  io.run();
  BOOST_TEST(calls == 0);
}

BOOST_AUTO_TEST_CASE(a_reused_operation_completes_again) {
  base op(handler());
  op.complete(completion::in_place, io.get_executor(), {}, 1);
  op.reset(handler());
  BOOST_TEST(!op.done());
  op.complete(completion::in_place, io.get_executor(), {}, 2);
  BOOST_TEST(calls == 2);
  BOOST_TEST(value == 2);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(exceptions_map_to_one_set_of_error_codes) {
  using dlock::detail::error_from;
  auto code = make_error_code(boost::system::errc::timed_out);
  BOOST_TEST(error_from(std::make_exception_ptr(boost::system::system_error(code))) == code);
  BOOST_TEST(error_from(std::make_exception_ptr(std::bad_alloc())) == boost::system::errc::not_enough_memory);
  BOOST_TEST(error_from(std::make_exception_ptr(std::runtime_error("x"))) ==
             boost::system::errc::state_not_recoverable);
}
