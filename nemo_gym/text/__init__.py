"""Text helpers every layer may use: one-line summaries, plain-text tables, secret redaction."""
