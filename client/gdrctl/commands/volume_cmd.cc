// `gdrctl volume create NAME SIZE [--file] [--media OPTS] [--repeat SIZE] | delete NAME
// [--delete-file] | list`: the daemon's volumes at run time. create and delete go through its
// gdrstore.v1.Admin service (an admin=yes token when it has a token file); list is GetInfo's
// volumes, every page. Exit 1 when the daemon refuses, naming why.
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/message_json.h"
#include "client/gdrctl/size_flag.h"
#include "client/src/daemon_rpc.h"
#include "common/base/units.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdrctl {

namespace v1 = gdrstore::v1;

namespace {

int Refused(const char* rpc, const grpc::Status& s) {
  return Fail(gdrstore::FromGrpcStatus(s), std::string("volume: ") + rpc);
}

std::string Line(const v1::VolumeInfo& v) {
  return absl::StrCat(v.name(), "  ", gdr::FormatSize(v.size()), "  ", v.backing(),
                      v.read_only() ? "  read-only" : "", "\n");
}

class VolumeCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* volume = app.add_subcommand(
        "volume", "the daemon's volumes: make and delete them while it serves (its Admin "
                  "service; an admin=yes token when it has a token file), or list them");
    volume->require_subcommand(1);
    create_ = volume->add_subcommand("create", "make a volume, memory-backed or --file");
    create_->add_option("name", name_, "its name (segments of [A-Za-z0-9_.-] joined by '/')")
        ->required();
    AddSizeOption(create_, "size", &size_, "its size")->required();
    create_->add_flag("--file", file_,
                      "a file in the daemon's writable --volume-dir, at the path the name spells");
    create_->add_option("--media", media_,
                        "media options as --volume takes them: media=nvme-gen4,latency_us=80");
    AddSizeOption(create_, "--repeat", &repeat_,
                  "a memory volume backed by this many bytes, seen again every SIZE bytes "
                  "(--volume's repeat=; 0: every byte its own)");
    delete_ = volume->add_subcommand("delete", "take a volume away (ops in flight finish)");
    delete_->add_option("name", name_, "the volume")->required();
    delete_->add_flag("--delete-file", delete_file_,
                      "also remove its file (files in the writable --volume-dir only)");
    volume->add_subcommand("list", "every volume the daemon shows this caller");
    return volume;
  }

  int Run(const Context& ctx) override {
    absl::StatusOr<gdrstore::ClientOptions> o = ctx.target.ClientOptions();
    if (!o.ok()) return Fail(o.status(), "volume");
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(*o);
    if (!channel.ok()) return Fail(channel.status(), "volume");
    grpc::ClientContext call;
    call.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(ctx.global.timeout_ms)));
    const bool json = ctx.global.json;
    if (create_->parsed()) {
      v1::CreateVolumeRequest req;
      req.set_name(name_);
      req.set_size(size_);
      req.set_file(file_);
      // repeat travels with the media options, as --volume's options after NAME=SIZE.
      req.set_media(repeat_ == 0 ? media_
                                 : absl::StrCat(media_, media_.empty() ? "" : ",", "repeat=",
                                                repeat_));
      v1::CreateVolumeResponse resp;
      auto admin = v1::Admin::NewStub(*channel);
      if (grpc::Status s = admin->CreateVolume(&call, req, &resp); !s.ok()) {
        return Refused("CreateVolume", s);
      }
      const bool made = resp.created() || absl::StartsWith(resp.volume().backing(), "memory");
      std::cout << (json ? MessageJson(resp) + "\n"
                         : absl::StrCat(made ? "made " : "serving existing ", Line(resp.volume())));
      return 0;
    }
    if (delete_->parsed()) {
      v1::DeleteVolumeRequest req;
      req.set_name(name_);
      req.set_delete_file(delete_file_);
      v1::DeleteVolumeResponse resp;
      auto admin = v1::Admin::NewStub(*channel);
      if (grpc::Status s = admin->DeleteVolume(&call, req, &resp); !s.ok()) {
        return Refused("DeleteVolume", s);
      }
      std::cout << (json ? MessageJson(resp) + "\n" : absl::StrCat("deleted ", name_, "\n"));
      return 0;
    }
    // Every page of them (however many volumes), within the one timeout.
    auto store = v1::GdrStore::NewStub(*channel);
    absl::StatusOr<v1::GetInfoResponse> info =
        gdrstore::GetInfoPages(*store, v1::GetInfoRequest(), call.deadline());
    if (!info.ok()) return Fail(info.status(), "volume: GetInfo");
    if (json) {
      v1::GetInfoResponse only;
      *only.mutable_volumes() = std::move(*info->mutable_volumes());
      std::cout << MessageJson(only) << "\n";
      return 0;
    }
    std::cout << info->volumes_size() << " volume(s)\n";
    for (const v1::VolumeInfo& v : info->volumes()) std::cout << Line(v);
    return 0;
  }

 private:
  CLI::App* create_ = nullptr;
  CLI::App* delete_ = nullptr;
  std::string name_, media_;
  uint64_t size_ = 0, repeat_ = 0;
  bool file_ = false, delete_file_ = false;
};

}  // namespace

std::unique_ptr<Command> NewVolumeCommand() { return std::make_unique<VolumeCommand>(); }

}  // namespace gdrctl
