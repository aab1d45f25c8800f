// Keeping an in-place all-reduce's input for callers that must put it back if the operation
// fails (the elastic communicator). With CollectiveContext::KeepOriginals set, an all-reduce
// copies every byte of its buffer to the originals (same offset) before it first overwrites it:
// a schedule whose catalog row says keeps_originals does so itself, where it overwrites (the
// arena's copy-out, when the bytes are in cache anyway); for every other one AllReduceInPlace
// copies the whole buffer first. Either way the buffer beyond ctx.originals_kept() still holds
// its input, so a failure is undone by copying back the kept prefix.
#ifndef PLEXUS_ALGORITHMS_KEEP_ORIGINALS_H_
#define PLEXUS_ALGORITHMS_KEEP_ORIGINALS_H_

#include <cstddef>
#include <cstdint>

namespace plexus::algorithms {

class CollectiveContext;

// memcpy for copies nobody reads unless something fails: streaming stores on x86-64, so it does
// not push out of the caches the data the reduction reads next. `to` and `from` do not overlap.
void CopyAside(uint8_t* to, const uint8_t* from, size_t bytes);

// data = from, after copying data's old contents to `save` (CopyAside), in cache-sized chunks so
// each chunk of `data` is read while the write needs its lines anyway.
void SaveThenOverwrite(uint8_t* data, const uint8_t* from, uint8_t* save, size_t bytes);

// Copies data[kept, bytes) to the context's originals, unless it has none or they hold that
// much already; afterwards ctx.originals_kept() >= bytes.
void KeepRemainingOriginals(CollectiveContext& ctx, const void* data, size_t bytes);

}  // namespace plexus::algorithms

#endif  // PLEXUS_ALGORITHMS_KEEP_ORIGINALS_H_
