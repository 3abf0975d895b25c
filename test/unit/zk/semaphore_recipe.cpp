// The ZooKeeper semaphore's acquire state machine, driven without a server:
// by hand for each path, and against a small in-memory model of the server
// with a fault (or a cancel) injected at every step in turn.
#include <dlock/error.hpp>
#include <dlock/zk/error.hpp>

#include "zk/semaphore/semaphore_recipe.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

using namespace dlock::zk::detail;
using action = semaphore_machine::action;

namespace {

const std::string guid = "0f8fad5b-d9cb-469f-a165-70867728950e";
const std::string other_guid = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
constexpr std::int64_t session = 77;

reply ok() { return {}; }
reply loss() { return {step_result::connection_loss, make_error_code(dlock::zk::error::connection_loss)}; }
reply expired() { return {step_result::session_lost, make_error_code(dlock::zk::error::session_expired)}; }
reply aborted() { return {step_result::aborted, make_error_code(boost::asio::error::operation_aborted)}; }

std::string lease(const std::string& g, int seq) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%010d", seq);
  return "_c_" + g + "-lease-" + digits;
}
std::string full(const std::string& name) { return "/s/leases/" + name; }

semaphore_machine machine(std::size_t count, std::size_t max, bool wait = true, retry_policy retry = {}) {
  return semaphore_machine({"/s", count, max, wait, retry}, guid);
}

created_lease made(int seq) { return {ok(), full(lease(guid, seq)), 1000 + seq, session}; }

// One lease granted: the machine is at its unlock.
semaphore_machine granted_one() {
  auto m = machine(1, 2);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1)};
  std::vector<std::string> children{lease(guid, 1)};
  BOOST_REQUIRE((m.on_created(c, ok(), children) == action::unlock));
  return m;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_semaphore_recipe)

BOOST_AUTO_TEST_CASE(curator_layout) {
  auto m = machine(1, 1);
  BOOST_TEST(m.locks_path() == "/s/locks");
  BOOST_TEST(m.leases_path() == "/s/leases");
  BOOST_TEST(m.create_path() == "/s/leases/_c_" + guid + "-lease-");
  BOOST_TEST(lease_prefix(guid) == "_c_" + guid + "-lease-");
}

BOOST_AUTO_TEST_CASE(every_child_counts_and_ours_must_be_there) {
  std::vector<lease_node> ours{{full(lease(guid, 3)), 1, session}};
  std::vector<std::string> children{lease(other_guid, 1), "foreign", lease(guid, 3)};
  BOOST_TEST((judge_leases(children, ours, 3) == lease_verdict::granted));
  BOOST_TEST((judge_leases(children, ours, 2) == lease_verdict::full));  // "foreign" counts, as in Curator
  std::vector<std::string> without{lease(other_guid, 1)};
  BOOST_TEST((judge_leases(without, ours, 5) == lease_verdict::missing));
}

BOOST_AUTO_TEST_CASE(uncontended_acquire_of_two) {
  auto m = machine(2, 3);
  BOOST_TEST((m.start() == action::lock));
  BOOST_TEST((m.on_locked(ok()) == action::create));
  BOOST_TEST(m.to_create() == 2u);
  std::vector<created_lease> c{made(1), made(2)};
  std::vector<std::string> children{lease(guid, 1), lease(guid, 2)};
  BOOST_TEST((m.on_created(c, ok(), children) == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.nodes().size() == 2u);
  BOOST_TEST(m.nodes()[0].czxid == 1001);
}

BOOST_AUTO_TEST_CASE(waits_while_full_then_lists_again) {
  auto m = machine(1, 1);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(2)};
  std::vector<std::string> crowded{lease(other_guid, 1), lease(guid, 2)};
  BOOST_TEST((m.on_created(c, ok(), crowded) == action::wait));
  BOOST_TEST((m.on_watch_fired(ok()) == action::list));
  BOOST_TEST((m.on_listed(ok(), crowded) == action::wait));
  BOOST_TEST((m.on_watch_fired(ok()) == action::list));
  std::vector<std::string> freed{lease(guid, 2)};
  BOOST_TEST((m.on_listed(ok(), freed) == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(!m.result());
}

BOOST_AUTO_TEST_CASE(try_acquire_when_full_deletes_its_node) {
  auto m = machine(1, 1, false);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(2)};
  std::vector<std::string> crowded{lease(other_guid, 1), lease(guid, 2)};
  BOOST_TEST((m.on_created(c, ok(), crowded) == action::remove));
  BOOST_TEST(m.nodes().size() == 1u);
  BOOST_TEST((m.on_removed() == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::taken));
  BOOST_TEST(m.nodes().empty());
}

BOOST_AUTO_TEST_CASE(a_failed_mutex_leaves_nothing_to_do) {
  auto m = machine(1, 1, false);
  m.start();
  BOOST_TEST((m.on_locked({step_result::failed, make_error_code(dlock::error::taken)}) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::taken));
}

BOOST_AUTO_TEST_CASE(cancel_while_locking_interrupts_the_mutex) {
  auto m = machine(1, 1);
  m.start();
  BOOST_TEST(m.cancel(make_error_code(dlock::error::timed_out)));
  BOOST_TEST((m.on_locked(aborted()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(mutex_won_after_a_cancel_is_released) {
  auto m = machine(1, 1);
  m.start();
  m.cancel(make_error_code(boost::asio::error::operation_aborted));
  BOOST_TEST((m.on_locked(ok()) == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.result() == make_error_code(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(cancel_while_waiting_deletes_and_unlocks) {
  auto m = machine(1, 1);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(2)};
  std::vector<std::string> crowded{lease(other_guid, 1), lease(guid, 2)};
  m.on_created(c, ok(), crowded);
  BOOST_TEST(m.cancel(make_error_code(dlock::error::timed_out)));
  BOOST_TEST((m.on_watch_fired(aborted()) == action::remove));
  BOOST_TEST((m.on_removed() == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(cancel_while_creating_waits_for_the_replies) {
  auto m = machine(2, 2);
  m.start();
  m.on_locked(ok());
  BOOST_TEST(!m.cancel(make_error_code(boost::asio::error::operation_aborted)));  // nothing to interrupt
  std::vector<created_lease> c{made(1), made(2)};
  std::vector<std::string> children{lease(guid, 1), lease(guid, 2)};
  BOOST_TEST((m.on_created(c, ok(), children) == action::remove));
  BOOST_TEST(m.nodes().size() == 2u);
}

BOOST_AUTO_TEST_CASE(cancel_while_unlocking_a_grant_gives_the_leases_back) {
  auto m = granted_one();
  BOOST_TEST(!m.cancel(make_error_code(boost::asio::error::operation_aborted)));
  BOOST_TEST((m.on_unlocked(true) == action::remove));
  BOOST_TEST((m.on_removed() == action::done));
  BOOST_TEST(m.result() == make_error_code(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(a_lost_create_reply_is_recovered_by_guid) {
  auto m = machine(2, 2);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1), {loss(), {}, 0, 0}};
  BOOST_TEST((m.on_created(c, loss(), {}) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::recover));
  BOOST_TEST(m.needs_sync());
  std::vector<std::string> children{lease(other_guid, 0), lease(guid, 1), lease(guid, 2)};
  BOOST_TEST((m.on_recovered(ok(), children) == action::check_owners));
  BOOST_REQUIRE(m.targets().size() == 1u);
  BOOST_TEST(m.targets()[0] == full(lease(guid, 2)));
  std::vector<owner_reply> owners{{ok(), session, 1002}};
  BOOST_TEST((m.on_owners(owners, session) == action::list));  // both nodes ours: nothing to create
  BOOST_TEST((m.on_listed(ok(), std::vector<std::string>{lease(guid, 1), lease(guid, 2)}) == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.nodes().size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_twin_with_our_guid_is_neither_adopted_nor_deleted) {
  auto m = machine(1, 2);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{{loss(), {}, 0, 0}};
  m.on_created(c, loss(), {});
  m.on_backoff_done();
  std::vector<std::string> children{lease(guid, 5)};
  BOOST_TEST((m.on_recovered(ok(), children) == action::check_owners));
  std::vector<owner_reply> owners{{ok(), session + 1, 1005}};
  BOOST_TEST((m.on_owners(owners, session) == action::create));
  BOOST_TEST(m.to_create() == 1u);
  BOOST_TEST(m.nodes().empty());
}

BOOST_AUTO_TEST_CASE(a_create_that_never_happened_is_made_again) {
  auto m = machine(1, 1);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{{loss(), {}, 0, 0}};
  m.on_created(c, loss(), {});
  m.on_backoff_done();
  BOOST_TEST((m.on_recovered(ok(), std::vector<std::string>{}) == action::create));
  BOOST_TEST((m.on_recovered({step_result::no_node, {}}, {}) == action::create));
}

BOOST_AUTO_TEST_CASE(out_of_retries_with_an_unknown_create_hunts_in_the_background) {
  auto m = machine(2, 2, true, {0, std::chrono::milliseconds(20), std::chrono::milliseconds(500)});
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1), {loss(), {}, 0, 0}};
  BOOST_TEST((m.on_created(c, loss(), {}) == action::remove));  // the known one first
  BOOST_TEST((m.on_removed() == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::backoff));
  BOOST_TEST(m.hunting());
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
  BOOST_TEST(m.delay().count() == 500);
  BOOST_TEST(!m.cancel(make_error_code(boost::asio::error::operation_aborted)));  // the caller already heard
  BOOST_TEST((m.on_backoff_done() == action::recover));
  BOOST_TEST((m.on_recovered(loss(), {}) == action::backoff));  // unbounded while the session lives
  BOOST_TEST((m.on_backoff_done() == action::recover));
  BOOST_TEST((m.on_recovered(ok(), std::vector<std::string>{lease(guid, 2)}) == action::check_owners));
  std::vector<owner_reply> owners{{ok(), session, 1002}};
  BOOST_TEST((m.on_owners(owners, session) == action::remove));
  BOOST_REQUIRE(m.nodes().size() == 1u);
  BOOST_TEST(m.nodes()[0].path == full(lease(guid, 2)));
  BOOST_TEST((m.on_removed() == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
}

BOOST_AUTO_TEST_CASE(a_missing_leases_parent_is_ensured) {
  auto m = machine(2, 2);
  m.start();
  m.on_locked(ok());
  reply no_node{step_result::no_node, make_error_code(dlock::zk::error::no_node)};
  std::vector<created_lease> c{{no_node, {}, 0, 0}, {no_node, {}, 0, 0}};
  BOOST_TEST((m.on_created(c, no_node, {}) == action::ensure));
  BOOST_TEST((m.on_ensured(ok()) == action::create));
  BOOST_TEST(m.to_create() == 2u);
}

BOOST_AUTO_TEST_CASE(an_expiry_while_creating_fails_after_handing_over_what_was_made) {
  auto m = machine(2, 2);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1), {expired(), {}, 0, 0}};
  BOOST_TEST((m.on_created(c, expired(), {}) == action::remove));
  BOOST_TEST((m.on_removed() == action::unlock));
  BOOST_TEST((m.on_unlocked(true) == action::done));  // no hunt: the session took the rest
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::session_expired));
}

BOOST_AUTO_TEST_CASE(our_node_missing_from_the_listing_is_a_loss) {
  auto m = machine(1, 3);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(4)};
  BOOST_TEST((m.on_created(c, ok(), std::vector<std::string>{lease(other_guid, 1)}) == action::remove));
  m.on_removed();
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::lost));
}

BOOST_AUTO_TEST_CASE(listing_failures_are_retried_then_reported) {
  auto m = machine(1, 1, true, {1, std::chrono::milliseconds(20), std::chrono::milliseconds(100)});
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1)};
  BOOST_TEST((m.on_created(c, loss(), {}) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::list));
  BOOST_TEST((m.on_listed(loss(), {}) == action::remove));  // out of retries
  m.on_removed();
  BOOST_TEST((m.on_unlocked(true) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::zk::error::connection_loss));
}

BOOST_AUTO_TEST_CASE(cancel_during_a_backoff_interrupts_it) {
  auto m = machine(1, 1);
  m.start();
  m.on_locked(ok());
  std::vector<created_lease> c{made(1)};
  m.on_created(c, loss(), {});
  BOOST_TEST(m.cancel(make_error_code(boost::asio::error::operation_aborted)));
  BOOST_TEST((m.on_backoff_done() == action::remove));
}

// The mutex's release ends on a dropped connection (it deletes in the
// background): the grant is confirmed once the connection is back, so a
// success never comes on a suspended connection.
BOOST_AUTO_TEST_CASE(a_grant_whose_unlock_lost_the_connection_is_confirmed) {
  auto m = granted_one();
  BOOST_TEST((m.on_unlocked(false) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::confirm));
  std::vector<owner_reply> still_loss{{loss(), 0, 0}};
  BOOST_TEST((m.on_confirmed(still_loss, session) == action::backoff));  // not back yet
  BOOST_TEST((m.on_backoff_done() == action::confirm));
  std::vector<owner_reply> ours{{ok(), session, 1001}};
  BOOST_TEST((m.on_confirmed(ours, session) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.nodes().size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_grant_whose_session_ended_while_unlocking_fails) {
  auto m = granted_one();
  m.on_unlocked(false);
  BOOST_TEST((m.on_backoff_done() == action::confirm));
  std::vector<owner_reply> gone{{{step_result::no_node, {}}, 0, 0}};
  // A new session: the expiry took the lease.
  BOOST_TEST((m.on_confirmed(gone, session + 1) == action::remove));
  BOOST_TEST((m.on_removed() == action::done));
  BOOST_TEST((m.result() == dlock::zk::error::session_expired));
}

BOOST_AUTO_TEST_CASE(a_grant_whose_lease_vanished_while_unlocking_is_lost) {
  auto m = granted_one();
  m.on_unlocked(false);
  m.on_backoff_done();
  std::vector<owner_reply> gone{{{step_result::no_node, {}}, 0, 0}};
  BOOST_TEST((m.on_confirmed(gone, session) == action::remove));
  BOOST_TEST((m.on_removed() == action::done));
  BOOST_TEST((m.result() == dlock::error::lost));
}

BOOST_AUTO_TEST_CASE(a_grant_cancelled_while_confirming_gives_the_leases_back) {
  auto m = granted_one();
  m.on_unlocked(false);
  BOOST_TEST(m.cancel(make_error_code(boost::asio::error::operation_aborted)));  // during the backoff
  BOOST_TEST((m.on_backoff_done() == action::remove));
  BOOST_TEST((m.on_removed() == action::done));
  BOOST_TEST((m.result() == boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_SUITE_END()

// --- every step, against a model of the server ---

namespace {

// One contender against an in-memory `leases` node. Foreign leases leave one
// per wait, so a waiting acquire gets its turn.
struct model {
  std::size_t count, max;
  bool wait;
  std::set<std::string> children;  // names under /s/leases
  int seq = 0;
  bool locked = false;
  bool leases_parent = false;
  std::int64_t sess = session;
  int step = 0;

  enum class fault { none, loss, expiry, cancel } kind = fault::none;
  int fault_at = -1;

  std::string ours() const { return "_c_" + guid + "-"; }
  std::size_t our_nodes() const {
    return std::count_if(children.begin(), children.end(), [&](const std::string& c) { return c.starts_with(ours()); });
  }
  void expire() {
    std::erase_if(children, [&](const std::string& c) { return c.starts_with(ours()); });
    locked = false;
    ++sess;
  }
  std::vector<std::string> listing() const { return {children.begin(), children.end()}; }

  semaphore_machine run(int foreign) {
    auto m = machine(count, max, wait, {3, std::chrono::milliseconds(1), std::chrono::milliseconds(4)});
    for (int i = 0; i < foreign; ++i) children.insert(lease(other_guid, seq++));
    leases_parent = foreign > 0;
    auto a = m.start();
    for (int guard = 0; a != action::done && guard < 500; ++guard) {
      bool hit = step++ == fault_at;
      bool is_loss = hit && kind == fault::loss;
      if (hit && kind == fault::expiry) expire();
      bool interrupted = hit && kind == fault::cancel && m.cancel(make_error_code(boost::asio::error::operation_aborted));
      reply bad = kind == fault::expiry ? expired() : loss();
      switch (a) {
        case action::lock:
          if (interrupted) { a = m.on_locked(aborted()); break; }
          if (is_loss || (hit && kind == fault::expiry)) { a = m.on_locked(bad); break; }
          locked = true;
          a = m.on_locked(ok());
          break;
        case action::ensure:
          if (!is_loss) leases_parent = true;
          a = m.on_ensured(hit && kind != fault::cancel ? bad : ok());
          break;
        case action::create: {
          std::vector<created_lease> made_now;
          for (std::size_t i = 0; i < m.to_create(); ++i) {
            if (hit && kind == fault::expiry) { made_now.push_back({bad, {}, 0, 0}); continue; }
            if (!leases_parent) { made_now.push_back({{step_result::no_node, {}}, {}, 0, 0}); continue; }
            auto name = lease(guid, seq++);
            children.insert(name);  // applied, even when the reply is lost
            if (is_loss) made_now.push_back({loss(), {}, 0, 0});
            else made_now.push_back({ok(), full(name), 1000 + seq, sess});
          }
          a = m.on_created(made_now, is_loss || (hit && kind == fault::expiry) ? bad : ok(), listing());
          break;
        }
        case action::recover:
        case action::list:
          if (hit && kind != fault::cancel) { a = a == action::list ? m.on_listed(bad, {}) : m.on_recovered(bad, {}); break; }
          a = a == action::list ? m.on_listed(ok(), listing()) : m.on_recovered(ok(), listing());
          break;
        case action::check_owners: {
          std::vector<owner_reply> owners;
          for (const auto& t : m.targets()) {
            bool there = children.count(t.substr(t.rfind('/') + 1)) > 0;
            if (hit && kind != fault::cancel) owners.push_back({bad, 0, 0});
            else if (there) owners.push_back({ok(), sess, 1});
            else owners.push_back({{step_result::no_node, {}}, 0, 0});
          }
          a = m.on_owners(owners, sess);
          break;
        }
        case action::wait:
          if (interrupted) { a = m.on_watch_fired(aborted()); break; }
          // Someone releases: the first foreign lease goes.
          for (auto it = children.begin(); it != children.end(); ++it)
            if (!it->starts_with(ours())) { children.erase(it); break; }
          a = m.on_watch_fired(hit && kind != fault::cancel ? bad : ok());
          break;
        case action::remove:
          for (const auto& n : m.nodes())
            if (n.owner == sess) children.erase(n.path.substr(n.path.rfind('/') + 1));  // only while ours
          a = m.on_removed();
          break;
        case action::unlock:
          locked = false;
          // A fault here drops the connection (or the session) as the mutex's release ends.
          a = m.on_unlocked(!hit || kind == fault::cancel);
          break;
        case action::confirm: {
          std::vector<owner_reply> owners;
          for (const auto& n : m.nodes()) {
            bool there = children.count(n.path.substr(n.path.rfind('/') + 1)) > 0;
            if (hit && kind != fault::cancel) owners.push_back({bad, 0, 0});
            else if (there) owners.push_back({ok(), n.owner, n.czxid});
            else owners.push_back({{step_result::no_node, {}}, 0, 0});
          }
          a = m.on_confirmed(owners, sess);
          break;
        }
        case action::backoff:
          a = m.on_backoff_done();
          break;
        case action::done:
          break;
      }
    }
    BOOST_REQUIRE(a == action::done);
    return m;
  }
};

void check(model& w, const semaphore_machine& m, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(!w.locked, "the mutex is released");
    if (!m.result()) {
      BOOST_TEST(m.nodes().size() == w.count);
      // An expiry once the mutex is released is the holder's loss (the core
      // sees the session changed); one before it fails the acquire.
      if (w.sess == session) BOOST_TEST(w.our_nodes() == w.count, "exactly our leases exist");
      BOOST_TEST(w.children.size() <= w.max, "never more than max_leases");
    } else {
      BOOST_TEST(w.our_nodes() == 0u, "a failed acquire leaves no node");
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_semaphore_recipe_every_step)

BOOST_AUTO_TEST_CASE(without_faults_the_model_grants) {
  model w{2, 3, true, {}};
  auto m = w.run(3);
  check(w, m, "no fault");
  BOOST_TEST(!m.result());
}

BOOST_AUTO_TEST_CASE(a_fault_at_every_step) {
  for (auto kind : {model::fault::loss, model::fault::expiry, model::fault::cancel}) {
    for (bool wait : {true, false}) {
      for (int at = 0; at < 16; ++at) {
        model w{2, 3, wait, {}};
        w.kind = kind;
        w.fault_at = at;
        auto m = w.run(wait ? 3 : 1);
        check(w, m, "fault " + std::to_string(static_cast<int>(kind)) + " at step " + std::to_string(at) +
                        (wait ? " (wait)" : " (try)"));
        if (kind == model::fault::cancel && w.step > at) BOOST_TEST(static_cast<bool>(m.result()), "a cancel before the end fails it");
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
