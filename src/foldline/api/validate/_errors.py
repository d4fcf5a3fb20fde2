"""Locations and error construction: where an element sits (`_Loc`), and the errors that name it.

`RequestValidationError.message` is the text the API sends, with the API's prefix (its pydantic
location carries discriminator tags: `messages.1.content.1.tool_use.id`); `.path` is the plain JSON
path of the offending element (`messages.1.content.1.id`), `""` when the whole body is at fault.
"""

from __future__ import annotations

from foldline.errors import RequestValidationError


class _Tag(str):
    """A discriminator tag in a location: part of the API's wording, not of the JSON path."""

    __slots__ = ()


class _Loc:
    """Where an element sits, as path segments; both renderings are built only for an error.

    `json` is the plain JSON path (`messages.1.content.0.id`); `api` is the API's location, which
    also names each discriminated-union member (`messages.1.content.0.tool_use.id`).

    A location is a link to its parent, so `at` and `tag` cost one small object whatever the
    depth: the checks make one for nearly every block of every request, and most are never read.
    """

    __slots__ = ("parent", "part")

    def __init__(self, parent: _Loc | None = None, part: str | int = "") -> None:
        self.parent = parent
        self.part = part

    def at(self, key: str | int) -> _Loc:
        return _Loc(self, key)

    def tag(self, name: str) -> _Loc:
        return _Loc(self, _Tag(name))

    @property
    def parts(self) -> tuple[str | int, ...]:
        parts: list[str | int] = []
        loc: _Loc | None = self
        while loc is not None and loc.parent is not None:
            parts.append(loc.part)
            loc = loc.parent
        return tuple(reversed(parts))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Loc) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"_Loc({self.parts!r})"

    @property
    def json(self) -> str:
        return ".".join(str(part) for part in self.parts if not isinstance(part, _Tag))

    @property
    def api(self) -> str:
        return ".".join(str(part) for part in self.parts)


_ROOT = _Loc()


def _error(loc: _Loc, text: str) -> RequestValidationError:
    """An error prefixed with the API's location, as the API's schema layer words it."""
    return RequestValidationError(f"{loc.api}: {text}" if loc.api else text, path=loc.json)


def _bare(text: str, loc: _Loc) -> RequestValidationError:
    """An error whose API text carries its own (or no) prefix; `loc` only sets the path."""
    return RequestValidationError(text, path=loc.json)
