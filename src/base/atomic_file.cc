#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "frugal/base.h"

namespace frugal {
namespace {

std::string Reason() { return std::strerror(errno); }

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  FRUGAL_REQUIRE(!path_.empty(), "cannot write a file with no name");
  struct stat st;
  FRUGAL_REQUIRE(::stat(path_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode), path_,
                 ": is a folder; give the name of a file in it");
  const size_t slash = path_.rfind('/');
  tmp_ = DirOf(path_) + "/." + path_.substr(slash == std::string::npos ? 0 : slash + 1) + ".tmp-" +
         std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FRUGAL_REQUIRE(fd_ >= 0, path_, ": cannot write (", Reason(), " for ", tmp_,
                 "): check that the folder exists and is writable");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::Write(const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(bytes, size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    FRUGAL_REQUIRE(w > 0, path_, ": cannot write (", Reason(), "); free some space or write elsewhere");
    p += w;
    bytes -= static_cast<size_t>(w);
  }
}

void AtomicFile::Commit() {
  FRUGAL_REQUIRE(::fsync(fd_) == 0, path_, ": cannot write (", Reason(), " syncing ", tmp_, ")");
  const int rc = ::close(fd_);
  fd_ = -1;
  FRUGAL_REQUIRE(rc == 0, path_, ": cannot write (", Reason(), " closing ", tmp_, ")");
  FRUGAL_REQUIRE(::rename(tmp_.c_str(), path_.c_str()) == 0, path_, ": cannot write (", Reason(), " renaming ", tmp_,
                 " to it)");
  tmp_.clear();
  const int dir = ::open(DirOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  FRUGAL_REQUIRE(dir >= 0, path_, ": written, but its folder cannot be opened to sync it (", Reason(), ")");
  const int synced = ::fsync(dir);
  ::close(dir);
  FRUGAL_REQUIRE(synced == 0, path_, ": written, but its folder cannot be synced (", Reason(), ")");
}

void AtomicFile::Abandon() {
  ::close(fd_);
  fd_ = -1;
  tmp_.clear();
}

std::string ReadFileBytes(const std::string& path, const std::string& what, const std::string& hint) {
  struct stat st;
  FRUGAL_REQUIRE(::stat(path.c_str(), &st) == 0, path, ": cannot open the ", what, " (", Reason(), "; check the path",
                 hint.empty() ? "" : ": ", hint, ")");
  FRUGAL_REQUIRE(!S_ISDIR(st.st_mode), path, ": is a folder; give the ", what, " file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FRUGAL_REQUIRE(fd >= 0, path, ": cannot open the ", what, " (", Reason(), ")");
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : 0;
      ::close(fd);
      errno = err;
      FRUGAL_REQUIRE(n == 0, path, ": cannot read the ", what, " (", Reason(), ")");
      return bytes;
    }
    bytes.append(buf, static_cast<size_t>(n));
  }
}

void WriteFileAtomic(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  f.Write(bytes.data(), bytes.size());
  f.Commit();
}

}  // namespace frugal
