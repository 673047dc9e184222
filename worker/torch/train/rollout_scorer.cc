#include "worker/torch/train/rollout_scorer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/chat_response.h"

namespace zerofit::worker {
namespace {

using Kind = RewardSourceOptions::Kind;

std::string SourceField(size_t i) { return absl::StrCat("rewards[", i, "]"); }

}  // namespace

absl::StatusOr<std::unique_ptr<RolloutScorer>> RolloutScorer::Create(
    const std::vector<RewardSourceOptions>& sources, std::shared_ptr<const data::Tokenizer> tokenizer,
    std::vector<int64_t> eos_ids, int64_t policy_vocab, torch::Device device) {
  if (sources.empty())
    return absl::InvalidArgumentError("rewards: a GRPO job needs at least one reward source");
  std::unique_ptr<RolloutScorer> s(new RolloutScorer());
  for (size_t i = 0; i < sources.size(); ++i) {
    const RewardSourceOptions& src = sources[i];
    std::unique_ptr<RewardModelScorer> model;
    std::optional<rewards::VerifiableReward> answer;
    std::optional<rewards::FormatReward> format;
    if (src.kind == Kind::kFormat) {
      if (tokenizer == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(SourceField(i),
                                                       ": a format reward reads text, and this job "
                                                       "has no tokenizer to decode completions"));
      }
      ZF_ASSIGN_OR_RETURN(format, rewards::FormatReward::Create(src.format, SourceField(i) + ".pattern"));
    }
    if (src.kind == Kind::kAnswer) {
      const std::string f = SourceField(i);
      ZF_ASSIGN_OR_RETURN(answer, rewards::VerifiableReward::Create(
                                      src.answer, rewards::VerifiableRewardFields{f + ".rule", f + ".pattern",
                                                                                  f + ".group"}));
    }
    if (src.kind == Kind::kModel) {
      absl::StatusOr<std::unique_ptr<RewardModelScorer>> loaded =
          RewardModelScorer::Load(src.model_dir, device);
      if (!loaded.ok())
        return absl::InvalidArgumentError(absl::StrCat(SourceField(i), ".path: ", loaded.status().message()));
      model = std::move(*loaded);
      if (model->vocab_size() < policy_vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat(SourceField(i), ".path: ", src.model_dir, " reads ids below ", model->vocab_size(),
                         ", the policy writes ids below ", policy_vocab,
                         ": a reward model scores the policy's tokens, so it needs the policy's tokenizer"));
      }
    } else if (src.kind == Kind::kAnswer && tokenizer == nullptr &&
               src.answer.rule != rewards::AnswerRule::kExact) {
      return absl::InvalidArgumentError(absl::StrCat(
          SourceField(i), ".rule: ", rewards::AnswerRuleName(src.answer.rule),
          " compares text, and this job has no tokenizer to decode completions (a model directory with "
          "tokenizer.json); pre-tokenized prompts support the exact rule against answer_ids"));
    }
    s->models_.push_back(std::move(model));
    s->answers_.push_back(std::move(answer));
    s->formats_.push_back(std::move(format));
  }
  s->sources_ = sources;
  s->tokenizer_ = std::move(tokenizer);
  s->eos_ids_ = std::move(eos_ids);
  return s;
}

bool RolloutScorer::has_answer_source() const {
  return std::any_of(sources_.begin(), sources_.end(),
                     [](const RewardSourceOptions& s) { return s.kind == Kind::kAnswer; });
}

absl::Status RolloutScorer::CheckPrompts(const std::vector<data::Prompt>& prompts,
                                         const std::string& path) const {
  if (!has_answer_source()) return absl::OkStatus();
  for (const data::Prompt& p : prompts) {
    const bool ok = tokenizer_ != nullptr ? p.answer.has_value() : !p.answer_ids.empty();
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", p.source_line, ": field '", tokenizer_ != nullptr ? "answer" : "answer_ids",
                       "' is missing; the job's answer reward compares completions with it"));
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t> RolloutScorer::WithoutEos(const std::vector<int64_t>& tokens) const {
  std::vector<int64_t> out = tokens;
  if (!out.empty() && std::find(eos_ids_.begin(), eos_ids_.end(), out.back()) != eos_ids_.end())
    out.pop_back();
  return out;
}

absl::StatusOr<std::vector<std::string>> RolloutScorer::DecodedCompletions(
    const std::vector<Completion>& completions) const {
  std::vector<std::string> texts;
  const bool reads_text = std::any_of(sources_.begin(), sources_.end(),
                                      [](const RewardSourceOptions& s) { return s.kind != Kind::kModel; });
  if (tokenizer_ == nullptr || !reads_text) return texts;
  texts.reserve(completions.size());
  for (const Completion& c : completions) {
    const std::vector<int64_t> tokens = WithoutEos(c.tokens);
    ZF_ASSIGN_OR_RETURN(std::string text,
                        tokenizer_->Decode(std::vector<int32_t>(tokens.begin(), tokens.end())));
    texts.push_back(std::move(text));
  }
  return texts;
}

absl::StatusOr<std::vector<int32_t>> RolloutScorer::ModelInput(const data::Prompt& prompt,
                                                               const Completion& completion) const {
  std::vector<int32_t> seq = prompt.ids;
  if (prompt.messages_json.empty() || tokenizer_ == nullptr) {
    seq.insert(seq.end(), completion.tokens.begin(), completion.tokens.end());
    return seq;
  }
  // TRL's reward input for a chat prompt: the completion decoded (its EOS, the end of turn, stripped) and
  // written as the assistant's reply by the chat template, which ends the turn as in the reward data.
  const std::vector<int64_t> tokens = WithoutEos(completion.tokens);
  ZF_ASSIGN_OR_RETURN(const std::string reply,
                      tokenizer_->Decode(std::vector<int32_t>(tokens.begin(), tokens.end())));
  ZF_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                      data::ChatReplyIds(*tokenizer_, prompt.messages_json, prompt.chat_extras, reply));
  seq.insert(seq.end(), ids.begin(), ids.end());
  return seq;
}

double RolloutScorer::AnswerScore(size_t source_index, const data::Prompt& prompt,
                                  const Completion& completion, const std::string* text) const {
  const RewardSourceOptions& source = sources_[source_index];
  if (text != nullptr) return answers_[source_index]->Score(*text, prompt.answer.value_or(""));
  const std::vector<int64_t> tokens = WithoutEos(completion.tokens);
  const bool match =
      std::equal(tokens.begin(), tokens.end(), prompt.answer_ids.begin(), prompt.answer_ids.end());
  return match ? source.answer.correct : source.answer.wrong;
}

absl::StatusOr<ScoredRollout> RolloutScorer::Score(const std::vector<const data::Prompt*>& prompts,
                                                   const std::vector<Completion>& completions) const {
  std::vector<rewards::SourceScores> scores;
  ScoredRollout out;
  ZF_ASSIGN_OR_RETURN(const std::vector<std::string> texts, DecodedCompletions(completions));
  for (size_t s = 0; s < sources_.size(); ++s) {
    rewards::SourceScores src{sources_[s].name, sources_[s].weight, {}};
    if (sources_[s].kind == Kind::kModel) {
      std::vector<std::vector<int32_t>> sequences;
      for (size_t i = 0; i < completions.size(); ++i) {
        absl::StatusOr<std::vector<int32_t>> seq = ModelInput(*prompts[i], completions[i]);
        if (!seq.ok()) {
          return absl::Status(seq.status().code(),
                              absl::StrCat(SourceField(s), ": a completion of the prompt of line ",
                                           prompts[i]->source_line, ": ", seq.status().message()));
        }
        sequences.push_back(std::move(*seq));
      }
      ZF_ASSIGN_OR_RETURN(src.scores, models_[s]->Score(sequences));
    } else if (sources_[s].kind == Kind::kFormat) {
      for (const std::string& text : texts) src.scores.push_back(formats_[s]->Score(text));
    } else {
      for (size_t i = 0; i < completions.size(); ++i) {
        src.scores.push_back(
            AnswerScore(s, *prompts[i], completions[i], texts.empty() ? nullptr : &texts[i]));
      }
      if (out.correct.empty()) {
        for (double v : src.scores) out.correct.push_back(v == sources_[s].answer.correct ? 1.0 : 0.0);
      }
    }
    scores.push_back(std::move(src));
  }
  ZF_ASSIGN_OR_RETURN(out.sum, rewards::SumRewards(scores));
  return out;
}

}  // namespace zerofit::worker
