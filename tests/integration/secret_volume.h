// A Kubernetes Secret volume as the kubelet updates one: each file is a symlink through
// `..data`, which is pointed at a new timestamped directory with one rename. No signal follows.
// Shared by the tests of the daemon's and the agent's credential files.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gdr::integ {

class SecretVolume {
 public:
  // `dir` must exist; the volume's files appear in it at the first Publish.
  explicit SecretVolume(std::string dir) : dir_(std::move(dir)) {}
  // The Secret's new contents, file name -> text (mode 0600), swapped in the kubelet's way.
  void Publish(const std::map<std::string, std::string>& files) {
    const std::string gen = absl::StrCat("..2026_11_28_12_00_0", ++gens_);
    ASSERT_EQ(::mkdir((dir_ + "/" + gen).c_str(), 0755), 0);
    for (const auto& [name, text] : files) {
      const std::string path = dir_ + "/" + gen + "/" + name;
      std::ofstream(path, std::ios::trunc) << text;
      ::chmod(path.c_str(), 0600);
    }
    const std::string tmp = dir_ + "/..data_tmp";
    ASSERT_EQ(::symlink(gen.c_str(), tmp.c_str()), 0);
    ASSERT_EQ(::rename(tmp.c_str(), (dir_ + "/..data").c_str()), 0);
    for (const auto& [name, text] : files) {
      struct stat st;
      if (::lstat(path(name).c_str(), &st) == 0) continue;
      ASSERT_EQ(::symlink(("..data/" + name).c_str(), path(name).c_str()), 0);
    }
  }
  void Publish(const std::string& tokens) { Publish({{"tokens", tokens}}); }
  // A file of the volume, as a pod sees it (the symlink).
  std::string path(const std::string& name = "tokens") const { return dir_ + "/" + name; }

 private:
  const std::string dir_;
  int gens_ = 0;
};

}  // namespace gdr::integ
