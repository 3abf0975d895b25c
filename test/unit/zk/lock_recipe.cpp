// The ZooKeeper lock recipe's pure logic: names, ordering, decisions, and
// the acquire state machine driven by hand-written replies.
#include <dlock/error.hpp>

#include "zk/locks/lock_recipe.hpp"

#include <boost/asio/error.hpp>
#include <boost/test/unit_test.hpp>

#include <set>

#include <sys/wait.h>
#include <unistd.h>

using namespace dlock::zk::detail;
using action = acquire_machine::action;

namespace {

const std::string guid_a = "0f8fad5b-d9cb-469f-a165-70867728950e";
const std::string guid_b = "7c9e6679-7425-40de-944b-e07fc1f90ae7";

std::string mutex_node(const std::string& guid, const std::string& seq) { return "_c_" + guid + "-lock-" + seq; }

reply ok() { return {}; }
reply r(step_result s) { return {s, make_error_code(dlock::error::closed)}; }
reply loss() { return {step_result::connection_loss, make_error_code(dlock::error::closed)}; }

acquire_machine machine(lock_role role = lock_role::exclusive, bool wait = true) {
  return acquire_machine({role, "/locks/a", wait, {}}, guid_a);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zk_lock_recipe)

BOOST_AUTO_TEST_CASE(guids_are_random_v4_lowercase) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto g = make_guid();
    BOOST_TEST(is_guid(g));
    BOOST_TEST(g[14] == '4');
    BOOST_TEST((g[19] == '8' || g[19] == '9' || g[19] == 'a' || g[19] == 'b'));
    BOOST_TEST(g == [&] { auto l = g; for (auto& c : l) c = static_cast<char>(std::tolower(c)); return l; }());
    seen.insert(g);
  }
  BOOST_TEST(seen.size() == 100u);
  BOOST_TEST(!is_guid("not-a-guid"));
  BOOST_TEST(!is_guid("0f8fad5b-d9cb-469f-a165-70867728950"));
}

// A forked child must not repeat its parent's GUIDs (nor a sibling's): GUID
// recovery would take a twin's node for its own (F9). The old engine was
// seeded once per thread and carried on in the child: the same GUIDs.
BOOST_AUTO_TEST_CASE(guids_differ_across_fork) {
  (void)make_guid();  // the parent's engine is seeded and in use
  int fds[2];
  BOOST_REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    auto guid = make_guid();
    auto written = write(fds[1], guid.data(), guid.size());
    _exit(written == static_cast<ssize_t>(guid.size()) ? 0 : 1);
  }
  close(fds[1]);
  std::string from_child(36, '\0');
  auto got = read(fds[0], from_child.data(), from_child.size());
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  BOOST_REQUIRE(got == 36);
  auto in_parent = make_guid();
  BOOST_TEST(in_parent != from_child);
  BOOST_TEST(is_guid(from_child));
}

BOOST_AUTO_TEST_CASE(prefixes_match_curator) {
  BOOST_TEST(node_prefix(lock_role::exclusive, guid_a) == "_c_" + guid_a + "-lock-");
  BOOST_TEST(node_prefix(lock_role::reader, guid_a) == "_c_" + guid_a + "-__READ__");
  BOOST_TEST(node_prefix(lock_role::writer, guid_a) == "_c_" + guid_a + "-__WRIT__");
  // Curator's read and write names "must be the same length".
  BOOST_TEST(node_prefix(lock_role::reader, guid_a).size() == node_prefix(lock_role::writer, guid_a).size());
}

BOOST_AUTO_TEST_CASE(parses_curator_kazoo_and_negative_sequences) {
  const auto n_name = mutex_node(guid_a, "0000000042");
  auto n = parse_node(n_name);
  BOOST_REQUIRE(n);
  BOOST_TEST(n->guid == guid_a);
  BOOST_TEST(n->sequence == 42);
  BOOST_TEST((n->kind == lock_kind::exclusive));

  const auto big_name = mutex_node(guid_a, "1500000000");
  auto big = parse_node(big_name);
  BOOST_REQUIRE(big);
  BOOST_TEST(big->sequence == 1500000000);

  const auto neg_name = "_c_" + guid_a + "-__WRIT__-2147483648";
  auto neg = parse_node(neg_name);
  BOOST_REQUIRE(neg);
  BOOST_TEST(neg->sequence == INT32_MIN);
  BOOST_TEST((neg->kind == lock_kind::write));

  const auto small_neg_name = "_c_" + guid_a + "-__READ__-000000005";
  auto small_neg = parse_node(small_neg_name);
  BOOST_REQUIRE(small_neg);
  BOOST_TEST(small_neg->sequence == -5);
  BOOST_TEST((small_neg->kind == lock_kind::read));

  auto kazoo = parse_node("8a9f1c2d3e4f5a6b7c8d9e0f1a2b3c4d__lock__0000000007");
  BOOST_REQUIRE(kazoo);
  BOOST_TEST(kazoo->guid.empty());
  BOOST_TEST(kazoo->sequence == 7);
  BOOST_TEST((kazoo->kind == lock_kind::write));

  auto kazoo_read = parse_node("8a9f1c2d3e4f5a6b7c8d9e0f1a2b3c4d__rlock__0000000008");
  BOOST_REQUIRE(kazoo_read);
  BOOST_TEST((kazoo_read->kind == lock_kind::read));

  auto other = parse_node("x-72057594037927936-0000000003");
  BOOST_REQUIRE(other);
  BOOST_TEST((other->kind == lock_kind::foreign));
  BOOST_TEST(other->sequence == 3);

  BOOST_TEST(!parse_node("config"));
  BOOST_TEST(!parse_node("_c_" + guid_a + "-lock-"));
  BOOST_TEST(!parse_node("lock-9999999999"));  // beyond a 32-bit counter
}

BOOST_AUTO_TEST_CASE(orders_by_sequence_not_prefix_and_across_the_wrap) {
  std::vector<std::string> children{
      mutex_node(guid_b, "0000000012"),
      "zzzz__lock__0000000010",  // kazoo: sorts after Curator's by prefix, first by sequence
      "config",                  // no sequence: ignored
      mutex_node(guid_a, "0000000011"),
  };
  auto sorted = sort_contenders(children);
  BOOST_REQUIRE(sorted.size() == 3u);
  BOOST_TEST(sorted[0].sequence == 10);
  BOOST_TEST(sorted[1].sequence == 11);
  BOOST_TEST(sorted[2].sequence == 12);

  std::vector<std::string> wrapped{mutex_node(guid_a, "-2147483647"), mutex_node(guid_b, "2147483646"),
                                   mutex_node(guid_a, "-2147483648"), mutex_node(guid_b, "2147483647")};
  auto w = sort_contenders(wrapped);
  BOOST_REQUIRE(w.size() == 4u);
  BOOST_TEST(w[0].sequence == 2147483646);
  BOOST_TEST(w[1].sequence == 2147483647);
  BOOST_TEST(w[2].sequence == INT32_MIN);
  BOOST_TEST(w[3].sequence == INT32_MIN + 1);
  BOOST_TEST(sequence_before(INT32_MAX, INT32_MIN));
  BOOST_TEST(!sequence_before(INT32_MIN, INT32_MAX));
}

BOOST_AUTO_TEST_CASE(mutex_and_writer_watch_immediate_predecessor) {
  std::vector<std::string> children{mutex_node(guid_b, "0000000003"), mutex_node(guid_a, "0000000001"),
                                    mutex_node(guid_b, "0000000002")};
  auto first = decide(lock_role::exclusive, mutex_node(guid_a, "0000000001"), children);
  BOOST_TEST((first.outcome == decision::holder));
  auto third = decide(lock_role::exclusive, mutex_node(guid_b, "0000000003"), children);
  BOOST_TEST((third.outcome == decision::wait));
  BOOST_TEST(third.watch == mutex_node(guid_b, "0000000002"));
  auto gone = decide(lock_role::exclusive, mutex_node(guid_a, "0000000009"), children);
  BOOST_TEST((gone.outcome == decision::gone));

  std::vector<std::string> rw{"_c_" + guid_a + "-__READ__0000000001", "_c_" + guid_b + "-__WRIT__0000000002"};
  auto writer = decide(lock_role::writer, rw[1], rw);
  BOOST_TEST((writer.outcome == decision::wait));
  BOOST_TEST(writer.watch == rw[0]);
}

BOOST_AUTO_TEST_CASE(reader_waits_only_for_lower_writers) {
  auto read = [](const std::string& g, const char* s) { return "_c_" + g + "-__READ__" + s; };
  auto write = [](const std::string& g, const char* s) { return "_c_" + g + "-__WRIT__" + s; };
  std::vector<std::string> children{read(guid_a, "0000000001"), read(guid_b, "0000000002"),
                                    write(guid_a, "0000000003"), write(guid_b, "0000000004"),
                                    read(guid_a, "0000000005")};
  BOOST_TEST((decide(lock_role::reader, children[1], children).outcome == decision::holder));
  auto late = decide(lock_role::reader, children[4], children);
  BOOST_TEST((late.outcome == decision::wait));
  BOOST_TEST(late.watch == children[3]);  // the nearest lower write node
  // A kazoo write node counts as a writer for our reader.
  std::vector<std::string> mixed{"abcd__lock__0000000001", read(guid_a, "0000000002")};
  BOOST_TEST((decide(lock_role::reader, mixed[1], mixed).outcome == decision::wait));
}

BOOST_AUTO_TEST_CASE(finds_our_guid_child) {
  std::vector<std::string> children{mutex_node(guid_b, "0000000001"), mutex_node(guid_a, "0000000002")};
  auto found = find_guid_child(guid_a, children);
  BOOST_REQUIRE(found);
  BOOST_TEST(*found == children[1]);
  BOOST_TEST(!find_guid_child("00000000-0000-4000-8000-000000000000", children));
}

BOOST_AUTO_TEST_CASE(uncontended_acquire_is_one_step) {
  auto m = machine();
  BOOST_TEST((m.start() == action::create_and_list));
  BOOST_TEST(m.create_path() == "/locks/a/_c_" + guid_a + "-lock-");
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000000");
  std::vector<std::string> children{mutex_node(guid_a, "0000000000")};
  BOOST_TEST((m.on_created(ok(), own, 77, ok(), children) == action::done));
  BOOST_TEST(!m.result());
  BOOST_TEST(m.own_path() == own);
  BOOST_TEST(m.fencing_token() == 77);
}

BOOST_AUTO_TEST_CASE(waits_on_predecessor_then_relists) {
  auto m = machine();
  m.start();
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000005");
  std::vector<std::string> children{mutex_node(guid_b, "0000000004"), mutex_node(guid_a, "0000000005")};
  BOOST_TEST((m.on_created(ok(), own, 1, ok(), children) == action::watch));
  BOOST_TEST(m.target_path() == "/locks/a/" + mutex_node(guid_b, "0000000004"));
  BOOST_TEST((m.on_watch_set(ok()) == action::wait));
  BOOST_TEST((m.on_watch_fired(ok()) == action::list));
  std::vector<std::string> after{mutex_node(guid_a, "0000000005")};
  BOOST_TEST((m.on_listed(ok(), after) == action::done));
  BOOST_TEST(!m.result());
}

BOOST_AUTO_TEST_CASE(predecessor_gone_before_watch_relists) {
  auto m = machine();
  m.start();
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000005");
  std::vector<std::string> children{mutex_node(guid_b, "0000000004"), mutex_node(guid_a, "0000000005")};
  m.on_created(ok(), own, 1, ok(), children);
  BOOST_TEST((m.on_watch_set(r(step_result::no_node)) == action::list));
}

BOOST_AUTO_TEST_CASE(missing_parent_is_ensured_then_created_again) {
  auto m = machine();
  m.start();
  BOOST_TEST((m.on_created(r(step_result::no_node), "", 0, r(step_result::no_node), {}) == action::ensure_path));
  BOOST_TEST((m.on_ensured(ok()) == action::create_and_list));
  // Reaped again between ensure and create: ensure again.
  BOOST_TEST((m.on_created(r(step_result::no_node), "", 0, r(step_result::no_node), {}) == action::ensure_path));
  BOOST_TEST((m.on_ensured(r(step_result::node_exists)) == action::create_and_list));
}

BOOST_AUTO_TEST_CASE(try_acquire_deletes_its_node_when_taken) {
  auto m = machine(lock_role::exclusive, /*wait=*/false);
  m.start();
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000005");
  std::vector<std::string> children{mutex_node(guid_b, "0000000004"), mutex_node(guid_a, "0000000005")};
  BOOST_TEST((m.on_created(ok(), own, 1, ok(), children) == action::remove));
  BOOST_TEST(m.target_path() == own);
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::taken));
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(connection_loss_on_create_adopts_only_our_session_node) {
  auto m = machine();
  m.start();
  BOOST_TEST((m.on_created(loss(), "", 0, loss(), {}) == action::backoff));
  BOOST_TEST(m.delay().count() > 0);
  BOOST_TEST((m.on_backoff_done() == action::list));
  std::vector<std::string> children{mutex_node(guid_a, "0000000003")};
  BOOST_TEST((m.on_listed(ok(), children) == action::check_owner));
  BOOST_TEST(m.target_path() == "/locks/a/" + children[0]);
  // Our session: adopt, then list to decide.
  BOOST_TEST((m.on_owner(ok(), /*owner=*/42, /*czxid=*/9, /*session=*/42) == action::list));
  BOOST_TEST(m.own_path() == "/locks/a/" + children[0]);
  BOOST_TEST(m.fencing_token() == 9);
  BOOST_TEST((m.on_listed(ok(), children) == action::done));
  BOOST_TEST(!m.result());
}

// A node with our GUID that another session owns is not ours: our create on
// an expired session died with that session. It may be a forked twin's node,
// the holder's even: neither adopt nor delete it (the old code deleted it).
BOOST_AUTO_TEST_CASE(node_with_our_guid_of_another_session_is_neither_adopted_nor_deleted) {
  auto m = machine();
  m.start();
  m.on_created(loss(), "", 0, loss(), {});
  m.on_backoff_done();
  std::vector<std::string> children{mutex_node(guid_a, "0000000003")};
  m.on_listed(ok(), children);
  BOOST_TEST((m.on_owner(ok(), /*owner=*/41, 9, /*session=*/42) == action::create_and_list));
  BOOST_TEST(m.own_path().empty());
}

// Retries ran out while the create's outcome was unknown (F5). The acquire
// fails at once, but the node our create may have made would block the lock
// for as long as the session lives: the machine goes on looking for it.
acquire_machine exhaust_while_create_unknown() {
  acquire_machine m({lock_role::exclusive, "/l", true, {2, std::chrono::milliseconds(10), std::chrono::milliseconds(40)}},
                    guid_a);
  m.start();
  BOOST_TEST((m.on_created(loss(), "", 0, loss(), {}) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::list));
  BOOST_TEST((m.on_listed(loss(), {}) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::list));
  BOOST_TEST(!m.hunting());
  // Third failure: over the budget of 2.
  BOOST_TEST((m.on_listed(loss(), {}) == action::backoff));
  BOOST_TEST(m.hunting());
  BOOST_TEST(m.result() == make_error_code(dlock::error::closed));
  BOOST_TEST(m.delay().count() == 40);
  return m;
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_finds_and_deletes_our_node) {
  auto m = exhaust_while_create_unknown();
  // The search is paced but unbounded while the session lives.
  for (int i = 0; i < 20; ++i) {
    BOOST_TEST((m.on_backoff_done() == action::list));
    BOOST_TEST((m.on_listed(loss(), {}) == action::backoff));
  }
  BOOST_TEST((m.on_backoff_done() == action::list));
  std::vector<std::string> children{mutex_node(guid_b, "0000000001"), mutex_node(guid_a, "0000000002")};
  BOOST_TEST((m.on_listed(ok(), children) == action::check_owner));
  BOOST_TEST((m.on_owner(ok(), 42, 9, 42) == action::remove));
  BOOST_TEST(m.target_path() == "/l/" + children[1]);
  BOOST_TEST((m.on_removed(loss()) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::remove));
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::closed));  // the acquire's own error
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_ends_when_no_node_was_made) {
  auto m = exhaust_while_create_unknown();
  m.on_backoff_done();
  std::vector<std::string> children{mutex_node(guid_b, "0000000001")};
  BOOST_TEST((m.on_listed(ok(), children) == action::done));  // never creates again
  BOOST_TEST(m.result() == make_error_code(dlock::error::closed));
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_ends_with_the_session) {
  auto m = exhaust_while_create_unknown();
  m.on_backoff_done();
  BOOST_TEST((m.on_listed(r(step_result::session_lost), {}) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::closed));
}

BOOST_AUTO_TEST_CASE(exhausted_while_create_unknown_leaves_a_foreign_node_alone) {
  auto m = exhaust_while_create_unknown();
  m.on_backoff_done();
  std::vector<std::string> children{mutex_node(guid_a, "0000000001")};
  BOOST_TEST((m.on_listed(ok(), children) == action::check_owner));
  BOOST_TEST((m.on_owner(ok(), 41, 9, 42) == action::done));
}

BOOST_AUTO_TEST_CASE(lost_create_that_never_happened_creates_again) {
  auto m = machine();
  m.start();
  m.on_created(loss(), "", 0, loss(), {});
  m.on_backoff_done();
  std::vector<std::string> children{mutex_node(guid_b, "0000000003")};
  BOOST_TEST((m.on_listed(ok(), children) == action::create_and_list));
}

BOOST_AUTO_TEST_CASE(retries_are_bounded_with_growing_backoff) {
  acquire_machine m({lock_role::exclusive, "/l", true, {3, std::chrono::milliseconds(10), std::chrono::milliseconds(25)}},
                    guid_a);
  m.start();
  m.on_created(ok(), "/l/" + mutex_node(guid_a, "0000000001"), 1, loss(), {});
  BOOST_TEST(m.delay().count() == 10);
  BOOST_TEST((m.on_backoff_done() == action::list));
  BOOST_TEST((m.on_listed(loss(), {}) == action::backoff));
  BOOST_TEST(m.delay().count() == 20);
  m.on_backoff_done();
  BOOST_TEST((m.on_listed(loss(), {}) == action::backoff));
  BOOST_TEST(m.delay().count() == 25);
  m.on_backoff_done();
  // Exhausted: our node is deleted before failing.
  BOOST_TEST((m.on_listed(loss(), {}) == action::remove));
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::closed));
}

BOOST_AUTO_TEST_CASE(cancel_before_create_reply_deletes_the_late_node) {
  auto m = machine();
  m.start();
  BOOST_TEST(!m.cancel(boost::asio::error::operation_aborted));  // the create reply drives it
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000001");
  std::vector<std::string> children{mutex_node(guid_a, "0000000001")};
  BOOST_TEST((m.on_created(ok(), own, 1, ok(), children) == action::remove));
  BOOST_TEST(m.target_path() == own);
  BOOST_TEST((m.on_removed(r(step_result::connection_loss)) == action::backoff));  // cleanup retries
  BOOST_TEST((m.on_backoff_done() == action::remove));
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(cancel_while_waiting_interrupts_and_cleans_up) {
  auto m = machine();
  m.start();
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000005");
  std::vector<std::string> children{mutex_node(guid_b, "0000000004"), mutex_node(guid_a, "0000000005")};
  m.on_created(ok(), own, 1, ok(), children);
  m.on_watch_set(ok());
  BOOST_TEST(m.cancel(make_error_code(dlock::error::timed_out)));
  BOOST_TEST(!m.cancel(boost::asio::error::operation_aborted));  // once
  BOOST_TEST((m.on_watch_fired(r(step_result::aborted)) == action::remove));
  BOOST_TEST((m.on_removed(r(step_result::no_node)) == action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::timed_out));
}

BOOST_AUTO_TEST_CASE(cancel_with_lost_create_reply_still_finds_and_deletes_node) {
  auto m = machine();
  m.start();
  m.cancel(boost::asio::error::operation_aborted);
  BOOST_TEST((m.on_created(loss(), "", 0, loss(), {}) == action::backoff));
  BOOST_TEST((m.on_backoff_done() == action::list));
  std::vector<std::string> children{mutex_node(guid_a, "0000000003")};
  BOOST_TEST((m.on_listed(ok(), children) == action::check_owner));
  BOOST_TEST((m.on_owner(ok(), 42, 9, 42) == action::remove));
  BOOST_TEST((m.on_removed(ok()) == action::done));
  BOOST_TEST(m.result() == make_error_code(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(cancel_before_start_sends_nothing) {
  auto m = machine();
  m.cancel(boost::asio::error::operation_aborted);
  BOOST_TEST((m.start() == action::done));
  BOOST_TEST(m.result() == make_error_code(boost::asio::error::operation_aborted));
}

BOOST_AUTO_TEST_CASE(session_loss_while_waiting_fails_without_cleanup) {
  auto m = machine();
  m.start();
  auto own = "/locks/a/" + mutex_node(guid_a, "0000000005");
  std::vector<std::string> children{mutex_node(guid_b, "0000000004"), mutex_node(guid_a, "0000000005")};
  m.on_created(ok(), own, 1, ok(), children);
  m.on_watch_set(ok());
  BOOST_TEST((m.on_watch_fired(r(step_result::session_lost)) == action::done));
  BOOST_TEST(m.result());
  BOOST_TEST(m.own_path().empty());
}

BOOST_AUTO_TEST_CASE(own_node_missing_from_listing_is_gone) {
  auto m = machine();
  m.start();
  std::vector<std::string> children{mutex_node(guid_b, "0000000004")};
  BOOST_TEST((m.on_created(ok(), "/locks/a/" + mutex_node(guid_a, "0000000005"), 1, ok(), children) ==
              action::done));
  BOOST_TEST(m.result() == make_error_code(dlock::error::lost));
}

BOOST_AUTO_TEST_SUITE_END()
