// One contract for every lock: the same scenarios, with the same expected
// outcomes, run over every dlock::lockable type against the real servers.
// The README's contract table says what is checked here, line by line.
//
// Each lock type has a traits struct: how to open its backend (a ZooKeeper
// client, a Redis connection, five Redis masters), how to make a lock on a
// name, how to force the loss of a hold, and how to make the backend go away
// first. Adding a type is one traits struct and one line in `lock_types`.
#include "redis_support.hpp"
#include "redlock_support.hpp"

#include <common/run.hpp>
#include <common/servers.hpp>
#include <common/zk.hpp>

#include <dlock/error.hpp>
#include <dlock/lockable.hpp>
#include <dlock/redis/lock.hpp>
#include <dlock/redis/redlock.hpp>
#include <dlock/redis/semaphore.hpp>
#include <dlock/with_lock.hpp>
#include <dlock/zk/client.hpp>
#include <dlock/zk/mutex.hpp>
#include <dlock/zk/queue.hpp>
#include <dlock/zk/semaphore.hpp>
#include <dlock/zk/shared_mutex.hpp>
#include <dlock/zk/simple_lock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/mpl/list.hpp>
#include <boost/system/system_error.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace {

namespace asio = boost::asio;
namespace zk = dlock::zk;
namespace redis = dlock::redis;
using dlock::error_code;
using namespace std::chrono_literals;

using dlock::test::sleep_for;
using dlock::test::with_ec;

// How a hold is made: `lasting` for most scenarios, `short_lived` where the
// loss is forced by letting a Redis validity run out.
enum class hold_kind { lasting, short_lived };

// ----------------------------------------------------------------- ZooKeeper

zk::options zk_options() {
  zk::options o;
  o.hosts = dlock::test::zk_hosts();
  o.session_timeout = 6000ms;
  return o;
}

struct zk_backend {
  std::unique_ptr<zk::client> client;
};

asio::awaitable<zk_backend> open_zk() {
  // g++ 12: no co_await inside a braced initializer.
  auto executor = co_await asio::this_coro::executor;
  zk_backend b;
  b.client = std::make_unique<zk::client>(executor, zk_options());
  co_await b.client->connect();
  co_return b;
}

// Session expiry: the ZooKeeper way to lose every hold of a session.
template <class Lock>
asio::awaitable<void> expire_zk(zk_backend& b, Lock&) {
  bool expired = co_await dlock::test::expire_session(*b.client, zk_options());
  BOOST_REQUIRE_MESSAGE(expired, "the session did not expire");
}

std::string zk_name(const std::string& stem) { return "/dlock-test/conformance/" + dlock::test::unique_name(stem); }

struct zk_mutex_traits {
  using lock_type = zk::mutex;
  using backend = zk_backend;
  static asio::awaitable<backend> open() { return open_zk(); }
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind) {
    return std::make_shared<lock_type>(*b.client, name);
  }
  static std::string name(const std::string& stem) { return zk_name(stem); }
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) { return expire_zk(b, l); }
  static void drop(backend& b) { b.client.reset(); }
};

struct zk_simple_lock_traits : zk_mutex_traits {
  using lock_type = zk::simple_lock;
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind) {
    return std::make_shared<lock_type>(*b.client, name);
  }
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) { return expire_zk(b, l); }
};

// A writer contends with other writers, a reader with writers: the rivals a
// scenario makes are writers on the same path (`rival`), so both roles meet
// `taken` and `timed_out` the same way.
template <bool Reader>
struct zk_rw_traits : zk_mutex_traits {
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind) {
    auto both = std::make_shared<zk::shared_mutex>(*b.client, name);
    return std::shared_ptr<lock_type>(both, Reader ? &both->reader() : &both->writer());
  }
  static std::shared_ptr<lock_type> rival(backend& b, const std::string& name) {
    auto both = std::make_shared<zk::shared_mutex>(*b.client, name);
    return std::shared_ptr<lock_type>(both, &both->writer());
  }
};
using zk_reader_traits = zk_rw_traits<true>;
using zk_writer_traits = zk_rw_traits<false>;

// A semaphore of one lease: the contract of a lock (its n-lease operations
// have tests of their own, integration/zk_semaphore.cpp).
struct zk_semaphore_traits : zk_mutex_traits {
  using lock_type = zk::semaphore;
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind) {
    return std::make_shared<lock_type>(*b.client, name, 1);
  }
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) { return expire_zk(b, l); }
};

// --------------------------------------------------------------------- Redis

std::string redis_name(const std::string& stem) { return "dlock-test:conformance:" + dlock::test::unique_name(stem); }

struct redis_lock_traits {
  using lock_type = redis::lock;
  struct backend {
    std::shared_ptr<redis::connection> connection;
  };
  static asio::awaitable<backend> open() {
    auto executor = co_await asio::this_coro::executor;
    backend b;
    b.connection = std::make_shared<redis::connection>(executor, redis_test::master_options());
    co_await b.connection->connect();
    co_return b;
  }
  static redis::lock_options options(hold_kind kind) {
    redis::lock_options o;
    o.fencing = true;  // the contract's fencing_token() line
    o.ttl = kind == hold_kind::short_lived ? 300ms : 10000ms;
    o.wait = 2000ms;
    o.retry_delay = 20ms;
    o.retry_jitter = 10ms;
    return o;
  }
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind kind) {
    return std::make_shared<lock_type>(*b.connection, name, options(kind));
  }
  // A lock whose plain acquire waits at most `wait` (its own wait option).
  static std::shared_ptr<lock_type> make_waiting(backend& b, const std::string& name, std::chrono::milliseconds wait) {
    auto o = options(hold_kind::lasting);
    o.wait = wait;
    return std::make_shared<lock_type>(*b.connection, name, o);
  }
  static std::string name(const std::string& stem) { return redis_name(stem); }
  // The key is deleted behind the holder's back, and its validity (short)
  // runs out: the holder hears of it from its validity timer.
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) {
    auto del = b.connection->exec(redis::command("DEL", l.key()), with_ec);
    co_await std::move(del);
  }
  static void drop(backend& b) { b.connection.reset(); }  // destroyed: the lock shares its internals
};

struct redlock_traits {
  using lock_type = redis::redlock;
  struct backend {
    redlock_test::masters_t masters;
  };
  static asio::awaitable<backend> open() {
    auto executor = co_await asio::this_coro::executor;
    backend b;
    b.masters = co_await redlock_test::connect_masters(executor);
    co_return b;
  }
  static redis::redlock_options options(hold_kind kind) {
    redis::redlock_options o;
    o.fencing = true;
    o.ttl = kind == hold_kind::short_lived ? 1000ms : 10000ms;
    o.master_timeout = 200ms;  // generous: sanitizers on busy cores
    o.retry_count = -1;
    o.wait_limit = 2000ms;
    o.retry_delay = 20ms;
    o.retry_jitter = 10ms;
    return o;
  }
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind kind) {
    return std::make_shared<lock_type>(b.masters.front()->get_executor(), b.masters, name, options(kind));
  }
  static std::shared_ptr<lock_type> make_waiting(backend& b, const std::string& name, std::chrono::milliseconds wait) {
    auto o = options(hold_kind::lasting);
    o.wait_limit = wait;
    return std::make_shared<lock_type>(b.masters.front()->get_executor(), b.masters, name, o);
  }
  static std::string name(const std::string& stem) { return redis_name(stem); }
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) {
    for (auto& master : b.masters) {
      auto del = master->exec(redis::command("DEL", l.key()), with_ec);
      co_await std::move(del);
    }
  }
  // The redlock shares its masters' connections: closing them is what the
  // user can do first.
  static void drop(backend& b) {
    for (auto& master : b.masters) master->close();
  }
};


// A semaphore of one lease: the contract of a lock.
struct redis_semaphore_traits {
  using lock_type = redis::semaphore;
  struct backend {
    std::shared_ptr<redis::connection> connection;
  };
  static asio::awaitable<backend> open() {
    auto executor = co_await asio::this_coro::executor;
    backend b;
    b.connection = std::make_shared<redis::connection>(executor, redis_test::master_options());
    co_await b.connection->connect();
    co_return b;
  }
  static redis::semaphore_options options(hold_kind kind) {
    redis::semaphore_options o;
    o.ttl = kind == hold_kind::short_lived ? 300ms : 10000ms;
    o.wait = 2000ms;
    o.retry_delay = 20ms;
    o.retry_jitter = 10ms;
    return o;
  }
  static std::shared_ptr<lock_type> make(backend& b, const std::string& name, hold_kind kind) {
    return std::make_shared<lock_type>(*b.connection, name, 1, options(kind));
  }
  static std::shared_ptr<lock_type> make_waiting(backend& b, const std::string& name, std::chrono::milliseconds wait) {
    auto o = options(hold_kind::lasting);
    o.wait = wait;
    return std::make_shared<lock_type>(*b.connection, name, 1, o);
  }
  static std::string name(const std::string& stem) { return redis_name(stem); }
  // The sorted set is deleted behind the holder's back (as redis_lock_traits).
  static asio::awaitable<void> force_loss(backend& b, lock_type& l) {
    auto del = b.connection->exec(redis::command("DEL", l.key()), with_ec);
    co_await std::move(del);
  }
  static void drop(backend& b) { b.connection.reset(); }
};

// ------------------------------------------------------------ generic helpers

template <class T>
concept has_rival = requires(typename T::backend& b, const std::string& n) { T::rival(b, n); };

// Another contender on the same name.
template <class T>
std::shared_ptr<typename T::lock_type> rival(typename T::backend& b, const std::string& name) {
  if constexpr (has_rival<T>)
    return T::rival(b, name);
  else
    return T::make(b, name, hold_kind::lasting);
}

template <class Op>
asio::awaitable<error_code> outcome(Op op) {
  auto [ec] = co_await std::move(op);
  co_return ec;
}

// Nothing is left behind on `name`: a fresh contender gets the lock (within
// a wait long enough for a background cleanup, far shorter than a TTL).
template <class T>
asio::awaitable<void> expect_free(typename T::backend& b, const std::string& name, const char* after) {
  auto probe = rival<T>(b, name);
  auto ec = co_await outcome(probe->acquire_for(5s, with_ec));
  BOOST_TEST(!ec, "the lock is not free " << after << ": " << ec.message());
  if (!ec) co_await outcome(probe->release(with_ec));
}

// Runs one scenario, on a lock name of T's, on a fresh io_context.
template <class T>
void run(asio::awaitable<void> (*scenario)(std::string)) {
  dlock::test::run(scenario(T::name("c")));
}

// ----------------------------------------------------------------- scenarios

template <class T>
asio::awaitable<void> acquire_and_release(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  BOOST_TEST(!l->held());
  BOOST_TEST(std::string(l->name()) == name);
  BOOST_TEST(!co_await outcome(l->acquire(with_ec)));
  BOOST_TEST(l->held());
  if constexpr (dlock::fenced_lockable<typename T::lock_type>) BOOST_TEST(l->fencing_token() > 0);
  BOOST_TEST(!co_await outcome(l->release(with_ec)));
  BOOST_TEST(!l->held());
  co_await expect_free<T>(b, name, "after a release");
}

// Every lock fences (Redis: with its `fencing` option on, as the traits set): a token
// while held, none otherwise, and a larger one for each new hold, whoever takes it.
// The semaphore has no token: its leases are held side by side (see its header).
template <class T>
asio::awaitable<void> fencing_tokens_grow(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  auto other = rival<T>(b, name);
  BOOST_TEST(l->fencing_token() == 0);
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  auto first = l->fencing_token();
  BOOST_TEST(first > 0);
  BOOST_REQUIRE(!co_await outcome(l->release(with_ec)));
  BOOST_TEST(l->fencing_token() == 0);
  BOOST_REQUIRE(!co_await outcome(other->acquire(with_ec)));
  auto second = other->fencing_token();
  BOOST_TEST(second > first);
  BOOST_REQUIRE(!co_await outcome(other->release(with_ec)));
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  BOOST_TEST(l->fencing_token() > second);
  BOOST_REQUIRE(!co_await outcome(l->release(with_ec)));
}

template <class T>
asio::awaitable<void> try_acquire_while_held(std::string name) {
  auto b = co_await T::open();
  auto holder = rival<T>(b, name);
  BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
  auto l = T::make(b, name, hold_kind::lasting);
  auto ec = co_await outcome(l->try_acquire(with_ec));
  BOOST_TEST((ec == dlock::error::taken), ec.message());
  BOOST_TEST(!l->held());
  BOOST_TEST(!co_await outcome(holder->release(with_ec)));
  co_await expect_free<T>(b, name, "after a refused try_acquire");
}

template <class T>
asio::awaitable<void> acquire_for_times_out(std::string name) {
  auto b = co_await T::open();
  auto holder = rival<T>(b, name);
  BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
  auto l = T::make(b, name, hold_kind::lasting);
  auto ec = co_await outcome(l->acquire_for(300ms, with_ec));
  BOOST_TEST((ec == dlock::error::timed_out), ec.message());
  BOOST_TEST(!l->held());
  auto bad = co_await outcome(l->acquire_for(0ms, with_ec));
  BOOST_TEST((bad == dlock::error::invalid_argument), bad.message());
  BOOST_TEST(!co_await outcome(holder->release(with_ec)));
  co_await expect_free<T>(b, name, "after a timed-out wait");
}

// The lock's own wait option running out (redis::lock's `wait`, Redlock's
// `wait_limit`) is the same outcome as acquire_for's. The ZooKeeper locks
// have no wait of their own: a plain acquire waits until it is granted or
// cancelled, so there is nothing to run out.
template <class T>
asio::awaitable<void> own_wait_times_out(std::string name) {
  if constexpr (requires(typename T::backend& b) { T::make_waiting(b, name, 300ms); }) {
    auto b = co_await T::open();
    auto holder = rival<T>(b, name);
    BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
    auto l = T::make_waiting(b, name, 300ms);
    auto ec = co_await outcome(l->acquire(with_ec));
    BOOST_TEST((ec == dlock::error::timed_out), ec.message());
    BOOST_TEST(!l->held());
    BOOST_TEST(!co_await outcome(holder->release(with_ec)));
    co_await expect_free<T>(b, name, "after the lock's own wait ran out");
  } else {
    BOOST_TEST_MESSAGE("no wait option of its own: a plain acquire waits until granted or cancelled");
  }
}

// Cancels an acquire at a random point, with a random type (terminal or
// partial): whether it was waiting for a holder or racing for a free lock,
// it either holds (and then releases) or ends with operation_aborted, and
// leaves nothing behind.
template <class T>
asio::awaitable<void> cancellation_at_random_points(std::string name) {
  auto b = co_await T::open();
  std::minstd_rand random(std::random_device{}());
  for (int round = 0; round < 8; ++round) {
    bool contended = round % 2 == 0;
    auto holder = rival<T>(b, name);
    if (contended) BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
    auto l = T::make(b, name, hold_kind::lasting);
    asio::cancellation_signal signal;
    auto type = random() % 2 ? asio::cancellation_type::terminal : asio::cancellation_type::partial;
    auto delay = std::chrono::microseconds(random() % 20000);
    auto result = std::make_shared<std::optional<error_code>>();
    l->acquire(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
    co_await sleep_for(delay);
    if (!*result) signal.emit(type);
    for (int i = 0; i < 1000 && !*result; ++i) co_await sleep_for(5ms);
    BOOST_REQUIRE_MESSAGE(result->has_value(), "a cancelled acquire never completed");
    auto ec = **result;
    if (contended) {
      BOOST_TEST((ec == asio::error::operation_aborted), "round " << round << ": " << ec.message());
    } else {
      BOOST_TEST((!ec || ec == asio::error::operation_aborted), "round " << round << ": " << ec.message());
    }
    BOOST_TEST(l->held() == !ec);
    if (!ec) BOOST_TEST(!co_await outcome(l->release(with_ec)));
    if (contended) BOOST_TEST(!co_await outcome(holder->release(with_ec)));
    co_await expect_free<T>(b, name, "after a cancelled acquire");
  }
}

// A release runs to its end whatever cancellation its handler's slot gets:
// it succeeds and the lock is free after it.
template <class T>
asio::awaitable<void> release_ignores_cancellation(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  for (auto type : {asio::cancellation_type::terminal, asio::cancellation_type::partial}) {
    BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
    asio::cancellation_signal signal;
    auto result = std::make_shared<std::optional<error_code>>();
    l->release(asio::bind_cancellation_slot(signal.slot(), [result](error_code ec) { *result = ec; }));
    signal.emit(type);
    for (int i = 0; i < 1000 && !*result; ++i) co_await sleep_for(5ms);
    BOOST_REQUIRE_MESSAGE(result->has_value(), "a release never completed");
    BOOST_TEST(!**result, "a release given a cancellation: " << (**result).message());
    BOOST_TEST(!l->held());
    co_await expect_free<T>(b, name, "after a release given a cancellation");
  }
}

// Bad arguments are the operation's error, at once, nothing sent: an empty
// name (no constructor throws) and a wait limit of zero.
template <class T>
asio::awaitable<void> bad_arguments_fail_the_operation(std::string name) {
  auto b = co_await T::open();
  std::shared_ptr<typename T::lock_type> nameless;
  BOOST_REQUIRE_NO_THROW(nameless = T::make(b, "", hold_kind::lasting));
  auto ec = co_await outcome(nameless->acquire(with_ec));
  BOOST_TEST((ec == dlock::error::invalid_argument), "acquire with an empty name: " << ec.message());
  auto try_ec = co_await outcome(nameless->try_acquire(with_ec));
  BOOST_TEST((try_ec == dlock::error::invalid_argument), "try_acquire with an empty name: " << try_ec.message());
  BOOST_TEST(!nameless->held());
  auto l = T::make(b, name, hold_kind::lasting);
  auto zero = co_await outcome(l->acquire_for(0ms, with_ec));
  BOOST_TEST((zero == dlock::error::invalid_argument), "acquire_for(0): " << zero.message());
  co_await expect_free<T>(b, name, "after refused operations");
}

template <class T>
asio::awaitable<void> second_release_succeeds(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  BOOST_TEST(!co_await outcome(l->release(with_ec)));
  auto again = co_await outcome(l->release(with_ec));
  BOOST_TEST(!again, "second release: " << again.message());
  BOOST_TEST(!l->held());
}

template <class T>
asio::awaitable<void> release_without_hold(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  auto ec = co_await outcome(l->release(with_ec));
  BOOST_TEST((ec == dlock::error::not_held), ec.message());
}

template <class T>
asio::awaitable<void> reacquire_while_held(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  auto ec = co_await outcome(l->acquire(with_ec));
  BOOST_TEST((ec == dlock::error::already_held), ec.message());
  auto try_ec = co_await outcome(l->try_acquire(with_ec));
  BOOST_TEST((try_ec == dlock::error::already_held), try_ec.message());
  BOOST_TEST(l->held());
  BOOST_TEST(!co_await outcome(l->release(with_ec)));
}

// A second acquire while the first still waits is refused with in_progress
// (not already_held: nothing is held yet), and the first goes on unharmed.
template <class T>
asio::awaitable<void> acquire_while_acquiring(std::string name) {
  auto b = co_await T::open();
  auto holder = rival<T>(b, name);
  BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
  auto l = T::make(b, name, hold_kind::lasting);
  auto first = std::make_shared<std::optional<error_code>>();
  l->acquire([first](error_code ec) { *first = ec; });
  co_await sleep_for(50ms);
  // (Boost.Test evaluates a message's operands even when the check passes.)
  BOOST_REQUIRE_MESSAGE(!*first, "the first acquire ended while a rival held: " << first->value_or(error_code{}).message());
  auto ec = co_await outcome(l->acquire(with_ec));
  BOOST_TEST((ec == dlock::error::in_progress), ec.message());
  auto try_ec = co_await outcome(l->try_acquire(with_ec));
  BOOST_TEST((try_ec == dlock::error::in_progress), try_ec.message());
  BOOST_TEST(!co_await outcome(holder->release(with_ec)));
  for (int i = 0; i < 1000 && !*first; ++i) co_await sleep_for(5ms);
  BOOST_REQUIRE_MESSAGE(first->has_value(), "the first acquire never completed");
  BOOST_TEST(!**first, "the first acquire: " << (**first).message());
  BOOST_TEST(l->held());
  BOOST_TEST(!co_await outcome(l->release(with_ec)));
  co_await expect_free<T>(b, name, "after an acquire refused while acquiring");
}

// The loss makes held() false and fires loss() with a reason; the release
// then reports that reason, and a second release succeeds.
template <class T>
asio::awaitable<void> loss_is_told(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::short_lived);
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  auto waiting = l->loss().wait(with_ec);
  // A plain callback too: held() must already be false when the loss is told.
  auto held_when_told = std::make_shared<std::optional<bool>>();
  l->loss().wait([held_when_told, l](error_code) { *held_when_told = l->held(); });
  co_await T::force_loss(b, *l);
  auto reason = co_await outcome(std::move(waiting));
  BOOST_TEST(bool(reason), "loss().wait() completed without a reason");
  BOOST_TEST((reason != asio::error::operation_aborted));
  BOOST_TEST(!l->held(), "held() after the loss was told");
  for (int i = 0; i < 200 && !held_when_told->has_value(); ++i) co_await sleep_for(10ms);
  BOOST_TEST((*held_when_told == std::optional<bool>(false)), "held() inside the loss handler");
  auto released = co_await outcome(l->release(with_ec));
  BOOST_TEST((released == reason), "release after a loss: " << released.message() << ", the loss: " << reason.message());
  BOOST_TEST(!co_await outcome(l->release(with_ec)));
  co_await expect_free<T>(b, name, "after a loss");
}

template <class T>
asio::awaitable<void> destroy_while_holding(std::string name) {
  auto b = co_await T::open();
  {
    auto l = T::make(b, name, hold_kind::lasting);
    BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  }  // released in the background
  co_await expect_free<T>(b, name, "after destroying a holding lock");
}

template <class T>
asio::awaitable<void> destroy_while_acquiring(std::string name) {
  auto b = co_await T::open();
  auto holder = rival<T>(b, name);
  BOOST_REQUIRE(!co_await outcome(holder->acquire(with_ec)));
  auto result = std::make_shared<std::optional<error_code>>();
  {
    auto l = T::make(b, name, hold_kind::lasting);
    l->acquire([result](error_code ec) { *result = ec; });
    co_await sleep_for(50ms);
  }
  for (int i = 0; i < 1000 && !*result; ++i) co_await sleep_for(5ms);
  BOOST_REQUIRE_MESSAGE(result->has_value(), "the acquire of a destroyed lock never completed");
  BOOST_TEST((**result == asio::error::operation_aborted), (**result).message());
  BOOST_TEST(!co_await outcome(holder->release(with_ec)));
  co_await expect_free<T>(b, name, "after destroying an acquiring lock");
}

// The client or connection goes first: the lock's operations then give
// `closed`, and nothing touches freed memory (the sanitizers watch).
template <class T>
asio::awaitable<void> backend_goes_first(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  auto idle = T::make(b, name + "-idle", hold_kind::lasting);
  BOOST_REQUIRE(!co_await outcome(l->acquire(with_ec)));
  T::drop(b);
  co_await sleep_for(20ms);
  auto released = co_await outcome(l->release(with_ec));
  BOOST_TEST((released == dlock::error::closed), "release after the backend went: " << released.message());
  BOOST_TEST(!l->held());
  auto ec = co_await outcome(idle->acquire(with_ec));
  BOOST_TEST((ec == dlock::error::closed), ec.message());
  BOOST_TEST(!idle->held());
}

// with_lock over the concept: a body that returns, one that throws, one
// cancelled by a loss.
asio::awaitable<int> returns_42() { co_return 42; }
asio::awaitable<int> throws_logic_error() {
  throw std::logic_error("body failed");
  co_return 0;
}
asio::awaitable<int> waits_forever(std::shared_ptr<bool> entered) {
  *entered = true;
  asio::steady_timer forever(co_await asio::this_coro::executor, 1h);
  co_await forever.async_wait(asio::use_awaitable);
  co_return 0;
}

// Runs a with_lock operation to its end and keeps its exception.
template <class Op>
asio::awaitable<void> collect(Op op, std::shared_ptr<std::optional<std::exception_ptr>> result) {
  auto [failure, value] = co_await std::move(op);
  (void)value;
  *result = failure;
}

template <class T>
asio::awaitable<void> with_lock_paths(std::string name) {
  auto b = co_await T::open();
  auto l = T::make(b, name, hold_kind::lasting);
  auto returning = [] { return returns_42(); };
  int value = co_await dlock::with_lock(*l, returning);
  BOOST_TEST(value == 42);
  BOOST_TEST(!l->held());

  auto throwing = [] { return throws_logic_error(); };
  auto [thrown, ignored] = co_await dlock::with_lock(*l, throwing, with_ec);
  BOOST_TEST(bool(thrown), "a throwing body's exception was lost");
  BOOST_CHECK_THROW(std::rethrow_exception(thrown), std::logic_error);
  BOOST_TEST(!l->held());
  co_await expect_free<T>(b, name, "after with_lock");

  auto short_lived = T::make(b, name, hold_kind::short_lived);
  auto entered = std::make_shared<bool>(false);
  auto waiting = [entered] { return waits_forever(entered); };
  auto body = dlock::with_lock(*short_lived, waiting, with_ec);
  auto result = std::make_shared<std::optional<std::exception_ptr>>();
  asio::co_spawn(co_await asio::this_coro::executor, collect(std::move(body), result), asio::detached);
  for (int i = 0; i < 1000 && !*entered; ++i) co_await sleep_for(5ms);
  BOOST_REQUIRE(*entered);
  co_await T::force_loss(b, *short_lived);
  for (int i = 0; i < 2000 && !*result; ++i) co_await sleep_for(5ms);
  BOOST_REQUIRE_MESSAGE(result->has_value(), "with_lock did not end after the loss");
  try {
    std::rethrow_exception(**result);
  } catch (const boost::system::system_error& e) {
    BOOST_TEST_MESSAGE("with_lock after a loss: " << e.what());
    BOOST_TEST(bool(e.code()));
  } catch (...) {
    BOOST_TEST(false, "with_lock after a loss threw something else");
  }
  BOOST_TEST(!short_lived->held());
  co_await expect_free<T>(b, name, "after with_lock's lock was lost");
}

}  // namespace

// Every type is movable by construction only, the one rule for all locks.
template <class Lock>
constexpr bool movable_by_construction_only =
    std::is_nothrow_move_constructible_v<Lock> && !std::is_move_assignable_v<Lock> &&
    !std::is_copy_constructible_v<Lock>;
static_assert(movable_by_construction_only<zk::mutex>);
static_assert(movable_by_construction_only<zk::simple_lock>);
static_assert(movable_by_construction_only<redis::lock>);
static_assert(movable_by_construction_only<redis::redlock>);
static_assert(movable_by_construction_only<redis::semaphore>);
static_assert(movable_by_construction_only<zk::semaphore>);
static_assert(movable_by_construction_only<zk::queue>);  // move-only too: copies would share a cache
static_assert(dlock::fenced_lockable<zk::mutex> && dlock::fenced_lockable<zk::simple_lock>);
static_assert(dlock::fenced_lockable<redis::lock> && dlock::fenced_lockable<redis::redlock>);

// The lock types, one line each.
using lock_types = boost::mpl::list<zk_mutex_traits, zk_simple_lock_traits, zk_reader_traits, zk_writer_traits,
                                    zk_semaphore_traits, redis_lock_traits, redlock_traits, redis_semaphore_traits>;

BOOST_AUTO_TEST_SUITE(lock_conformance)

BOOST_AUTO_TEST_CASE_TEMPLATE(acquire_and_release_, T, lock_types) { run<T>(acquire_and_release<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(fencing_tokens_grow_from_hold_to_hold, T, lock_types) {
  if constexpr (dlock::fenced_lockable<typename T::lock_type>) run<T>(fencing_tokens_grow<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(try_acquire_while_held_is_taken, T, lock_types) { run<T>(try_acquire_while_held<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(acquire_for_times_out_leaving_nothing, T, lock_types) {
  run<T>(acquire_for_times_out<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(own_wait_times_out_leaving_nothing, T, lock_types) { run<T>(own_wait_times_out<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(cancellation_leaves_nothing, T, lock_types) {
  run<T>(cancellation_at_random_points<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(release_ignores_cancellation_, T, lock_types) {
  run<T>(release_ignores_cancellation<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(bad_arguments_fail_the_operation_, T, lock_types) {
  run<T>(bad_arguments_fail_the_operation<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(second_release_is_a_no_op, T, lock_types) { run<T>(second_release_succeeds<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(release_without_hold_is_not_held, T, lock_types) { run<T>(release_without_hold<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(reacquire_while_held_is_already_held, T, lock_types) {
  run<T>(reacquire_while_held<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(acquire_while_acquiring_is_in_progress, T, lock_types) {
  run<T>(acquire_while_acquiring<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(loss_clears_held_and_release_tells_it, T, lock_types) { run<T>(loss_is_told<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(destroy_while_holding_releases, T, lock_types) { run<T>(destroy_while_holding<T>); }
BOOST_AUTO_TEST_CASE_TEMPLATE(destroy_while_acquiring_aborts, T, lock_types) {
  run<T>(destroy_while_acquiring<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(backend_destroyed_first_gives_closed, T, lock_types) {
  run<T>(backend_goes_first<T>);
}
BOOST_AUTO_TEST_CASE_TEMPLATE(with_lock_returns_throws_and_stops_on_loss, T, lock_types) {
  run<T>(with_lock_paths<T>);
}

BOOST_AUTO_TEST_SUITE_END()
