"""The one exception rewrites raise when their preconditions do not hold."""


class NotApplicable(Exception):
    """A rule cannot (or cannot prove it may) rewrite the given source; str() says why."""
