// The recycled block (a speed trick): one block kept per thread, the last
// one given back, for the next fan-out whatever its kind; off under
// sanitizers and with -DDLOCK_SPEED_TRICKS=OFF. The slot's rule is tested on
// a slot of the test's own, so that ASan checks it too: every block is
// written whole (a block smaller than recycled_block_size overflows), and a
// block neither kept nor freed leaks.
#include "detail/recycled_block.hpp"

#include <boost/test/unit_test.hpp>

#include <array>
#include <cstring>
#include <cstdint>
#include <memory>
#include <thread>

using namespace dlock::detail;

namespace {

void fill(void* block, std::size_t bytes) { std::memset(block, 0x5a, bytes); }

struct operation {
  std::array<char, 100> bytes{};
};

// Which block malloc hands out is its own business: these run only where
// this thread's blocks are recycled.
const auto when_recycled = boost::unit_test::enable_if<recycle_blocks>();

}  // namespace

BOOST_AUTO_TEST_SUITE(recycled_block)

BOOST_AUTO_TEST_CASE(what_fits_is_served_from_a_whole_block_and_kept) {
  void* kept = nullptr;
  auto* small = take_from(kept, 100);
  fill(small, recycled_block_size);
  give_to(kept, small, 100);
  BOOST_TEST(kept == small);
  auto* whole = take_from(kept, recycled_block_size);
  BOOST_TEST(whole == small, "the kept block serves any size that fits");
  BOOST_TEST(kept == nullptr);
  fill(whole, recycled_block_size);
  give_to(kept, whole, recycled_block_size);
  ::operator delete(kept);
}

BOOST_AUTO_TEST_CASE(the_last_block_given_back_is_kept_the_one_before_freed) {
  void* kept = nullptr;
  auto* first = take_from(kept, 64);
  auto* second = take_from(kept, 64);
  BOOST_TEST(first != second);
  fill(first, recycled_block_size);
  fill(second, recycled_block_size);
  give_to(kept, first, 64);
  give_to(kept, second, 64);  // first is freed (else LSan reports it)
  BOOST_TEST(kept == second, "the hot one");
  auto* again = take_from(kept, 64);
  BOOST_TEST(again == second);
  give_to(kept, again, 64);
  ::operator delete(kept);
}

BOOST_AUTO_TEST_CASE(a_block_larger_than_the_size_is_never_kept) {
  void* kept = nullptr;
  auto* small = take_from(kept, 64);
  give_to(kept, small, 64);
  auto* large = take_from(kept, recycled_block_size + 1);
  BOOST_TEST(large != small, "the kept block is too small for it");
  BOOST_TEST(kept == small);
  fill(large, recycled_block_size + 1);
  give_to(kept, large, recycled_block_size + 1);  // freed
  BOOST_TEST(kept == small, "still kept");
  ::operator delete(kept);
}

BOOST_AUTO_TEST_CASE(this_threads_blocks_are_whole_and_freed) {
  // Recycled or not, a block serves what was asked, and nothing leaks.
  auto* block = take_block(100);
  fill(block, 100);
  give_block(block, 100);
  auto* large = take_block(recycled_block_size + 1);
  fill(large, recycled_block_size + 1);
  give_block(large, recycled_block_size + 1);
  std::thread([] { give_block(take_block(64), 64); }).join();  // kept there, freed at its exit
}

BOOST_AUTO_TEST_CASE(another_thread_does_not_take_this_threads_block, *when_recycled) {
  auto* kept_here = take_block(64);
  give_block(kept_here, 64);
  void* taken_there = nullptr;
  std::thread([&] {
    taken_there = take_block(64);
    give_block(taken_there, 64);
  }).join();
  BOOST_TEST(taken_there != kept_here);
  auto* here = take_block(64);
  BOOST_TEST(here == kept_here);
  give_block(here, 64);
}

BOOST_AUTO_TEST_CASE(allocate_shared_takes_and_gives_back_the_block, *when_recycled) {
  std::uintptr_t object = 0;
  {
    auto made = std::allocate_shared<operation>(recycling_allocator<operation>());
    made->bytes.fill('s');
    object = reinterpret_cast<std::uintptr_t>(made.get());
  }
  // The block the operation and its control block (before it) were in.
  auto* block = take_block(recycled_block_size);
  auto start = reinterpret_cast<std::uintptr_t>(block);
  BOOST_TEST((start <= object && object < start + 64));
  give_block(block, recycled_block_size);
}

BOOST_AUTO_TEST_SUITE_END()
