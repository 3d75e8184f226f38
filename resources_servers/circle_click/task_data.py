"""The fields of a circle_click task row besides `responses_create_params` (NeMo Gym's names)."""

from pydantic import BaseModel, Field, ValidationInfo, field_validator


class Circle(BaseModel):
    """One drawn circle: centre in pixels from the top-left corner, radius, and colour name."""

    x: int
    y: int
    radius: int = Field(gt=0)
    color: str = Field(min_length=1)


class TaskData(BaseModel):
    circles: list[Circle] = Field(min_length=1)
    target_color: str = Field(min_length=1)

    @field_validator("target_color")
    @classmethod
    def _drawn(cls, value: str, info: ValidationInfo) -> str:
        """A click can only be graded against a circle that is in the picture."""
        circles = info.data.get("circles")
        if circles is not None and not any(circle.color == value for circle in circles):
            raise ValueError(f"no circle in `circles` has the colour {value!r}")
        return value
