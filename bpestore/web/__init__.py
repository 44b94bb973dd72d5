"""A local web explorer over a bpestore store (``bpestore serve``): the tokenizers, one tokenizer's
vocab and merges, a playground that shows text split into tokens by up to four tokenizers side by
side, a diff of two tokenizers, and plots, all rendered on the server (Flask and Jinja2 templates,
SVG charts, a little plain JavaScript; nothing is fetched from the network).

Safety: the store is opened read-only (:class:`~bpestore.web.data.ReadOnlyStore`); everything shown
is escaped (token texts are untrusted) and a Content-Security-Policy allows only the explorer's own
script and styles; requests whose ``Host`` is not the address served are refused (against DNS
rebinding); and :func:`check_host` refuses a non-loopback address unless asked explicitly.

Needs the ``web`` extra: ``pip install 'bpestore[web]'``.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import os
import re
import socket
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (Flask and Werkzeug are imported where they run: the web extra is optional)
    from flask import Flask, Response
    from werkzeug.serving import BaseWSGIServer

__all__ = ["ListenError", "check_host", "close_app", "create_app", "make_server"]

# The largest form a request may send (a text pasted into the playground, which cuts it to
# views.MAX_TEXT_BYTES and says so): larger is refused (413) before it is read.
MAX_FORM_BYTES = 8 * 1024 * 1024

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(str(address).split("%")[0]).is_loopback for address in addresses)


def check_host(host: str, allow_remote: bool) -> None:
    """ValueError for a host that is not loopback, unless ``allow_remote``: the explorer has no
    login, and anyone who reaches it can read every tokenizer and the stored corpora's samples."""
    if not allow_remote and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host!r}, which is not a loopback address: the explorer has no login "
            "and would show the store to anyone who can reach it; pass --allow-remote to do it anyway"
        )


def _host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without the port or IPv6 brackets."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


def create_app(db: str | os.PathLike[str], *, corpora: Sequence[str | os.PathLike[str]] = (), allowed_hosts: Sequence[str] | None = None) -> Flask:
    """The explorer (a Flask application) over the store at ``db``, read-only.

    ``corpora`` are text files the diff page measures both tokenizers on (a row per file).
    ``allowed_hosts``: the host names (without port) that requests may address; None allows any
    (as for a server opened with ``--allow-remote``).
    """
    from flask import Flask, abort, request

    from ..pretokenize.corpus import check_corpus_path
    from .data import Explorer
    from .views import pages

    paths = [os.fspath(check_corpus_path(path)) for path in corpora]
    app = Flask(__name__)
    app.config["BPESTORE_CORPORA"] = paths
    app.config["MAX_CONTENT_LENGTH"] = MAX_FORM_BYTES
    app.config["MAX_FORM_MEMORY_SIZE"] = MAX_FORM_BYTES
    app.config["BPESTORE_LOCATION"] = os.fspath(db)
    app.extensions["bpestore_explorer"] = Explorer(db)
    app.register_blueprint(pages)
    allowed = None if allowed_hosts is None else {host.lower().strip("[]") for host in allowed_hosts}

    @app.before_request
    def _check_host_header() -> None:
        if allowed is not None:
            if _host_name(request.host).lower() not in allowed:
                abort(421)  # Misdirected Request: a page of another site that resolved to us

    @app.after_request
    def _security_headers(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    return app


def make_server(db: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 8000, *, allow_remote: bool = False, corpora: Sequence[str | os.PathLike[str]] = ()) -> BaseWSGIServer:
    """A threaded HTTP server for the explorer (call ``serve_forever()``; ``server_port`` is the
    port, useful with ``port=0``). Refuses a non-loopback ``host`` unless ``allow_remote``."""
    from werkzeug.serving import WSGIRequestHandler
    from werkzeug.serving import make_server as werkzeug_server

    class RequestHandler(WSGIRequestHandler):
        """Werkzeug's, with its request log in plain text when stderr is not a terminal (a log
        file gets no ANSI colour codes)."""

        def log(self, type: str, message: str, *args: object) -> None:  # noqa: A002 - Werkzeug's name
            if not _is_terminal(sys.stderr):
                args = tuple(_ANSI_CODE.sub("", arg) if isinstance(arg, str) else arg for arg in args)
            super().log(type, message, *args)

    check_host(host, allow_remote)
    allowed = None if allow_remote else ["localhost", "127.0.0.1", "::1", host]
    app = create_app(db, corpora=corpora, allowed_hosts=allowed)
    # Werkzeug prints why it cannot listen (two lines) and calls sys.exit(1): caught, it becomes
    # one ListenError, which the CLI prints as one "Error:" line like any other mistake.
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            return werkzeug_server(host, port, app, threaded=True, request_handler=RequestHandler)
    except SystemExit:
        close_app(app)
        reason = said.getvalue().strip().splitlines()[0] if said.getvalue().strip() else "cannot listen"
        busy = " (another program uses it: stop that program or pass another --port)" if "in use" in said.getvalue() else ""
        raise ListenError(f"cannot listen on {host} port {port}: {reason}{busy}") from None


class ListenError(OSError):
    """The server could not listen on the address asked for (a port in use, an address this
    machine does not have); the message says which and why, in one line."""

    def __str__(self) -> str:
        return str(self.args[0])


_ANSI_CODE = re.compile(r"\x1b\[[0-9;]*m")


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):  # no such method, or closed
        return False


def close_app(app: Flask) -> None:
    """Close the store of an app made by :func:`create_app` (for a server: ``close_app(server.app)``
    after ``server.server_close()``)."""
    app.extensions["bpestore_explorer"].close()
