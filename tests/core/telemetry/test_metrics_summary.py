"""The headline figures `gym env status` reads from a `/metrics` page."""

import math

import pytest

from nemo_gym.telemetry.metrics_summary import headline_figures, histogram_quantile

PAGE = """\
# HELP gym_http_requests_total Requests answered, by route template and status
# TYPE gym_http_requests_total counter
gym_http_requests_total{method="POST",route="/run",server="agent",server_type="responses_api_agents",status="200"} 8.0
gym_http_requests_total{method="POST",route="/run",server="agent",server_type="responses_api_agents",status="502"} 2.0
gym_http_requests_total{method="GET",route="/metrics",server="agent",server_type="responses_api_agents",status="200"} 5.0
# HELP gym_http_request_duration_seconds Latency
# TYPE gym_http_request_duration_seconds histogram
gym_http_request_duration_seconds_bucket{le="1.0",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="200"} 4.0
gym_http_request_duration_seconds_bucket{le="2.0",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="200"} 8.0
gym_http_request_duration_seconds_bucket{le="+Inf",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="200"} 8.0
gym_http_request_duration_seconds_bucket{le="1.0",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="502"} 2.0
gym_http_request_duration_seconds_bucket{le="2.0",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="502"} 2.0
gym_http_request_duration_seconds_bucket{le="+Inf",method="POST",route="/run",server="agent",server_type="responses_api_agents",status="502"} 2.0
gym_http_request_duration_seconds_bucket{le="1.0",method="GET",route="/metrics",server="agent",server_type="responses_api_agents",status="200"} 5.0
gym_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/metrics",server="agent",server_type="responses_api_agents",status="200"} 5.0
# HELP gym_http_requests_in_flight In flight
# TYPE gym_http_requests_in_flight gauge
gym_http_requests_in_flight{server="agent",server_type="responses_api_agents"} 3.0
# HELP gym_http_client_retries_total Retries
# TYPE gym_http_client_retries_total counter
gym_http_client_retries_total{cause="status_503",server="agent",server_type="responses_api_agents"} 4.0
gym_http_client_retries_total{cause="timeout",server="agent",server_type="responses_api_agents"} 1.0
"""


def test_the_figures_leave_out_the_scrapes():
    figures = headline_figures(PAGE)
    assert figures.requests == 10 and figures.errors_5xx == 2 and figures.retries == 5
    assert figures.in_flight == 3  # a page never counts its own scrape in flight
    # 6 of the 10 answers took at most 1 s, all at most 2 s: p50 (rank 5) lies 5/6 into [0, 1], p95
    # (rank 9.5) 3.5/4 into (1, 2].
    assert figures.latency_p50_s == pytest.approx(5 / 6)
    assert figures.latency_p95_s == pytest.approx(1 + 3.5 / 4)


def test_quantiles_of_no_observations_and_of_the_open_bucket():
    assert histogram_quantile(0.5, {}) is None
    assert histogram_quantile(0.5, {1.0: 0.0, math.inf: 0.0}) is None
    assert histogram_quantile(0.99, {1.0: 1.0, math.inf: 10.0}) == 1.0  # beyond the last bound: that bound


def test_a_page_in_another_format_is_refused():
    with pytest.raises(ValueError):
        headline_figures("<html>not metrics</html>\n")
