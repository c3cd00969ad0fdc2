// POSIX shared memory across the ranks of a host.
#include "dist/host_shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace deepinfer::dist {
namespace {

constexpr size_t kHostNameBytes = 256;

}  // namespace

SharedRegion::~SharedRegion() {
    if (data_ && bytes_) munmap(data_, bytes_);
}

std::string shared_region_name(const std::string& key) {
    std::string name = "/deepinfer-";
    for (char ch : key) name.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-');
    return name.substr(0, 250);
}

Expected<std::unique_ptr<Comm>> split_by_host(Comm& world) {
    std::vector<char> mine(kHostNameBytes, 0), all(kHostNameBytes * world.size());
    gethostname(mine.data(), kHostNameBytes - 1);
    DI_RETURN_IF_ERROR(world.all_gather(mine.data(), kHostNameBytes, all.data()));
    // Color = index of the first rank with the same host name (exact, no hash collisions).
    int color = world.rank();
    for (int r = 0; r < world.size(); ++r)
        if (std::strncmp(all.data() + r * kHostNameBytes, mine.data(), kHostNameBytes) == 0) {
            color = r;
            break;
        }
    return world.split(color, world.rank());
}

Expected<std::unique_ptr<SharedRegion>> share_on_host(Comm& host, const std::string& key, size_t bytes,
                                                      const std::function<void(uint8_t*)>& fill) {
    const std::string name = shared_region_name(key);
    int32_t ok = 1;
    void* map = nullptr;
    if (host.rank() == 0) {
        unlink_stale_regions();
        int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) ok = 0;
        if (ok) {
            map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (map == MAP_FAILED) ok = 0;
        }
        if (fd >= 0) close(fd);
        if (ok) {
            fill(static_cast<uint8_t*>(map));
            mprotect(map, bytes, PROT_READ);
        } else {
            shm_unlink(name.c_str());
        }
    }
    // Publish (or report the failure) before the others open the name.
    DI_RETURN_IF_ERROR(host.broadcast(&ok, sizeof(ok), 0));
    if (!ok) return error(StatusCode::kIoError, "{}: the host's first rank could not create {} bytes of shared memory: {}",
                          name, bytes, std::strerror(errno));
    std::string failure;
    if (host.rank() != 0) {
        int fd = shm_open(name.c_str(), O_RDONLY, 0);
        struct stat st {};
        if (fd < 0) failure = "cannot open: " + std::string(std::strerror(errno));
        else if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes)
            failure = "size " + std::to_string(st.st_size) + ", expected " + std::to_string(bytes);
        if (failure.empty()) {
            map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
            if (map == MAP_FAILED) failure = "mmap failed: " + std::string(std::strerror(errno));
        }
        if (fd >= 0) close(fd);
    }
    // Everyone has it mapped (or failed): the name can go.
    int32_t mapped = failure.empty() ? 1 : 0;
    std::vector<int32_t> all(host.size());
    Status s = host.all_gather(&mapped, sizeof(mapped), all.data());
    if (host.rank() == 0) shm_unlink(name.c_str());
    DI_RETURN_IF_ERROR(s);
    for (int r = 0; r < host.size(); ++r)
        if (!all[r]) {
            if (map && map != MAP_FAILED) munmap(map, bytes);
            return error(StatusCode::kIoError, "{}: rank {} of the host could not map the shared segment{}", name, r,
                         failure.empty() ? "" : ": " + failure);
        }
    return std::make_unique<SharedRegion>(static_cast<uint8_t*>(map), bytes);
}

void unlink_stale_regions() {
    // Segments are named /deepinfer-<pid of the creating rank>-...; a dead creator means a crashed set-up.
    DIR* dir = opendir("/dev/shm");
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
        const std::string file = e->d_name;
        if (file.rfind("deepinfer-", 0) != 0) continue;
        const long pid = std::strtol(file.c_str() + 10, nullptr, 10);
        if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) shm_unlink(("/" + file).c_str());
    }
    closedir(dir);
}

}  // namespace deepinfer::dist
