"""The body of `attnwalk serve`: check what it needs before anything listens, then serve."""

from __future__ import annotations

from pathlib import Path

from attnwalk.errors import AttnwalkError

NEEDS = "attnwalk serve needs textual-serve: in attnwalk's checkout, pip install '.[serve]'"


def serve_command(*, lessons: Path | None, host: str, port: int, public_url: str | None,
                  lang: str | None, max_sessions: int) -> int:
    try:
        import textual_serve  # noqa: F401  (an optional extra: only this command needs it)
    except ImportError:
        raise AttnwalkError(NEEDS) from None
    from attnwalk.serve.lessons import Offered, checked_folder, listing_path, write_listing
    from attnwalk.serve.server import ClassroomServer, session_command
    from attnwalk.text import detect_lang

    lang = detect_lang(lang)
    offered = checked_folder(lessons) if lessons is not None else Offered()
    if public_url is not None and not public_url.startswith(("http://", "https://")):
        raise AttnwalkError(f"--public-url {public_url}: expected a URL starting with http:// or https://")
    _can_listen(host, port)  # before the server says it serves
    listing = listing_path()
    try:
        write_listing(offered, listing)
    except OSError:
        listing = None  # each picker works the list out itself: slower, the same list
    server = ClassroomServer(session_command(lessons, lang, listing), host=host, port=port,
                             public_url=public_url.rstrip("/") if public_url else None,
                             max_sessions=max_sessions, lessons=len(offered.lessons()))
    try:
        server.serve()
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from None
    finally:
        if listing is not None:
            listing.unlink(missing_ok=True)
    return 0


def _can_listen(host: str, port: int) -> None:
    """Bind host:port as the server will (SO_REUSEADDR, as aiohttp), then let it go: a port in use
    or an address this computer does not have is said before anything is announced."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as exc:
        raise _cannot_listen(host, port, exc) from None


def _cannot_listen(host: str, port: int, exc: OSError) -> AttnwalkError:
    import errno

    reason = exc.strerror or str(exc)
    hint = "; choose another --port" if exc.errno == errno.EADDRINUSE else ""
    return AttnwalkError(f"cannot listen on {host}:{port}: {reason}{hint}")
