"""``file:`` URIs for the sqlite3 module."""

from pathlib import Path
from urllib.parse import quote, urlencode


def sqlite_uri(path: Path, **parameters: str) -> str:
    """A URI that names exactly ``path``, whatever characters it holds ('?' and '#' included)."""
    return f"file:{quote(str(path.resolve()))}?{urlencode(parameters)}"
