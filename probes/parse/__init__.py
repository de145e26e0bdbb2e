"""Parsers of evidence files and log lines, by source."""

DECIMAL = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
"""Regex text of a decimal number that ``float()`` reads. Where a log prints ``[0-9.]+``, a garbled
``1.2.3`` or ``.`` then matches nothing instead of failing the conversion (and the diagnosis)."""
