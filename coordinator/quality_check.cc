#include "coordinator/quality_check.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tailor::coordinator {

v1::QualityCheck JudgeQuality(const v1::QualityParams& floors, const v1::EvalQuality& eval) {
  v1::QualityCheck c;
  c.set_eval_dataset_digest(eval.dataset_digest());
  c.set_eval_tokens(eval.tokens());
  c.set_parent_perplexity(eval.teacher_perplexity());
  c.set_student_perplexity(eval.student_perplexity());
  const double increase = eval.teacher_perplexity() > 0
                              ? eval.student_perplexity() / eval.teacher_perplexity() - 1.0
                              : 0.0;
  c.set_relative_perplexity_increase(increase);
  if (eval.has_student_exact_match()) c.set_student_exact_match(eval.student_exact_match());
  std::vector<std::string> missed;
  std::vector<std::string> held;
  if (floors.has_max_relative_perplexity_increase()) {
    const double floor = floors.max_relative_perplexity_increase();
    c.set_max_relative_perplexity_increase(floor);
    const std::string figure = absl::StrFormat(
        "student perplexity %.4g is %+.1f%% against the parent's %.4g (at most %+.1f%%)",
        eval.student_perplexity(), 100 * increase, eval.teacher_perplexity(), 100 * floor);
    (increase <= floor ? held : missed).push_back(figure);
  }
  if (floors.has_min_exact_match()) {
    const double floor = floors.min_exact_match();
    c.set_min_exact_match(floor);
    if (eval.exact_match_items() == 0) {
      missed.push_back("no prompt/answer line in data.eval to measure exact match on");
    } else {
      const std::string figure = absl::StrFormat(
          "student exact match %.3f over %d prompts (parent %.3f; at least %.3f)",
          eval.student_exact_match(), eval.exact_match_items(), eval.teacher_exact_match(),
          floor);
      (eval.student_exact_match() >= floor ? held : missed).push_back(figure);
    }
  }
  c.set_met(missed.empty());
  if (!missed.empty()) {
    c.set_reason(absl::StrCat("quality floor missed on data.eval: ", absl::StrJoin(missed, "; ")));
  } else if (!held.empty()) {
    c.set_reason(absl::StrCat("quality floors met on data.eval: ", absl::StrJoin(held, "; ")));
  } else {
    c.set_reason(absl::StrFormat(
        "no quality floor set; on data.eval the student's perplexity is %.4g against the "
        "parent's %.4g (%+.1f%%)",
        eval.student_perplexity(), eval.teacher_perplexity(), 100 * increase));
  }
  return c;
}

}  // namespace tailor::coordinator
