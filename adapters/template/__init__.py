"""The student template (adapters/template/adapter.py): ``make grade ADAPTER=adapters/template``
grades it as it is — every component "not provided", 0 points."""

from .adapter import ADAPTER

__all__ = ["ADAPTER"]
