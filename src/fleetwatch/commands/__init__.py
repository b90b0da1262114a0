"""The command layer: what CLI commands do beyond parsing options — network clients and
terminal output — kept out of the library packages (``slo``, ``alerts``, …), which stay
free of I/O. :mod:`fleetwatch.cli` calls in here."""
