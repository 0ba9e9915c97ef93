#include "client/src/cluster/layout.h"

#include <google/protobuf/util/json_util.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/host_port.h"

namespace gdr::cluster {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::vector<Piece>> Split(const v1::ClusterVolume& layout, uint64_t offset,
                                         uint64_t length) {
  if (offset > layout.size() || length > layout.size() - offset) {
    return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", length, ") is outside ",
                                              "cluster volume ", layout.name(), " of ",
                                              layout.size(), " bytes"));
  }
  const uint64_t unit = layout.stripe_unit();
  const uint64_t n = static_cast<uint64_t>(layout.members_size());
  const uint64_t r = layout.replicas();
  std::vector<Piece> pieces;
  pieces.reserve(length / unit + 2);
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = offset + done;
    const uint64_t stripe = at / unit;
    const uint64_t within = at % unit;
    Piece p;
    p.op_offset = done;
    p.length = std::min(unit - within, length - done);
    p.stripe = stripe;
    for (uint64_t j = 0; j < r; ++j) {
      p.replicas.push_back(Placement{static_cast<uint32_t>((stripe + j) % n),
                                     ((stripe / n) * r + j) * unit + within});
    }
    done += p.length;
    pieces.push_back(std::move(p));
  }
  return pieces;
}

uint64_t LogicalSize(uint64_t stripe_unit, size_t members, uint32_t replicas,
                     uint64_t member_bytes) {
  if (stripe_unit == 0 || replicas == 0) return 0;
  const uint64_t rows = member_bytes / (stripe_unit * replicas);
  return rows * members * stripe_unit;
}

absl::Status CheckLayout(const v1::ClusterVolume& l) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("cluster volume ", l.name(), ": ", what));
  };
  if (l.name().empty() || l.name().size() > 255 ||
      l.name().find_first_of("/ \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster volume name '", l.name(), "' must be 1..255 bytes without '/' "
                     "or spaces"));
  }
  const uint64_t unit = l.stripe_unit();
  if (unit < kMinStripeUnit || unit > kMaxStripeUnit || (unit & (unit - 1)) != 0) {
    return bad(absl::StrCat("stripe_unit ", unit, " is not a power of two in [",
                            kMinStripeUnit, ", ", kMaxStripeUnit, "]"));
  }
  if (l.members_size() == 0 || static_cast<size_t>(l.members_size()) > kMaxMembers) {
    return bad(absl::StrCat("members: ", l.members_size(), " listed, 1..", kMaxMembers,
                            " needed"));
  }
  std::set<std::string> seen;
  for (const std::string& m : l.members()) {
    if (m.empty()) return bad("members: an empty member id");
    if (!seen.insert(m).second) return bad(absl::StrCat("members: '", m, "' is listed twice"));
  }
  if (l.replicas() < 1 || l.replicas() > static_cast<uint32_t>(l.members_size())) {
    return bad(absl::StrCat("replicas ", l.replicas(), " is not in 1..", l.members_size(),
                            " (the members listed)"));
  }
  const uint64_t row = unit * static_cast<uint64_t>(l.members_size());
  if (l.size() == 0 || l.size() % row != 0) {
    return bad(absl::StrCat("size ", l.size(), " is not a nonzero multiple of ", row,
                            " (stripe_unit x members)"));
  }
  return absl::OkStatus();
}

namespace {

template <typename M>
absl::StatusOr<M> ParseJson(absl::string_view what, absl::string_view key,
                            absl::string_view json) {
  M m;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;  // a newer writer may add fields
  auto st = google::protobuf::util::JsonStringToMessage(std::string(json), &m, o);
  if (!st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " entry ", key, " is malformed: ",
                                                   std::string(st.message())));
  }
  return m;
}

std::string LastPart(absl::string_view key) {
  const size_t slash = key.rfind('/');
  return std::string(slash == absl::string_view::npos ? key : key.substr(slash + 1));
}

}  // namespace

absl::Status CheckLayoutEntry(absl::string_view key, const v1::ClusterVolume& l) {
  if (absl::Status st = CheckLayout(l); !st.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout entry ", key, " is malformed: ", st.message()));
  }
  if (LastPart(key) != l.name()) {
    return absl::InvalidArgumentError(absl::StrCat("layout entry ", key, " is malformed: it ",
                                                   "names volume '", l.name(), "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckMemberEntry(absl::string_view key, const v1::ClusterMember& m) {
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("member entry ", key, " is malformed: ", what));
  };
  if (m.id().empty() || m.id() != LastPart(key)) {
    return bad(absl::StrCat("its id '", m.id(), "' is not the last part of the key"));
  }
  if (absl::Status st = SplitHostPort(m.address()).status(); !st.ok()) {
    return bad(absl::StrCat("address: ", st.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::ClusterVolume> ParseLayout(absl::string_view key, absl::string_view json) {
  absl::StatusOr<v1::ClusterVolume> l = ParseJson<v1::ClusterVolume>("layout", key, json);
  if (!l.ok()) return l.status();
  if (absl::Status st = CheckLayoutEntry(key, *l); !st.ok()) return st;
  return l;
}

absl::StatusOr<v1::ClusterMember> ParseMember(absl::string_view key, absl::string_view json) {
  absl::StatusOr<v1::ClusterMember> m = ParseJson<v1::ClusterMember>("member", key, json);
  if (!m.ok()) return m.status();
  if (absl::Status st = CheckMemberEntry(key, *m); !st.ok()) return st;
  return m;
}

std::string ToJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &out, o);
  return out;
}

}  // namespace gdr::cluster
