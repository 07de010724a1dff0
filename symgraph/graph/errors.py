"""Errors the graph layer raises and users catch from ``function()``."""


class MissingInputError(ValueError):
    """The graph needs a variable that is neither an input nor given."""
