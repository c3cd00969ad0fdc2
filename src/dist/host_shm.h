// Data shared by the ranks of one host through POSIX shared memory (the Engram tables, ~200 GB in the
// release, are loaded once per host, not once per rank). The host's first rank creates the segment under a
// name derived from `key`, fills it and publishes it; the others open it and check its size; once every
// rank has it mapped the name is unlinked, so nothing is left behind when the job ends or crashes later.
// Names start with the creating rank's pid; a leftover of a run that crashed during set-up (its creator is
// dead) is unlinked by the next run before it creates its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dist/comm.h"

namespace deepinfer::dist {

class SharedRegion {
   public:
    SharedRegion(uint8_t* data, size_t bytes) : data_(data), bytes_(bytes) {}
    ~SharedRegion();
    SharedRegion(const SharedRegion&) = delete;
    SharedRegion& operator=(const SharedRegion&) = delete;
    const uint8_t* data() const { return data_; }
    size_t size() const { return bytes_; }

   private:
    uint8_t* data_;
    size_t bytes_;
};

// The ranks of `world` on this host, as a sub-group (collective over world; ranks grouped by host name).
Expected<std::unique_ptr<Comm>> split_by_host(Comm& world);

// Collective over `host`: rank 0 of host creates `bytes` of shared memory and calls fill(data) on it; every
// rank returns a read-only mapping. The segment's name is "/deepinfer-<key>".
Expected<std::unique_ptr<SharedRegion>> share_on_host(Comm& host, const std::string& key, size_t bytes,
                                                      const std::function<void(uint8_t*)>& fill);

// The POSIX name share_on_host uses for `key` (tests check it is gone afterwards). Keys must start with
// the creating rank's pid ("<pid>-...").
std::string shared_region_name(const std::string& key);

// Unlink /dev/shm/deepinfer-<pid>-* segments whose creating process no longer exists.
void unlink_stale_regions();

}  // namespace deepinfer::dist
