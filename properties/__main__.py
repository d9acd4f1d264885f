"""``python -m properties``: kept as an entry point; the command line lives in the harness
(:mod:`harness.cli`). The one import from properties/ into the harness, and only when run
as a program: no property module imports it."""

from harness.cli import main

raise SystemExit(main())
