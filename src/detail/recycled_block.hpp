// A speed trick (DLOCK_SPEED_TRICKS): the memory of a fan-out that just
// ended holds the next one. Under many clients a cycle's objects do not fit
// the data cache together, so a fresh block from malloc is cold; the block
// an answered attempt just left is hot, and the release that follows it
// (or, after a release, the next attempt) is built in it. One block is kept
// per thread, the last one given back, and of one size for every kind of
// fan-out: malloc's own caches are per size, so an attempt's block would
// never serve a release. Off under sanitizers, which must see every free.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(__SANITIZE_HWADDRESS__)
#define DLOCK_DETAIL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer) || \
    __has_feature(hwaddress_sanitizer)
#define DLOCK_DETAIL_SANITIZED 1
#endif
#endif

namespace dlock::detail {

#if defined(DLOCK_NO_SPEED_TRICKS) || defined(DLOCK_DETAIL_SANITIZED)
inline constexpr bool recycle_blocks = false;
#else
inline constexpr bool recycle_blocks = true;
#endif

/// The size of a recycled block: room for the largest fan-out (a Redlock
/// attempt with its shared_ptr control block; make_fanout asserts it fits).
inline constexpr std::size_t recycled_block_size = 1024;

/// The rule, on a slot of one kept block (`kept`, null when none), whatever
/// `recycle_blocks` says: what fits is served from a block of
/// recycled_block_size, the kept one if any; what is given back is kept in
/// place of the one kept before, which is freed (the last one is the hot
/// one). Anything larger is new and freed.
void* take_from(void*& kept, std::size_t bytes);
void give_to(void*& kept, void* block, std::size_t bytes) noexcept;

/// `bytes` of memory, from this thread's slot when recycled (else new).
void* take_block(std::size_t bytes);
/// Gives back what take_block(`bytes`) returned, with the same `bytes`.
void give_block(void* block, std::size_t bytes) noexcept;

/// An allocator for std::allocate_shared over take_block and give_block.
template <class T>
struct recycling_allocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "a block is aligned as operator new's");
  using value_type = T;
  recycling_allocator() = default;
  template <class U>
  recycling_allocator(const recycling_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(take_block(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { give_block(p, n * sizeof(T)); }
  friend bool operator==(recycling_allocator, recycling_allocator) noexcept { return true; }
};

}  // namespace dlock::detail
