// Status propagation helpers used across zerofit. Errors are values (absl::Status / absl::StatusOr).
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZF_CONCAT_INNER_(a, b) a##b
#define ZF_CONCAT_(a, b) ZF_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` yields a non-OK status.
#define ZF_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status zf_status_ = (expr);      \
    if (!zf_status_.ok()) return zf_status_; \
  } while (false)

#define ZF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(*tmp)

// `ZF_ASSIGN_OR_RETURN(auto x, MakeX());` declares x from a StatusOr or returns its error.
#define ZF_ASSIGN_OR_RETURN(lhs, expr) \
  ZF_ASSIGN_OR_RETURN_IMPL_(ZF_CONCAT_(zf_statusor_, __LINE__), lhs, expr)
