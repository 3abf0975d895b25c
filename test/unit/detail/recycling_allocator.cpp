// The per-thread block cache behind the recycling allocator, and the
// allocator as std::allocate_shared uses it.
#include "detail/recycling_allocator.hpp"

#include <boost/test/unit_test.hpp>

#include <memory>
#include <thread>
#include <vector>

using dlock::detail::block_cache;
// Recycling on, whatever the build: sanitized builds turn it off in the library.
template <class T>
using recycling_allocator = dlock::detail::recycling_allocator<T, true>;

BOOST_AUTO_TEST_SUITE(recycling_allocator_suite)

// A sanitizer must see every free: g++ and clang say it is on differently
// (__SANITIZE_ADDRESS__, __has_feature), and the library must hear both.
BOOST_AUTO_TEST_CASE(sanitized_builds_recycle_nothing) {
  BOOST_TEST(dlock::detail::recycle_blocks == !DLOCK_TEST_SANITIZED);
}

BOOST_AUTO_TEST_CASE(last_kept_block_is_taken_first) {
  block_cache cache;
  BOOST_TEST(cache.take() == nullptr);
  void* a = ::operator new(32);
  void* b = ::operator new(32);
  BOOST_TEST(cache.keep(a));
  BOOST_TEST(cache.keep(b));
  BOOST_TEST(cache.take() == b);
  BOOST_TEST(cache.take() == a);
  BOOST_TEST(cache.take() == nullptr);
  ::operator delete(a);
  ::operator delete(b);
}

BOOST_AUTO_TEST_CASE(full_cache_leaves_the_block_to_the_caller) {
  std::vector<void*> blocks;
  {
    block_cache cache;
    for (std::size_t i = 0; i < block_cache::capacity; ++i) {
      blocks.push_back(::operator new(16));
      BOOST_TEST(cache.keep(blocks.back()));
    }
    void* extra = ::operator new(16);
    BOOST_TEST(!cache.keep(extra));
    BOOST_TEST(cache.size() == block_cache::capacity);
    ::operator delete(extra);
  }  // the cache frees what it kept (LeakSanitizer would say otherwise)
}

struct counted {
  explicit counted(int v) : value(v) { ++alive; }
  ~counted() { --alive; }
  int value;
  static inline int alive = 0;
};

BOOST_AUTO_TEST_CASE(allocate_shared_constructs_and_destroys) {
  {
    auto a = std::allocate_shared<counted>(recycling_allocator<counted>(), 1);
    auto b = std::allocate_shared<counted>(recycling_allocator<counted>(), 2);
    BOOST_TEST(counted::alive == 2);
    a.reset();
    auto c = std::allocate_shared<counted>(recycling_allocator<counted>(), 3);
    BOOST_TEST(b->value == 2);
    BOOST_TEST(c->value == 3);
  }
  BOOST_TEST(counted::alive == 0);
}

// A block dropped is the next one made (this thread's cache, last in first out).
BOOST_AUTO_TEST_CASE(dropped_block_is_reused) {
  recycling_allocator<counted> allocator;
  counted* first = allocator.allocate(1);
  allocator.deallocate(first, 1);
  counted* second = allocator.allocate(1);
  BOOST_TEST(second == first);
  allocator.deallocate(second, 1);
}

// An object made on one thread and dropped on another: the block joins the
// second thread's cache, which frees it when that thread ends.
BOOST_AUTO_TEST_CASE(block_freed_on_another_thread) {
  auto made = std::allocate_shared<counted>(recycling_allocator<counted>(), 7);
  std::thread other([p = std::move(made)]() mutable { p.reset(); });
  other.join();
  BOOST_TEST(counted::alive == 0);
}

BOOST_AUTO_TEST_SUITE_END()
