"""Exceptions that carry a message meant for the user (the CLI prints them without a traceback)."""


class BpestoreError(Exception):
    """Base class of bpestore's own errors."""


class StoreError(BpestoreError):
    """A problem with the tokenizer store."""


class NotABpestoreDatabaseError(StoreError):
    """The file or database exists but is not a bpestore store; it was left untouched."""


class DatabaseTooNewError(StoreError):
    """The database's schema revision is newer than this version of bpestore knows."""


class TokenizerNotFoundError(StoreError, LookupError):
    """No tokenizer with that name or version."""


class InvalidReferenceError(StoreError, ValueError):
    """A tokenizer reference that is not ``name`` or ``name@N``."""


class FormatError(BpestoreError, ValueError):
    """A tokenizer file that cannot be imported (malformed or unsupported); nothing was stored."""
