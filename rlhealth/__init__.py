"""rlhealth: read-only, rule-based KILL / NO-KILL / ERROR diagnosis of one RL training job.

Data flow: probes (bundle reader, live capture) -> typed facts -> durable-rules
rule base -> gate statuses and verdict -> Jinja2 / JSON report.
"""
__version__ = "0.1.0"
