"""`/console/`: the admin console's built assets (console/ → `authoric/console_dist/`).

Files are served as built; any other path under `/console/` answers `index.html`, so the
single-page app's own routes survive a reload. Paths outside `/console/` never reach here, so
their 404 stays the contract's JSON body.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

from authoric.errors import NotFound

router = APIRouter(include_in_schema=False)

# Hashed asset names never change content, so browsers may keep them; index.html must be
# re-read so a rebuilt console is picked up.
_IMMUTABLE = {"Cache-Control": "public, max-age=31536000, immutable"}
_REVALIDATE = {"Cache-Control": "no-cache"}


def console_dist() -> Path:
    return Path(__file__).resolve().parent.parent / "console_dist"


def _asset(root: Path, path: str) -> Path | None:
    """The built file `path` names, or None (missing, a directory, or outside the build)."""
    candidate = (root / path).resolve()
    if candidate.is_file() and candidate.is_relative_to(root):
        return candidate
    return None


@router.get("/console")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/{path:path}")
async def console_file(path: str) -> FileResponse:
    root = console_dist().resolve()
    index = root / "index.html"
    if not index.is_file():
        raise NotFound("the console is not built: run scripts/setup (or npm --prefix console run build)")
    asset = _asset(root, path) if path else None
    if asset is None and path.startswith("assets/"):
        # A page built earlier asks for an asset this build does not have: HTML would be worse.
        raise NotFound("no such console asset")
    if asset is None or asset == index:
        return FileResponse(index, headers=_REVALIDATE)
    return FileResponse(asset, headers=_IMMUTABLE if asset.parent.name == "assets" else _REVALIDATE)
