#include "client/gdrctl/message_json.h"

#include <google/protobuf/util/json_util.h>

namespace gdrctl {

std::string MessageJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &json, o).ok()) json.clear();
  return json;
}

}  // namespace gdrctl
