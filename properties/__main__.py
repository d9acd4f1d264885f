"""``python -m properties``: see :mod:`properties.cli`."""

from properties.cli import main

raise SystemExit(main())
