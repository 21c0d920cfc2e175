"""The built-in rule moves, one file per rule: ``<NAME>.py`` holds the rule's preconditions,
rewrite, documented effect (``EFFECT``), gain (``GAIN``), what it relieves (``RELIEVES``) and
``candidates(src)``. ``accelopt.rules.registry`` imports every module here; nothing else needs
to name a new rule. Its tests are in ``tests/python/rules/`` (docs/rules.md, "Writing a rule").
"""
