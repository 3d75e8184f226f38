"""What a server tells about itself: Prometheus metrics and OpenTelemetry tracing."""
