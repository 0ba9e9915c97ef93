// `gdrctl cluster status`, `gdrctl cluster create-volume NAME` and `delete-volume NAME`: the
// cluster of the --cluster / --cluster-file target, its members and volumes.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/size_flag.h"
#include "client/src/cluster/layout.h"
#include "client/src/cluster/status_json.h"
#include "common/base/units.h"

namespace gdrctl {
namespace {

int ClusterStatus(gdrstore::ClusterClient& c, bool json, std::ostream& out) {
  const std::vector<gdrstore::ClusterMemberStatus> members = c.Members();
  const std::vector<gdrstore::v1::ClusterVolume> volumes = c.Volumes();
  size_t healthy = 0;
  for (const auto& m : members) healthy += m.present && m.healthy;
  if (json) {
    out << gdr::cluster::StatusJson(c.source(), members, volumes) << "\n";
  } else {
    out << "cluster " << c.source() << ": " << members.size() << " members known, " << healthy
        << " present and healthy\n";
    out << absl::StrFormat("  %-16s %-22s %-8s %-9s %-9s %-10s %s\n", "member", "address",
                           "present", "health", "lease", "version", "volumes");
    for (const auto& m : members) {
      std::vector<std::string> vols;
      for (const auto& v : m.entry.volumes()) {
        vols.push_back(absl::StrCat(v.name(), " ", gdr::FormatSize(v.size())));
      }
      out << absl::StrFormat("  %-16s %-22s %-8s %-9s %-9s %-10s %s\n", m.entry.id(),
                             m.entry.address(), m.present ? "yes" : "no", m.healthy ? "ok" : "down",
                             m.lease_ttl_s >= 0 ? absl::StrCat(m.lease_ttl_s, " s") : "-",
                             m.entry.version(), absl::StrJoin(vols, ", "));
      if (!m.healthy && !m.error.empty()) out << "      " << m.error << "\n";
    }
    out << "volumes:\n";
    if (volumes.empty()) out << "  (none: gdrctl cluster create-volume NAME)\n";
    for (const auto& v : volumes) {
      out << absl::StrFormat("  %-16s %s, stripe unit %s, replicas %u, epoch %u, members %s\n",
                             v.name(), gdr::FormatSize(v.size()), gdr::FormatSize(v.stripe_unit()),
                             v.replicas(), v.epoch(), absl::StrJoin(v.members(), ","));
    }
  }
  return healthy == members.size() ? kExitOk : kExitFailed;
}

int ClusterCreateVolume(gdrstore::ClusterClient& c, const std::string& name, uint64_t stripe_unit,
                        uint32_t replicas, const std::vector<std::string>& members,
                        const gdrstore::ClusterClient::MemberVolumes& make, bool json,
                        std::ostream& out) {
  absl::StatusOr<gdrstore::v1::ClusterVolume> l =
      c.CreateVolume(name, stripe_unit, replicas, members, make);
  if (!l.ok()) return Fail(l.status(), "cluster create-volume");
  if (json) {
    out << gdr::cluster::ToJson(*l) << "\n";
  } else {
    out << "created cluster volume " << l->name() << ": " << gdr::FormatSize(l->size()) << " over "
        << absl::StrJoin(l->members(), ",") << ", stripe unit " << gdr::FormatSize(l->stripe_unit())
        << ", replicas " << l->replicas() << "\n";
  }
  return kExitOk;
}

class ClusterCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* cluster = app.add_subcommand(
        "cluster", "the cluster of --cluster / --cluster-file: its members and volumes");
    cluster->require_subcommand(1);
    status_ = cluster->add_subcommand(
        "status",
        "members (address, lease left, version, volumes, health) and volume layouts; "
        "exit 1 when a member is absent or does not answer");
    create_ = cluster->add_subcommand(
        "create-volume", "lay out cluster volume NAME over members serving a volume of that name");
    create_->add_option("name", name_, "volume name (each member serves one so named)")->required();
    AddSizeOption(create_, "--stripe-unit", &unit_,
                  "bytes of each stripe unit (a power of two, 4KiB..1GiB; default 4MiB)");
    create_->add_option("--replicas", replicas_, "copies of each stripe")
        ->capture_default_str()
        ->check(CLI::Range(1u, 1024u));
    create_->add_option("--members", members_,
                        "comma list of member ids, in placement order (default: every "
                        "member registered now)");
    AddSizeOption(create_, "--size", &make_.size,
                  "make the members' volumes first, big enough for this many bytes (default: "
                  "the members serve volume NAME already)");
    create_->add_flag("--file", make_.file,
                      "with --size: files in the members' writable --volume-dir");
    create_->add_option("--media", make_.media,
                        "with --size: media options of the members' volumes");
    delete_ = cluster->add_subcommand("delete-volume", "remove cluster volume NAME's layout");
    delete_->add_option("name", name_, "cluster volume")->required();
    delete_->add_flag("--member-volumes", member_volumes_,
                      "also delete volume NAME on each of its members");
    delete_->add_flag("--delete-file", delete_files_,
                      "with --member-volumes: their files too (writable --volume-dir)");
    return cluster;
  }

  int Run(const Context& ctx) override {
    if (!ctx.target.is_cluster()) {
      return Fail(kExitUsage, "gdrctl cluster needs --cluster URL or --cluster-file FILE");
    }
    return ctx.target.WithCluster([&](gdrstore::ClusterClient& cluster) {
      if (status_->parsed()) return ClusterStatus(cluster, ctx.global.json, std::cout);
      if (delete_->parsed()) {
        if (delete_files_ && !member_volumes_) {
          return Fail(kExitUsage, "--delete-file needs --member-volumes");
        }
        absl::Status st = cluster.DeleteVolume(name_, member_volumes_, delete_files_);
        if (!st.ok()) return Fail(st, "cluster delete-volume");
        if (!ctx.global.json) std::cout << "deleted cluster volume " << name_ << "\n";
        return kExitOk;
      }
      if (make_.size == 0 && (make_.file || !make_.media.empty())) {
        return Fail(kExitUsage, "--file and --media need --size (the members' volumes made)");
      }
      const std::vector<std::string> ids = absl::StrSplit(members_, ',', absl::SkipEmpty());
      return ClusterCreateVolume(cluster, name_, unit_, replicas_, ids, make_, ctx.global.json,
                                 std::cout);
    });
  }

 private:
  CLI::App* status_ = nullptr;
  CLI::App* create_ = nullptr;
  CLI::App* delete_ = nullptr;
  gdrstore::ClusterClient::MemberVolumes make_;
  bool member_volumes_ = false, delete_files_ = false;
  std::string name_, members_;
  uint64_t unit_ = 4 << 20;
  uint32_t replicas_ = 1;
};

}  // namespace

std::unique_ptr<Command> NewClusterCommand() { return std::make_unique<ClusterCommand>(); }

}  // namespace gdrctl
