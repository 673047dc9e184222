# GRPO's verifiable rewards (issue 32). Paths relative to tests/.
zerofit_unit_test(rewards_unit_test worker/rewards/format_reward_test.cc worker/rewards/reward_sum_test.cc
                  worker/rewards/verifiable_reward_test.cc)
target_link_libraries(rewards_unit_test PRIVATE zerofit_rewards)
