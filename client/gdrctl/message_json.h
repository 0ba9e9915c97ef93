// How gdrctl prints a protobuf message with --json (stats, fault): protobuf's own JSON printer,
// with the proto's field names and every field, zeros included, so a script sees each key.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace gdrctl {

// One line of JSON (no newline); empty if the printer fails.
std::string MessageJson(const google::protobuf::Message& message);

}  // namespace gdrctl
