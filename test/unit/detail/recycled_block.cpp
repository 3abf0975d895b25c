// The recycled block (a speed trick): one block kept per thread, for the
// next lock operation whatever its kind; off under sanitizers and with
// -DDLOCK_SPEED_TRICKS=OFF, where every block is new and freed.
#include "detail/recycled_block.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <memory>
#include <thread>

using namespace dlock::detail;

namespace {

struct small_operation {
  std::array<char, 100> bytes{};
};
struct large_operation {
  std::array<char, 700> bytes{};
};

// Which block malloc hands out is its own business: these run only where
// blocks are recycled (the sanitizer builds check the other case).
const auto when_recycled = boost::unit_test::enable_if<recycle_blocks>();

}  // namespace

BOOST_AUTO_TEST_SUITE(recycled_block)

BOOST_AUTO_TEST_CASE(without_recycling_every_block_is_new_and_freed,
                     *boost::unit_test::enable_if<!recycle_blocks>()) {
  // Under ASan a block kept after its free, or freed twice, is reported.
  auto* block = static_cast<char*>(take_block(100));
  block[99] = 1;
  give_block(block, 100);
  auto* large = static_cast<char*>(take_block(recycled_block_size + 1));
  large[recycled_block_size] = 1;
  give_block(large, recycled_block_size + 1);
}

BOOST_AUTO_TEST_CASE(a_block_given_back_holds_the_next_operation_of_any_kind, *when_recycled) {
  auto* block = take_block(100);
  give_block(block, 100);
  auto* next = take_block(recycled_block_size);
  BOOST_TEST(next == block);
  give_block(next, recycled_block_size);
}

BOOST_AUTO_TEST_CASE(one_block_is_kept_the_second_is_freed, *when_recycled) {
  auto* first = take_block(64);
  auto* second = take_block(64);
  BOOST_TEST(first != second);
  give_block(first, 64);
  give_block(second, 64);  // freed: one is kept already
  auto* again = take_block(64);
  auto* fresh = take_block(64);
  BOOST_TEST(again == first);
  BOOST_TEST(fresh != first);
  give_block(fresh, 64);
  give_block(again, 64);
}

BOOST_AUTO_TEST_CASE(a_block_larger_than_the_size_is_never_kept, *when_recycled) {
  auto* kept = take_block(64);
  give_block(kept, 64);
  auto* large = take_block(recycled_block_size + 1);
  BOOST_TEST(large != kept, "the kept block is too small for it");
  give_block(large, recycled_block_size + 1);
  auto* next = take_block(64);
  BOOST_TEST(next == kept, "still kept");
  give_block(next, 64);
}

BOOST_AUTO_TEST_CASE(another_thread_does_not_take_this_threads_block, *when_recycled) {
  auto* kept = take_block(64);
  give_block(kept, 64);
  void* taken_there = nullptr;
  std::thread([&] {
    taken_there = take_block(64);
    give_block(taken_there, 64);  // kept there, freed when that thread exits
  }).join();
  BOOST_TEST(taken_there != kept);
  auto* here = take_block(64);
  BOOST_TEST(here == kept);
  give_block(here, 64);
}

BOOST_AUTO_TEST_CASE(allocate_shared_takes_and_gives_back_the_block, *when_recycled) {
  char* object = nullptr;
  {
    auto operation = std::allocate_shared<small_operation>(recycling_allocator<small_operation>());
    operation->bytes.fill('s');
    object = reinterpret_cast<char*>(operation.get());
  }
  // The block the operation and its control block (before it) were in.
  auto* block = static_cast<char*>(take_block(sizeof(large_operation)));
  bool same_block = block <= object && object < block + 64;
  BOOST_TEST(same_block);
  give_block(block, sizeof(large_operation));
}

BOOST_AUTO_TEST_SUITE_END()
