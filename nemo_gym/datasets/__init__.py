"""Datasets: task files, collation, prompts, benchmark folders, the Hugging Face and GitLab stores."""
