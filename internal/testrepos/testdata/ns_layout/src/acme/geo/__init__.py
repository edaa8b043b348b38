"""acme.geo: a package of the acme namespace (src/acme has no __init__.py)."""
