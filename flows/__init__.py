"""Prefect orchestration of the pipeline: when and where stages run, retries, parameters. No maths here."""
