#include "base/net/host_identity.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace plexus::net {

std::string NetworkHostIdentity() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, boot_id);
  struct stat netns = {};
  const uint64_t inode = stat("/proc/self/ns/net", &netns) == 0 ? netns.st_ino : 0;
  return absl::StrCat(host, "/", absl::StripAsciiWhitespace(boot_id), "/", inode);
}

}  // namespace plexus::net
