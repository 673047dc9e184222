// What `zerofit run` and `zerofit logs -f` print of a job's log (issue 29): on a terminal one progress line
// redrawn in place with evaluations and other lines printed above it; in a pipe a line every log_every
// steps, the first and the last, evaluations and checkpoints, and one at least every 30 s.
#include "cli/progress_reporter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zerofit::cli {
namespace {

std::string Step(int n, int of, const std::string& more = "") {
  return absl::StrCat("step ", n, "/", of, "  loss 0.6931  acc 0.500  12 pairs/s  ETA 1m05s", more);
}

// A reporter writing into a string, on a fake clock.
struct Harness {
  explicit Harness(ProgressOptions o)
      : reporter(std::move(o), &clock, [this](const std::string& t) { out += t; }) {}
  void Job(const std::string& text) { reporter.JobLine(text, "12:00:00 host:0 | " + text); }
  // The printed lines (kLines), without their prefix.
  std::vector<std::string> Lines() const {
    std::vector<std::string> lines;
    for (absl::string_view l : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
      absl::ConsumePrefix(&l, "12:00:00 host:0 | ");
      lines.emplace_back(l);
    }
    return lines;
  }
  core::FakeClock clock;
  std::string out;
  ProgressReporter reporter;
};

ProgressOptions Lines(int64_t log_every) {
  ProgressOptions o;
  o.mode = ProgressMode::kLines;
  o.log_every = log_every;
  return o;
}

ProgressOptions InPlace(int columns = 0, bool ansi = true) {
  ProgressOptions o;
  o.mode = ProgressMode::kInPlace;
  o.ansi = ansi;
  if (columns > 0) o.columns = [columns] { return columns; };
  return o;
}

TEST(ParseStepLineTest, OnlyRankZerosProgressLines) {
  auto s = ParseStepLine(Step(7, 400));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->step, 7);
  EXPECT_EQ(s->steps, 400);
  ASSERT_TRUE(ParseStepLine("step 3/9").has_value());
  for (const char* not_one : {"stepping", "step 3", "step x/9  loss", "step 0/9  loss", "step 3/-9 loss",
                              "stopping before step 5: the job was cancelled", "data: step 3/9", ""}) {
    EXPECT_FALSE(ParseStepLine(not_one).has_value()) << not_one;
  }
}

TEST(ProgressReporterTest, APipeGetsEveryLogEveryThStepTheFirstAndTheLast) {
  Harness h(Lines(10));
  h.Job("attempt 1: 400 training pairs, steps 0..44");
  for (int n = 1; n <= 45; ++n) h.Job(Step(n, 45));
  h.Job("done: held-out accuracy 0.900 over 40 pairs");
  const std::vector<std::string> want = {"attempt 1: 400 training pairs, steps 0..44",
                                         Step(1, 45),
                                         Step(10, 45),
                                         Step(20, 45),
                                         Step(30, 45),
                                         Step(40, 45),
                                         Step(45, 45),
                                         "done: held-out accuracy 0.900 over 40 pairs"};
  EXPECT_EQ(h.Lines(), want);
  EXPECT_EQ(h.out.find('\r'), std::string::npos) << "no terminal codes in a pipe";
  EXPECT_EQ(h.out.find('\x1b'), std::string::npos);
}

TEST(ProgressReporterTest, ThePipesDefaultIsAboutOnePercentOfTheSteps) {
  Harness h(Lines(0));
  for (int n = 1; n <= 1000; ++n) h.Job(Step(n, 1000));
  const std::vector<std::string> lines = h.Lines();
  ASSERT_EQ(lines.size(), 101u);  // step 1, then 10, 20, ..., 1000
  EXPECT_EQ(lines[1], Step(10, 1000));
  EXPECT_EQ(lines.back(), Step(1000, 1000));
}

TEST(ProgressReporterTest, APipeGetsAStepLineAtLeastEvery30Seconds) {
  Harness h(Lines(100));
  for (int n = 1; n <= 20; ++n) {
    h.Job(Step(n, 1000));
    h.clock.Advance(absl::Seconds(7));  // step n ends 7 s after step n - 1
  }
  // Step 1 at 0 s; step 6 is the first at >= 30 s after it (35 s), step 11 30+ s after that, and so on.
  const std::vector<std::string> want = {Step(1, 1000), Step(6, 1000), Step(11, 1000), Step(16, 1000)};
  EXPECT_EQ(h.Lines(), want);
}

TEST(ProgressReporterTest, APipeGetsEvaluationsCheckpointsAndTheFirstStepAfterARestart) {
  Harness h(Lines(50));
  for (int n = 1; n <= 30; ++n) {
    std::string more;
    if (n == 20) more = "  (checkpoint step 19)";
    if (n == 25) more = "  | eval: held-out acc 0.700 loss 0.5000 (40 pairs)";
    h.Job(Step(n, 100, more));
  }
  h.Job("restarting: the launcher exited with code 137");
  for (int n = 21; n <= 24; ++n) h.Job(Step(n, 100));  // attempt 2 resumes after the checkpoint
  const std::vector<std::string> want = {Step(1, 100), Step(20, 100, "  (checkpoint step 19)"),
                                         Step(25, 100, "  | eval: held-out acc 0.700 loss 0.5000 (40 pairs)"),
                                         "restarting: the launcher exited with code 137", Step(21, 100)};
  EXPECT_EQ(h.Lines(), want);
}

TEST(ProgressReporterTest, ATerminalGetsOneLineRedrawnInPlace) {
  Harness h(InPlace());
  h.Job(Step(1, 3));
  EXPECT_EQ(h.out, "\r" + Step(1, 3) + "\x1b[K");
  h.out.clear();
  h.Job(Step(2, 3));
  EXPECT_EQ(h.out, "\r" + Step(2, 3) + "\x1b[K");
  h.out.clear();
  h.reporter.Finish();
  EXPECT_EQ(h.out, "\n") << "the last progress line stays, the output goes on on a fresh line";
  h.out.clear();
  h.reporter.Finish();
  EXPECT_EQ(h.out, "") << "idempotent";
}

TEST(ProgressReporterTest, OnATerminalOtherLinesClearTheProgressLineAndItIsDrawnAgainUnderThem) {
  Harness h(InPlace());
  h.Job(Step(4, 10));
  h.out.clear();
  h.Job("warning: rank 0: loss rose 3 steps in a row");
  EXPECT_EQ(h.out, "\r\x1b[K12:00:00 host:0 | warning: rank 0: loss rose 3 steps in a row\n\r" + Step(4, 10) +
                       "\x1b[K");
  h.out.clear();
  // An evaluation stays on screen as a line; the progress line goes on without it.
  h.Job(Step(5, 10, "  | eval: held-out acc 0.700 loss 0.5000 (40 pairs)"));
  EXPECT_EQ(h.out, "\r\x1b[K12:00:00 host:0 | " +
                       Step(5, 10, "  | eval: held-out acc 0.700 loss 0.5000 (40 pairs)") + "\n\r" +
                       Step(5, 10) + "\x1b[K");
  h.out.clear();
  h.reporter.Say("zerofit run: SIGINT: stopping the workers");
  EXPECT_EQ(h.out, "\r\x1b[Kzerofit run: SIGINT: stopping the workers\n\r" + Step(5, 10) + "\x1b[K");
  h.out.clear();
  h.reporter.Clear();  // before a message on stderr
  EXPECT_EQ(h.out, "\r\x1b[K");
  h.out.clear();
  h.reporter.Finish();
  EXPECT_EQ(h.out, "") << "nothing on screen: already on a fresh line";
  h.reporter.Say("zerofit run: job-000001 succeeded after 1 attempt");
  EXPECT_EQ(h.out, "zerofit run: job-000001 succeeded after 1 attempt\n");
}

TEST(ProgressReporterTest, BeforeAnyStepATerminalGetsPlainLines) {
  Harness h(InPlace());
  h.Job("started: rank 0 of 2");
  h.Job("planned peak: no estimate");
  EXPECT_EQ(h.out, "12:00:00 host:0 | started: rank 0 of 2\n12:00:00 host:0 | planned peak: no estimate\n");
}

TEST(ProgressReporterTest, TheInPlaceLineNeverWrapsAndWithoutAnsiIsErasedWithSpaces) {
  Harness h(InPlace(21, /*ansi=*/false));
  h.Job(Step(1, 9));
  EXPECT_EQ(h.out, "\rstep 1/9  loss 0.693");  // 20 columns of 21: the cursor never reaches the edge
  h.out.clear();
  h.Job("step 2/9");
  EXPECT_EQ(h.out, "\rstep 2/9" + std::string(12, ' '));  // the rest of the longer line overwritten
  h.out.clear();
  h.Job("a line");
  EXPECT_EQ(h.out, "\r" + std::string(8, ' ') + "\r12:00:00 host:0 | a line\n\rstep 2/9");
  EXPECT_EQ(h.out.find('\x1b'), std::string::npos);
  // Cut at a character, not inside a UTF-8 sequence.
  Harness u(InPlace(12));
  u.Job("step 1/9  \xc3\xa9\xc3\xa9");  // "step 1/9  éé": 14 bytes, 12 columns
  EXPECT_EQ(u.out, "\rstep 1/9  \x1b[K");
}

TEST(ProgressReporterTest, TheDestructorLeavesTheTerminalOnAFreshLine) {
  core::FakeClock clock;
  std::string out;
  {
    ProgressReporter r(InPlace(), &clock, [&out](const std::string& t) { out += t; });
    r.JobLine(Step(1, 2), "ignored");
  }
  EXPECT_EQ(out, "\r" + Step(1, 2) + "\x1b[K\n");
}

}  // namespace
}  // namespace zerofit::cli
