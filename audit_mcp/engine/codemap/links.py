"""Strings that tie code to other files: templates, configuration, dotted module paths, and routes.

- A string that is a path of the repository (as written, or beside the file) links to that file.
- A string passed to a call that renders (``render``, ``render_template``, ``view``, ``View`` …) names a
  template: the one file under a ``templates`` or ``views`` folder whose path ends with it, with or without a
  template extension (``users/show`` is ``app/views/users/show.html.erb``, Laravel's ``users.show`` is
  ``resources/views/users/show.blade.php``).
- In Python, a dotted string naming a module of the repository links to it, and to the class it ends with
  when the module defines it (settings' middleware, backends and apps, ``"catalogue.Product"`` model
  references, ``get_model("catalogue", "Product")``).
- A call named like a router's verb (``get``, ``post``, ``path``, ``HandleFunc``, ``@GetMapping`` …) with a
  URL pattern is a route: its handler is the definition passed on the same line, or the one it decorates;
  Rails' ``to: "users#show"`` is ``show`` in ``users_controller.rb``. Handlers are entry points.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence

from audit_mcp.engine.codemap import modules
from audit_mcp.engine.codemap.extract import Def, String
from audit_mcp.engine.codemap.index import Index
from audit_mcp.engine.codemap.model import Entry, Link

_VERBS = """get post put patch delete del head options all any use route path re_path url handle handlefunc handler
    match getmapping postmapping putmapping deletemapping patchmapping requestmapping httpget httppost httpput
    httpdelete httppatch api_view"""
ROUTE_VERBS = frozenset(_VERBS.split())
_ROUTE = re.compile(r"^(?:/|\^)[\w\-./<>{}:*$?()\[\]|+\\]*$|^[\w\-./<>{}:*]+/$")
_DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_RAILS_ACTION = re.compile(r"^([\w/]+)#(\w+)$")
_TEMPLATE_DIRS = ("templates/", "views/", "template/", "view/", "layouts/", "pages/")
_TEMPLATE_EXTS = (
    ".html",
    ".htm",
    ".jinja",
    ".jinja2",
    ".j2",
    ".ejs",
    ".pug",
    ".hbs",
    ".handlebars",
    ".mustache",
    ".njk",
    ".twig",
    ".tpl",
    ".erb",
    ".html.erb",
    ".haml",
    ".slim",
    ".blade.php",
    ".php",
    ".cshtml",
    ".liquid",
    ".jsp",
)
_RENDERS = ("render", "view", "template")
Found = tuple[str | None, Link | None, Entry | None]
Target = tuple[str, Def | None]


def strings(
    index: Index,
    path: str,
    fam: str,
    defs: Sequence[Def],
    found: Sequence[String],
    by_line: Mapping[int, list[Target]],
) -> Iterator[Found]:
    """The links and entry points the strings of ``path`` make."""
    previous: String | None = None
    for text, line, ctx in found:
        verb = ctx.lstrip("@").rsplit(".", 1)[-1].lower()
        if verb in ROUTE_VERBS and (_ROUTE.match(text) or _RAILS_ACTION.match(text)):
            yield from _route(index, path, defs, text, line, ctx, by_line)
        else:
            target = _named_file(index, path, fam, text, verb)
            if target is None and previous is not None and previous[1:] == (line, ctx) and fam == "python":
                target = _dotted(index, f"{previous[0]}.{text}")  # get_model("catalogue", "Product")
            if target is not None:
                file, d = target
                span = (d[2], d[3]) if d is not None else (0, 0)
                yield file, ("link", d[0] if d is not None else text, line, *span, 1), None
        previous = (text, line, ctx)


def _named_file(index: Index, path: str, fam: str, text: str, verb: str) -> Target | None:
    known = index.known
    if "/" in text or "." in text:
        clean = text.lstrip("/") if not text.startswith("./") else text[2:]
        if clean in known:
            return clean, None
        if (beside := modules.beside(path, text, known)) is not None:
            return beside, None
    if fam == "python" and _DOTTED.match(text):
        found = _dotted(index, text)
        if found is not None:
            return found
    if any(word in verb for word in _RENDERS):
        return _template(index, path, text)
    return None


def _template(index: Index, path: str, text: str) -> Target | None:
    """The template a render call names: the file under a templates or views folder ending with it."""
    tails = [text.strip("/")]
    if "/" not in text and "." in text and not text.endswith(_TEMPLATE_EXTS):
        tails.append(text.replace(".", "/"))  # Laravel's dotted view names
    for tail in tails:
        has_ext = tail.endswith(_TEMPLATE_EXTS) or "." in posixpath.basename(tail)
        for candidate in [tail] if has_ext else [tail + ext for ext in _TEMPLATE_EXTS]:
            found = index.tails.one(candidate, near=path)
            if found is not None and _under_templates(found):
                return found, None
    return None


def _under_templates(path: str) -> bool:
    return any(path.startswith(d) or f"/{d}" in path for d in _TEMPLATE_DIRS)


def _dotted(index: Index, text: str) -> Target | None:
    """A dotted Python path: a module (``app.middleware``), a class of one (``app.middleware.Auth``), or
    Django's ``app_label.Model`` (the model class in that app's ``models``)."""
    stem = text.replace(".", "/")
    if (module := index.python.get(stem)) is not None:
        return module, None
    head, _, last = stem.rpartition("/")
    candidates = [index.python.get(head)]
    if "/" not in head:
        candidates += [index.tails.one(f"{head}/models.py"), index.tails.one(f"{head}/models/__init__.py")]
    for module in candidates:
        if module is not None and (d := index.lookup(module, last)) is not None:
            return module, d
    return None


def _route(
    index: Index,
    path: str,
    defs: Sequence[Def],
    text: str,
    line: int,
    ctx: str,
    by_line: Mapping[int, list[Target]],
) -> Iterator[Found]:
    what = f"route {text}"
    if ctx.startswith("@"):
        # A decorator or annotation: the definition it belongs to (it spans the line, or starts just below).
        owner = min(
            (d for d in defs if d[2] <= line <= d[3] or 0 < d[2] - line <= 3),
            key=lambda d: (d[3] - d[2], d[2]),
            default=None,
        )
        if owner is not None:
            yield None, None, Entry(path, owner[2], owner[0], what)
        return
    rails = _RAILS_ACTION.match(text)
    if rails is not None:
        controller = index.tails.one(f"{rails[1]}_controller.rb", near=path)
        d = index.lookup(controller, rails[2]) if controller is not None else None
        if controller is not None and d is not None:
            yield controller, ("route", d[0], line, d[2], d[3], 1), Entry(controller, d[2], d[0], f"route to {text}")
        return
    for target, d in by_line.get(line, ()):
        if d is None or (d[1] == "class" and target == path):
            continue
        where = f"{what} ({path}:{line})" if target != path else what
        link = ("route", d[0], line, d[2], d[3], 1) if target != path else None
        yield (target if link else None), link, Entry(target, d[2], d[0], where)
