#include "detail/recycled_block.hpp"

#include <new>
#include <utility>

namespace dlock::detail {
namespace {

// Trivial, so never destroyed: still readable while other thread-local
// objects are destroyed at the thread's exit (and give blocks back).
thread_local void* kept = nullptr;
thread_local bool exited = false;

// Frees the kept block when the thread exits; set up by the first block kept.
struct kept_block_owner {
  ~kept_block_owner() {
    ::operator delete(kept);
    kept = nullptr;
    exited = true;
  }
};

bool recycled(std::size_t bytes) noexcept { return recycle_blocks && bytes <= recycled_block_size; }

}  // namespace

void* take_block(std::size_t bytes) {
  if (!recycled(bytes)) return ::operator new(bytes);
  if (kept) return std::exchange(kept, nullptr);
  return ::operator new(recycled_block_size);
}

void give_block(void* block, std::size_t bytes) noexcept {
  if (!recycled(bytes) || kept || exited) return ::operator delete(block);
  static thread_local kept_block_owner owner;
  kept = block;
}

}  // namespace dlock::detail
