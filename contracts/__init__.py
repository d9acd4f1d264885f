"""CrossHair contracts over the pure functions of the specification (docs/crosshair.md).

``catalog`` defines each contract once (a precondition and a postcondition over plain
ints), ``contract.checkable`` applies one to any implementation, ``search`` runs
CrossHair on it bounded by iterations, and ``python -m contracts`` (``make
crosshair``) reports a verdict per contract.
"""
