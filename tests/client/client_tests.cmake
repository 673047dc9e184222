# The one coordinator client (issue 18): backoff bounds, retry only of idempotent calls, deadlines, errors
# that name the address; against an in-process gRPC server. Paths relative to tests/.
if(TARGET zerofit_client)
  zerofit_unit_test(client_unit_test client/retry_policy_test.cc client/connection_test.cc
    client/follow_across_restarts_test.cc)
  target_link_libraries(client_unit_test PRIVATE zerofit_client)
endif()
