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

// Trivial, so never destroyed: still readable while other thread-local
// objects are destroyed at the thread's exit (and give blocks back).
thread_local void* kept = nullptr;
thread_local bool owned = false;   // the owner below exists on this thread
thread_local bool exited = false;  // and was destroyed: nothing is kept any more

// Frees the kept block when the thread exits. Made at the thread's first
// take, before any of its fan-outs exist. Blocks given back after it is gone
// (by static objects destroyed after the thread's locals) are freed at once.
struct kept_block_owner {
  kept_block_owner() noexcept { owned = true; }
  ~kept_block_owner() {
    ::operator delete(std::exchange(kept, nullptr));
    exited = true;
  }
};

void own_the_kept_block() { static thread_local kept_block_owner owner; }

}  // namespace

void* take_block(std::size_t bytes) {
  if constexpr (!recycle_blocks) return ::operator new(bytes);
  if (!owned && !exited) own_the_kept_block();
  return take_from(kept, bytes);
}

void give_block(void* block, std::size_t bytes) noexcept {
  if (!recycle_blocks || !owned || exited || bytes > recycled_block_size) return ::operator delete(block);
  give_to(kept, block, bytes);
}

}  // namespace dlock::detail
