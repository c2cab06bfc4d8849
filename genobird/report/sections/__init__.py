"""The report's sections, one module per study that writes its files. Each module
defines ORDER (its place on the page) and `section(report: ReportContext) -> str` (empty
when its files are absent); `build_report` finds them here, so a new study adds a module
and edits nothing else."""

from __future__ import annotations
