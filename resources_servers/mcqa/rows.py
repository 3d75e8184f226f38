"""What an mcqa row says about its own grading: the grading modes (the template's answer regexes are read
by `nemo_gym.envkit.multiple_choice.template_patterns`)."""

from typing import Literal

RowGradingMode = Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"]
ConfigGradingMode = Literal[
    "strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"
]
