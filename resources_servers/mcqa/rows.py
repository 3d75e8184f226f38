"""What an mcqa row says about its own grading: the grading modes, and the template's answer regexes."""

from typing import Literal

from pydantic import BaseModel, ConfigDict

RowGradingMode = Literal["strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon"]
ConfigGradingMode = Literal[
    "strict_single_letter_boxed", "lenient_boxed", "lenient_answer_colon", "lenient_answer_colon_md"
]


class TemplateMetadata(BaseModel):
    """Prompt-template details shipped with some rows; only `output_regex` matters for grading."""

    model_config = ConfigDict(extra="allow")

    output_regex: str | list[str] | None = None


def regex_list(template: TemplateMetadata | None) -> tuple[str, ...]:
    if template is None or template.output_regex is None:
        return ()
    if isinstance(template.output_regex, str):
        return (template.output_regex,)
    return tuple(template.output_regex)
