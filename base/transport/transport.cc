#include "base/transport/transport.h"

namespace plexus {
namespace {

thread_local bool sends_awaited = false;

}  // namespace

bool SendsAwaitedByCaller() { return sends_awaited; }

ScopedSendsAwaited::ScopedSendsAwaited() : before_(sends_awaited) { sends_awaited = true; }

ScopedSendsAwaited::~ScopedSendsAwaited() { sends_awaited = before_; }

}  // namespace plexus
