"""The code map's imports: every form a language writes them in reaches the file its own rules name, and
nothing outside the repository."""

from __future__ import annotations

from tests.codemap_helpers import edges, map_of, named


def test_python_imports_in_every_form_reach_the_module_they_name() -> None:
    files = {f: "" for f in ("pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/c.py", "pkg/sub/__init__.py")}
    files |= {"util.py": "", "d.py": ""}
    files["pkg/main.py"] = (
        "import util, d\n"
        "from . import a\n"
        "def f():\n"
        "    from .sub import c  # inside a function\n"
        "from pkg.b import (thing,\n    other)\n"
        "import json\n"
        "x = 'from nowhere import this'\n"
    )
    reached = {dst for src, dst in edges(map_of(files)) if src == "pkg/main.py"}
    assert reached == {"util.py", "d.py", "pkg/a.py", "pkg/sub/c.py", "pkg/b.py"}


def test_a_python_import_resolves_to_the_module_python_would_prefer() -> None:
    # A module beats a package of the same name, and either beats the same under src/.
    files = {
        f: ""
        for f in (
            "a.py",
            "a/__init__.py",
            "src/a.py",
            "b/__init__.py",
            "src/b.py",
            "src/c/__init__.py",
            "src/d.py",
            "src/d/__init__.py",
            "src/__init__.py",
            "__init__.py",
            "e/f.py",
            "src/e/f.py",
        )
    }
    files["main.py"] = "import a, b, c, d, src, e.f, missing\nfrom e import f\nfrom src import d\n"
    files["a.py"] = "import a\n"
    code_map = map_of(files)
    assert {dst for src, dst in edges(code_map) if src == "main.py"} == {
        "a.py",
        "b/__init__.py",
        "src/c/__init__.py",
        "src/d.py",
        "src/__init__.py",
        "e/f.py",
    }
    assert not [e for e in code_map.edges if e.src == "a.py"], "never an edge to itself"


def test_javascript_imports_across_lines_requires_and_re_exports_reach_their_files() -> None:
    files = {f: "" for f in ("web/a.js", "web/b.ts", "web/lib/index.js", "web/c.mjs", "web/d.js", "src/ui/e.tsx")}
    files["web/main.js"] = (
        'import {\n  one,\n  two,\n} from "./a";\n'
        "const b = require('./b.js');\n"
        "export * from './lib';\n"
        'const c = await import("./c.mjs");\n'
        "// import './d'\n"
        'const skipped = "require" + "(./e)";\n'
        'import x from "left-pad";\n'
        'import E from "@/ui/e";\n'
    )
    reached = {dst for src, dst in edges(map_of(files)) if src == "web/main.js"}
    assert reached == {"web/a.js", "web/b.ts", "web/lib/index.js", "web/c.mjs", "src/ui/e.tsx"}


def test_a_call_on_a_library_import_never_falls_back_to_a_name_defined_in_the_repository() -> None:
    code_map = map_of(
        {
            "web/proxy.js": "const http = require('http');\nfunction proxy() { return http.request({}); }\n",
            "web/client.js": "export function request(url) { return fetch(url); }\n",
        }
    )
    assert ("web/proxy.js", "web/client.js") not in edges(code_map)


def test_go_imports_resolve_through_the_module_path_of_go_mod() -> None:
    code_map = map_of(
        {
            "go.mod": "module example.com/app\n\ngo 1.22\n",
            "internal/auth/auth.go": 'package auth\n\nfunc IsAdmin(id string) bool { return id == "root" }\n',
            "cmd/server/main.go": (
                'package main\n\nimport (\n\t"fmt"\n\t"example.com/app/internal/auth"\n)\n\n'
                'func main() { fmt.Println(auth.IsAdmin("x")) }\n'
            ),
        }
    )
    assert named(code_map, "cmd/server/main.go", "internal/auth/auth.go") == {("call", "IsAdmin")}


def test_java_and_kotlin_imports_reach_the_file_that_declares_the_type_in_that_package() -> None:
    code_map = map_of(
        {
            "src/main/java/com/ex/auth/Tokens.java": "package com.ex.auth;\npublic class Tokens {\n"
            "  public static boolean valid(String t) { return t != null; }\n}\n",
            "src/main/java/com/ex/web/Api.java": "package com.ex.web;\nimport com.ex.auth.Tokens;\n"
            "class Api { boolean ok(String t) { return Tokens.valid(t); } }\n",
            "app/src/Main.kt": 'package com.ex.app\nimport com.ex.auth.Tokens\nfun main() { Tokens.valid("x") }\n',
        }
    )
    tokens = "src/main/java/com/ex/auth/Tokens.java"
    assert ("call", "valid") in named(code_map, "src/main/java/com/ex/web/Api.java", tokens)
    assert ("call", "valid") in named(code_map, "app/src/Main.kt", tokens)


def test_rust_mod_and_use_paths_reach_their_module_files() -> None:
    code_map = map_of(
        {
            "src/main.rs": "mod auth;\nmod store;\nuse crate::store::open;\nfn main() { auth::check(); open(); }\n",
            "src/auth.rs": "pub fn check() -> bool { true }\n",
            "src/store/mod.rs": "pub fn open() {}\n",
        }
    )
    assert ("call", "check") in named(code_map, "src/main.rs", "src/auth.rs")
    assert ("call", "open") in named(code_map, "src/main.rs", "src/store/mod.rs")


def test_c_includes_php_uses_and_ruby_requires_reach_their_files() -> None:
    code_map = map_of(
        {
            "src/auth/check.h": "int is_admin(const char *user);\n",
            "src/auth/check.c": '#include "check.h"\nint is_admin(const char *user) { return user[0] == 0; }\n',
            "src/main.c": '#include "auth/check.h"\nint main(void) { return is_admin("x"); }\n',
            "app/Services/Auth.php": "<?php\nnamespace App\\Services;\nclass Auth { public function ok() {} }\n",
            "app/Http/Home.php": "<?php\nnamespace App\\Http;\nuse App\\Services\\Auth;\n"
            "class Home { function show() { return new Auth(); } }\n",
            "lib/policy.rb": "class Policy\n  def self.allow?(u)\n    true\n  end\nend\n",
            "app/users.rb": "require_relative '../lib/policy'\nPolicy.allow?(nil)\n",
        }
    )
    assert ("import", "auth/check.h") in named(code_map, "src/main.c", "src/auth/check.h")
    assert ("call", "is_admin") in named(code_map, "src/main.c", "src/auth/check.c")
    assert ("call", "Auth") in named(code_map, "app/Http/Home.php", "app/Services/Auth.php")
    assert ("call", "allow?") in named(code_map, "app/users.rb", "lib/policy.rb")
