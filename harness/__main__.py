"""``python -m harness``: the same command line as ``python -m properties``."""

from harness.cli import main

raise SystemExit(main())
