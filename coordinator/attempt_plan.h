// How an attempt of a job is sized when it forms at a world size other than the last one (issue 20: a Slurm
// job with slurm.on_node_loss: shrink, requeued after losing a node, resumes on the nodes it has left). Pure
// functions; the coordinator applies them when the last rank of an attempt registers (coordinator.h), with
// jobspec::Reshape (resolve.h) deciding the sizes.
//
// The global batch never changes: the step scheduler hands out the same pairs at every step whatever the
// world size (step_scheduler.h), and the micro-batches per rank (gradient accumulation) are scaled so that
// each micro-batch keeps the number of pairs it had: global = ranks x micro-batches x pairs per micro-batch.
// The job spec checked that every allowed world size divides the global batch that way
// (jobspec::ValidateNodeLoss); a job whose micro-batch the planner sized gets the nearest fit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerofit::coordinator {

// The hosts of `before` (an earlier attempt's, in rank order) that `now` lacks, in `before`'s order.
std::vector<std::string> LostHosts(const std::vector<std::string>& before,
                                   const std::vector<std::string>& now);

// "1 node of 2: node2 lost", "2 nodes of 2", "1 node of 3: node2, node3 lost"; `nodes` of `of` the spec's.
std::string DescribeNodes(int nodes, int of, const std::vector<std::string>& lost);

// "re-planned 2 x 2 micro-batches x 2 pairs = global batch 8" (pairs per micro-batch rounded up where the
// global batch does not divide).
std::string DescribeReplan(int64_t global_batch, int world, int gradient_accumulation);

// Distinct hosts in first-seen order, and the comma-separated form the job store keeps.
std::vector<std::string> DistinctHosts(const std::vector<std::string>& hosts_by_rank);
std::string JoinHosts(const std::vector<std::string>& hosts);
std::vector<std::string> SplitHosts(const std::string& joined);

}  // namespace zerofit::coordinator
