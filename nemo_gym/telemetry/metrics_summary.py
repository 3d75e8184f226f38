"""The headline figures of one server's `/metrics` page, as `gym env status` shows them."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass

from prometheus_client.parser import text_string_to_metric_families

from nemo_gym.telemetry.metrics import METRICS_PATH


@dataclass(frozen=True)
class HeadlineFigures:
    """Since the server started, over every route but `/metrics` itself (the scrapes)."""

    requests: int
    errors_5xx: int
    latency_p50_s: float | None
    latency_p95_s: float | None
    in_flight: int
    retries: int

    def as_json(self) -> dict[str, float | int | None]:
        return asdict(self)


def headline_figures(page: str) -> HeadlineFigures:
    """Read the figures from a page in Prometheus text format; raises ValueError on any other text."""
    requests = errors = retries = 0
    in_flight = 0.0
    buckets: dict[float, float] = defaultdict(float)
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            route = sample.labels.get("route")
            if route == METRICS_PATH:
                continue
            if sample.name == "gym_http_requests_total":
                requests += int(sample.value)
                errors += int(sample.value) if sample.labels["status"].startswith("5") else 0
            elif sample.name == "gym_http_request_duration_seconds_bucket":
                buckets[float(sample.labels["le"])] += sample.value
            elif sample.name == "gym_http_requests_in_flight":
                in_flight += sample.value
            elif sample.name == "gym_http_client_retries_total":
                retries += int(sample.value)
    return HeadlineFigures(
        requests=requests,
        errors_5xx=errors,
        latency_p50_s=histogram_quantile(0.5, buckets),
        latency_p95_s=histogram_quantile(0.95, buckets),
        in_flight=int(in_flight),
        retries=retries,
    )


def histogram_quantile(quantile: float, buckets: dict[float, float]) -> float | None:
    """The `quantile` of cumulative `buckets` (upper bound -> count), interpolated linearly inside the
    bucket it falls in, as Prometheus does; the last finite bound when it falls in the +Inf bucket. None
    without observations."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = quantile * total
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound
