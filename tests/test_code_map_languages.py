"""The code map of each language: the definitions it reads (with their line spans and the class a method
belongs to) and the edges it resolves, from small files and from the four fixture repositories."""

from __future__ import annotations

import pytest

from tests.codemap_helpers import defs_of, edges, map_of, named
from tests.conftest import FIXTURES

DEFINITIONS = {
    "app/views.py": (
        "import os\n\n@login_required\ndef view(request):\n    return 1\n\n\nclass Shop(Base):\n"
        "    def buy(self, item):\n        return item\n",
        [("view", "function", 3, 5, ""), ("Shop", "class", 8, 10, ""), ("buy", "method", 9, 10, "Shop")],
    ),
    "web/cart.js": (
        "class Cart {\n  add(item) {\n    return item;\n  }\n}\nfunction total(cart) {\n  return 0;\n}\n"
        "const clear = () => {};\nmodule.exports = { methods(self) { return { can(req) { return true; } }; } };\n",
        [
            ("Cart", "class", 1, 5, ""),
            ("add", "method", 2, 4, "Cart"),
            ("total", "function", 6, 8, ""),
            ("clear", "function", 9, 9, ""),
            ("methods", "function", 10, 10, ""),
            ("can", "function", 10, 10, ""),
        ],
    ),
    "src/api.ts": (
        "export interface Api {\n  get(id: string): string;\n}\nexport class Client implements Api {\n"
        "  get(id: string): string {\n    return id;\n  }\n}\nexport type Id = string;\n",
        [
            ("Api", "class", 1, 3, ""),
            ("get", "method", 2, 2, "Api"),
            ("Client", "class", 4, 8, ""),
            ("get", "method", 5, 7, "Client"),
            ("Id", "class", 9, 9, ""),
        ],
    ),
    "src/View.tsx": (
        "export function View(props: { name: string }) {\n  return <Panel title={props.name} />;\n}\n",
        [("View", "function", 1, 3, "")],
    ),
    "auth/auth.go": (
        'package auth\n\ntype Guard struct{}\n\nfunc (g *Guard) Allow(user string) bool {\n\treturn user != ""\n}\n\n'
        "func New() *Guard { return &Guard{} }\n",
        [("Guard", "class", 3, 3, ""), ("Allow", "method", 5, 7, "Guard"), ("New", "function", 9, 9, "")],
    ),
    "src/Auth.java": (
        "package x;\npublic class Auth {\n  @Override\n  public boolean check(String u) {\n    return u != null;\n  }\n"
        "  interface Hook { void run(); }\n}\n",
        [
            ("Auth", "class", 2, 8, ""),
            ("check", "method", 3, 6, "Auth"),
            ("Hook", "class", 7, 7, ""),
            ("run", "method", 7, 7, "Hook"),
        ],
    ),
    "src/Auth.kt": (
        "package x\nclass Auth(val name: String) {\n    fun check(u: String): Boolean {\n"
        "        return u.isNotEmpty()\n    }\n}\nobject Registry\nfun main() {}\n",
        [
            ("Auth", "class", 2, 6, ""),
            ("check", "method", 3, 5, "Auth"),
            ("Registry", "class", 7, 7, ""),
            ("main", "function", 8, 8, ""),
        ],
    ),
    "src/auth.rs": (
        "pub struct Guard;\nimpl Guard {\n    pub fn allow(&self) -> bool {\n        true\n    }\n}\n"
        "pub trait Check { fn check(&self); }\nfn main() {}\n",
        [
            ("Guard", "class", 1, 1, ""),
            ("allow", "method", 3, 5, "Guard"),
            ("Check", "class", 7, 7, ""),
            ("check", "method", 7, 7, "Check"),
            ("main", "function", 8, 8, ""),
        ],
    ),
    "src/auth.c": (
        "struct user { int id; };\nstatic int helper(int a) { return a; }\nchar *name_of(struct user *u) {\n"
        "  return 0;\n}\n#define MAX(a, b) ((a) > (b) ? (a) : (b))\n",
        [
            ("user", "class", 1, 1, ""),
            ("helper", "function", 2, 2, ""),
            ("name_of", "function", 3, 5, ""),
            ("MAX", "function", 6, 6, ""),
        ],
    ),
    "src/auth.cpp": (
        "namespace app {\nclass Guard {\n public:\n  bool allow() { return true; }\n};\n"
        "bool Guard::deny() {\n  return false;\n}\n}\n",
        [
            ("Guard", "class", 2, 5, ""),
            ("allow", "method", 4, 4, "Guard"),
            ("deny", "method", 6, 8, "Guard"),
        ],
    ),
    "src/Auth.cs": (
        "namespace X.Y {\n  public class Auth {\n    public bool Check(string u) {\n      return u != null;\n    }\n"
        "  }\n  interface IHook { void Run(); }\n}\n",
        [
            ("Auth", "class", 2, 6, ""),
            ("Check", "method", 3, 5, "Auth"),
            ("IHook", "class", 7, 7, ""),
            ("Run", "method", 7, 7, "IHook"),
        ],
    ),
    "lib/auth.rb": (
        "module Auth\n  class Policy\n    def allow?(user)\n      true\n    end\n  end\nend\ndef top; end\n",
        [
            ("Auth", "class", 1, 7, ""),
            ("Policy", "class", 2, 6, ""),
            ("allow?", "method", 3, 5, "Policy"),
            ("top", "function", 8, 8, ""),
        ],
    ),
    "src/Auth.php": (
        "<?php\nnamespace App;\nclass Auth {\n    public function check($u) {\n        return $u !== null;\n    }\n}\n"
        "function helper() {}\n",
        [("Auth", "class", 3, 7, ""), ("check", "method", 4, 6, "Auth"), ("helper", "function", 8, 8, "")],
    ),
}


@pytest.mark.parametrize("path", sorted(DEFINITIONS), ids=lambda p: p.rsplit(".", 1)[1])
def test_definitions_are_read_with_their_spans_and_the_class_a_method_belongs_to(path: str) -> None:
    text, expected = DEFINITIONS[path]
    assert defs_of(path, text) == expected


@pytest.mark.parametrize(
    ("path", "text", "expected"),
    [
        (
            "src/Main.scala",
            "object Main {\n  def run(): Unit = {\n    println(1)\n  }\n}\n",
            ("run", "method", 2, 4, "Main"),
        ),
        ("src/a.swift", "class A {\n  func run() {\n  }\n}\n", ("run", "method", 2, 3, "A")),
        ("src/a.lua", "local function run()\n  return 1\nend\n", ("run", "function", 1, 3, "")),
    ],
    ids=["scala", "swift", "lua"],
)
def test_a_language_without_a_query_of_its_own_still_gives_its_definitions(
    path: str, text: str, expected: tuple[str, str, int, int, str]
) -> None:
    assert expected in defs_of(path, text)


def _fixture(name: str) -> dict[str, str]:
    root = FIXTURES / "codemap" / name
    return {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}


def test_the_django_app_s_views_checks_templates_routes_and_settings_are_linked() -> None:
    code_map = map_of(_fixture("django_shop"))
    assert {("call", "can_edit_product"), ("call", "can_view_product")} <= named(
        code_map, "catalogue/views.py", "catalogue/permissions.py"
    )
    assert ("link", "catalogue/product_detail.html") in named(
        code_map, "catalogue/views.py", "catalogue/templates/catalogue/product_detail.html"
    )
    assert ("route", "delete_product") in named(code_map, "catalogue/urls.py", "catalogue/views.py")
    assert ("link", "DashboardStaffMiddleware") in named(code_map, "shop/settings.py", "shop/middleware.py")
    assert ("link", "catalogue.urls") in named(code_map, "shop/urls.py", "catalogue/urls.py")
    # A model named by its app label ("catalogue.Product") is the class in that app's models.
    assert ("link", "Product") in named(code_map, "reviews/models.py", "catalogue/models.py")
    assert ("use", "Product") in named(code_map, "catalogue/forms.py", "catalogue/models.py")
    handlers = {(e.path, e.symbol) for e in code_map.entries}
    assert ("catalogue/views.py", "delete_product") in handlers


def test_the_express_api_s_routes_reach_their_middleware_and_handlers() -> None:
    code_map = map_of(_fixture("express_api"))
    assert ("route", "requireAdmin") in named(code_map, "src/routes/admin.ts", "src/middleware/auth.ts")
    assert ("route", "promoteUser") in named(code_map, "src/routes/admin.ts", "src/controllers/users.ts")
    assert ("call", "verifyToken") in named(code_map, "src/middleware/auth.ts", "src/services/tokens.ts")
    assert ("use", "AuthedRequest") in named(code_map, "src/controllers/users.ts", "src/middleware/auth.ts")
    routes = {e.how for e in code_map.entries if e.symbol == "promoteUser"}
    assert routes == {"route /users/:id/promote (src/routes/admin.ts:9)"}


def test_the_go_service_s_packages_calls_and_handlers_are_linked() -> None:
    code_map = map_of(_fixture("go_service"))
    assert ("call", "CanModify") in named(code_map, "internal/handlers/notes.go", "internal/auth/owner.go")
    # The same package needs no import; a method through an interface field named after its package.
    assert ("call", "writeJSON") in named(code_map, "internal/handlers/notes.go", "internal/handlers/json.go")
    assert ("name", "Delete") in named(code_map, "internal/handlers/notes.go", "internal/store/store.go")
    assert ("route", "DeleteNote") in named(code_map, "cmd/notes/main.go", "internal/handlers/notes.go")
    assert ("cmd/notes/main.go", "main", "a main function") in {(e.path, e.symbol, e.how) for e in code_map.entries}


def test_the_java_service_s_beans_are_reached_by_the_fields_named_after_them() -> None:
    code_map = map_of(_fixture("java_service"))
    base = "src/main/java/com/example/notes/"
    controller = base + "web/NoteController.java"
    assert {("name", "canRead"), ("name", "canModify"), ("use", "AccessPolicy")} <= named(
        code_map, controller, base + "security/AccessPolicy.java"
    )
    assert ("name", "remove") in named(code_map, controller, base + "service/NoteService.java")
    assert ("use", "NoteRepository") in named(
        code_map, base + "service/NoteService.java", base + "repo/NoteRepository.java"
    )
    routes = {(e.symbol, e.how) for e in code_map.entries if e.path == controller}
    assert ("delete", "route /{id}") in routes


def test_a_service_registry_resolves_to_the_module_named_like_the_receiver() -> None:
    code_map = map_of(
        {
            "modules/permission/index.js": "module.exports = { methods(self) { return {\n"
            "  can(req, action) { return req.user && req.user.admin; }\n} } };\n",
            "modules/login/index.js": "module.exports = { routes(self) { return {\n"
            "  login(req) { if (!self.apos.permission.can(req, 'login')) { throw new Error('no'); } }\n} } };\n",
            "modules/other/index.js": "module.exports = { can() { return true; } };\n",
        }
    )
    assert named(code_map, "modules/login/index.js", "modules/permission/index.js") == {("name", "can")}
    assert ("modules/login/index.js", "modules/other/index.js") not in edges(code_map)


def test_a_name_defined_in_several_files_is_left_unresolved() -> None:
    code_map = map_of(
        {
            "a/one.py": "def refresh_catalogue():\n    pass\n",
            "b/two.py": "def refresh_catalogue():\n    pass\n",
            "c/main.py": "def run(store):\n    store.refresh_catalogue()\n    cache.refresh_catalogue()\n",
        }
    )
    assert not [e for e in code_map.edges if e.src == "c/main.py"]
