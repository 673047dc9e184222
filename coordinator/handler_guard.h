// The exception border of the gRPC service (STYLE 1): every handler body runs inside GuardHandler, so that
// an exception thrown by a library below it (yaml-cpp, nlohmann, the standard library) reaches the client
// as INTERNAL with its message, and the coordinator's log, instead of gRPC's opaque "Unexpected error in
// RPC handling". Parsers translate their own libraries' exceptions; this is the net under them.
#pragma once

#include <grpcpp/support/status.h>

#include <exception>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"

namespace zerofit::coordinator {

// Runs `body` (returning grpc::Status) and returns its status, or INTERNAL naming `method` and the
// exception's message when it throws. Thread-safe as far as `body` is.
template <typename Body>
grpc::Status GuardHandler(const char* method, Body&& body) {
  std::string what;
  try {
    return body();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  const std::string message = absl::StrCat(method, ": internal error: ", what);
  std::cerr << "zerofit coordinator: " << message << std::endl;
  return grpc::Status(grpc::StatusCode::INTERNAL, message);
}

}  // namespace zerofit::coordinator
