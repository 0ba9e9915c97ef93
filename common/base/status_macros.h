// Early-return helpers for absl::Status / absl::StatusOr. Debian 12's Abseil (20220623) ships
// neither ABSL_RETURN_IF_ERROR nor ASSIGN_OR_RETURN, so the project keeps its own two macros.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GDR_STATUS_CONCAT_INNER(a, b) a##b
#define GDR_STATUS_CONCAT(a, b) GDR_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is not OK.
#define GDR_RETURN_IF_ERROR(expr)                        \
  do {                                                   \
    ::absl::Status gdr_status_ = (expr);                 \
    if (!gdr_status_.ok()) return gdr_status_;           \
  } while (0)

// `GDR_ASSIGN_OR_RETURN(auto x, F());` declares/assigns x from F()'s value or returns its status.
#define GDR_ASSIGN_OR_RETURN(lhs, expr) \
  GDR_ASSIGN_OR_RETURN_IMPL(GDR_STATUS_CONCAT(gdr_statusor_, __LINE__), lhs, expr)
#define GDR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(*tmp)
