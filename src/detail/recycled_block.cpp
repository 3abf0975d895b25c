#include "detail/recycled_block.hpp"

#include <new>
#include <utility>

namespace dlock::detail {

void* take_from(void*& kept, std::size_t bytes) {
  if (bytes > recycled_block_size) return ::operator new(bytes);
  if (kept) return std::exchange(kept, nullptr);
  return ::operator new(recycled_block_size);
}

void give_to(void*& kept, void* block, std::size_t bytes) noexcept {
  if (bytes > recycled_block_size) return ::operator delete(block);
  ::operator delete(std::exchange(kept, block));  // null when none was kept
}

namespace {

// Who frees this thread's kept block at its exit: nobody yet, the owner
// below, or nobody any more (it was destroyed: nothing is kept after it).
enum class keeper : unsigned char { none, owner, gone };

// Trivial, so never destroyed: still readable while other thread-local
// objects are destroyed at the thread's exit (and give blocks back).
thread_local void* kept = nullptr;
thread_local keeper kept_by = keeper::none;

// Made at the thread's first take, before any of its fan-outs exist. Blocks
// given back after it is gone (by static objects destroyed after the
// thread's locals) are freed at once.
struct kept_block_owner {
  kept_block_owner() noexcept { kept_by = keeper::owner; }
  ~kept_block_owner() {
    ::operator delete(std::exchange(kept, nullptr));
    kept_by = keeper::gone;
  }
};

void own_the_kept_block() { static thread_local kept_block_owner owner; }

}  // namespace

void* take_block(std::size_t bytes) {
  if constexpr (!recycle_blocks) return ::operator new(bytes);
  if (kept_by == keeper::none) own_the_kept_block();
  return take_from(kept, bytes);  // none kept once gone: a new block
}

void give_block(void* block, std::size_t bytes) noexcept {
  if constexpr (!recycle_blocks) return ::operator delete(block);
  if (kept_by != keeper::owner) return ::operator delete(block);
  give_to(kept, block, bytes);
}

}  // namespace dlock::detail
