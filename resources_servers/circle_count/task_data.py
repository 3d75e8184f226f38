"""The fields of a circle_count task row besides `responses_create_params` (NeMo Gym's names)."""

from pydantic import BaseModel, Field


class Circle(BaseModel):
    """One drawn circle: centre in pixels from the top-left corner, radius, and colour name."""

    x: int
    y: int
    radius: int = Field(gt=0)
    color: str = Field(min_length=1)


class TaskData(BaseModel):
    circles: list[Circle]
    target_color: str = Field(min_length=1)
