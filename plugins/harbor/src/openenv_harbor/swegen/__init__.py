"""SWE tasks generated offline from real Python projects (``openenv tasks generate swe``).

``sources`` downloads pinned sdists from PyPI into a cache, ``select`` runs their tests (under
coverage.py, per test) and the tests covering each mutation, ``mutate`` makes the ast-based bugs,
``write`` writes Harbor task folders, ``generate`` ties them together and ``cli`` is the command.
"""
