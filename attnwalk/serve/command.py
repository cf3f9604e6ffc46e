"""The body of `attnwalk serve`: check what it needs before anything listens, then serve."""

from __future__ import annotations

from pathlib import Path

from attnwalk.errors import AttnwalkError

NEEDS = "attnwalk serve needs textual-serve: pip install 'attnwalk[serve]'"


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
        raise AttnwalkError(f"cannot listen on {host}:{port}: {exc.strerror or exc}"
                            f"{'; choose another --port' if exc.errno == 98 else ''}") from None
    finally:
        if listing is not None:
            listing.unlink(missing_ok=True)
    return 0
