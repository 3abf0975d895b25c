// An allocator for the objects a lock makes and drops once per operation
// (a Redlock acquire's operation and attempt, a release): freed blocks wait
// in a per-thread cache for the next object of the same type.
//
// Why not malloc alone: glibc keeps 7 freed blocks of a size per thread;
// 64 clients' operations in flight overflow that, and every allocation then
// takes malloc's slow path (RESULTS.md, issue #14: about 600 instructions a
// block). Why not asio::recycling_allocator: it keeps 2 blocks per thread,
// for every purpose at once, and its size is a macro global to the program.
//
// A block freed on another thread than its own joins that thread's cache:
// each cache is only ever touched by its own thread. Under AddressSanitizer
// or ThreadSanitizer nothing is cached, so that they see every free.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>

namespace dlock::detail {

/// Up to `capacity` freed blocks of one size, last freed first reused.
class block_cache {
 public:
  static constexpr std::size_t capacity = 64;

  block_cache() = default;
  ~block_cache() {
    for (std::size_t i = 0; i < size_; ++i) ::operator delete(blocks_[i]);
  }
  block_cache(const block_cache&) = delete;
  block_cache& operator=(const block_cache&) = delete;

  /// A cached block, or null.
  void* take() noexcept { return size_ == 0 ? nullptr : blocks_[--size_]; }
  /// Keeps `block` (true), or leaves it to the caller when full.
  bool keep(void* block) noexcept {
    if (size_ == capacity) return false;
    blocks_[size_++] = block;
    return true;
  }
  std::size_t size() const noexcept { return size_; }

 private:
  std::array<void*, capacity> blocks_{};
  std::size_t size_ = 0;
};

// g++ says a sanitizer is on with __SANITIZE_*__, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLOCK_DETAIL_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DLOCK_DETAIL_SANITIZED 1
#endif
#endif
#ifdef DLOCK_DETAIL_SANITIZED
inline constexpr bool recycle_blocks = false;
#undef DLOCK_DETAIL_SANITIZED
#else
inline constexpr bool recycle_blocks = true;
#endif

/// `Recycle`: false passes every block to the heap (a test may force true).
template <class T, bool Recycle = recycle_blocks>
class recycling_allocator {
 public:
  using value_type = T;
  template <class U>
  struct rebind {
    using other = recycling_allocator<U, Recycle>;
  };

  recycling_allocator() noexcept = default;
  template <class U>
  recycling_allocator(const recycling_allocator<U, Recycle>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n == 1)
      if (block_cache* cache = this_thread_cache())
        if (void* block = cache->take()) return static_cast<T*>(block);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n == 1)
      if (block_cache* cache = this_thread_cache())
        if (cache->keep(p)) return;
    ::operator delete(p);
  }

  friend bool operator==(const recycling_allocator&, const recycling_allocator&) noexcept { return true; }

 private:
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "over-aligned types are not cached");

  // One cache per type and thread; none once the thread's cache is gone (a
  // block freed while the thread exits goes back to the heap).
  static block_cache* this_thread_cache() noexcept {
    if constexpr (!Recycle) {
      return nullptr;
    } else {
      static thread_local bool gone = false;  // constant-initialized: readable after `cache` is destroyed
      struct owned : block_cache {
        ~owned() { gone = true; }
      };
      if (gone) return nullptr;
      static thread_local owned cache;
      return &cache;
    }
  }
};

/// std::make_shared, with the block from (and back to) this thread's cache.
template <class T, class... Args>
std::shared_ptr<T> make_shared_recycled(Args&&... args) {
  return std::allocate_shared<T>(recycling_allocator<T>(), std::forward<Args>(args)...);
}

}  // namespace dlock::detail
