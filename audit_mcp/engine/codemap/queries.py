"""The tree-sitter query of each language the map reads in full, in one vocabulary of capture names.

- ``@name`` with ``@def.class`` / ``@def.function`` on the definition: a definition and its line span (a
  function inside a class becomes a method); ``@def.impl`` is a container only (a Rust ``impl`` names the type
  its functions belong to); ``@parent`` names the type a method belongs to where the method says it (a Go
  receiver, C++'s ``Type::name``).
- ``@import`` an import statement, read by ``imports``; ``@import.spec`` a string an import names (a C
  ``#include``, a Rust ``mod name;``), ``@import.bind`` the name a ``require`` binds.
- ``@call`` what is called, ``@use`` a name used otherwise (an argument, a type, a decorator, a base class):
  the node's text is the chain (``self.apos.permission.can``), or ``@recv`` and the name joined by a dot.
- ``@str`` a string's content, ``@ctx`` what the call it is an argument of calls (``@ctx.deco`` for a
  decorator, annotation or attribute).
- ``@package`` the package or namespace the file declares.
"""

from __future__ import annotations

_PYTHON = """
(class_definition name: (identifier) @name) @def.class
(function_definition name: (identifier) @name) @def.function
(decorated_definition definition: [(function_definition name: (identifier) @name)
                                   (class_definition name: (identifier) @name)]) @def.decorated
(import_statement) @import
(import_from_statement) @import
(call function: [(identifier) (attribute)] @call)
(argument_list [(identifier) (attribute)] @use)
(keyword_argument value: [(identifier) (attribute)] @use)
(decorator [(identifier) (attribute)] @use)
(type [(identifier) (attribute)] @use)
(list [(identifier) (attribute)] @use)
(assignment right: [(identifier) (attribute)] @use)
(call function: [(identifier) (attribute)] @ctx arguments: (argument_list (string (string_content) @str)))
(call function: [(identifier) (attribute)] @ctx
      arguments: (argument_list (keyword_argument value: (string (string_content) @str))))
(decorator (call function: [(identifier) (attribute)] @ctx.deco
                 arguments: (argument_list (string (string_content) @str))))
(assignment right: (string (string_content) @str))
(list (string (string_content) @str))
(tuple (string (string_content) @str))
(pair value: (string (string_content) @str))
"""

# JavaScript's patterns, which TypeScript's grammars share; TypeScript adds its types below.
_JS_COMMON = """
(class_declaration name: (_) @name) @def.class
(class name: (_) @name) @def.class
(function_declaration name: (identifier) @name) @def.function
(generator_function_declaration name: (identifier) @name) @def.function
(method_definition name: [(property_identifier) (identifier)] @name) @def.function
(variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (class)]) @def.function
(pair key: [(property_identifier) (string)] @name value: [(function_expression) (arrow_function)]) @def.function
(assignment_expression left: (member_expression property: (property_identifier) @name)
                       right: [(function_expression) (arrow_function)]) @def.function
(import_statement) @import
(export_statement source: (string (string_fragment) @import.spec))
(variable_declarator name: (_) @import.bind
                     value: (call_expression function: (identifier) @import.require
                                             arguments: (arguments . (string (string_fragment) @import.spec))))
(call_expression function: [(identifier) (member_expression)] @call)
(new_expression constructor: [(identifier) (member_expression)] @call)
(arguments [(identifier) (member_expression)] @use)
(call_expression function: [(identifier) (member_expression) (import)] @ctx
                 arguments: (arguments (string (string_fragment) @str)))
(decorator (call_expression function: [(identifier) (member_expression)] @ctx.deco
                            arguments: (arguments (string (string_fragment) @str))))
(variable_declarator value: (string (string_fragment) @str))
(pair value: (string (string_fragment) @str))
(array (string (string_fragment) @str))
"""
_JSX = """
(jsx_opening_element name: [(identifier) (member_expression)] @use)
(jsx_self_closing_element name: [(identifier) (member_expression)] @use)
"""
_JAVASCRIPT = (
    _JS_COMMON
    + _JSX
    + """
(class_heritage [(identifier) (member_expression)] @use)
"""
)
_TYPESCRIPT = (
    _JS_COMMON
    + """
(interface_declaration name: (type_identifier) @name) @def.class
(type_alias_declaration name: (type_identifier) @name) @def.class
(enum_declaration name: (identifier) @name) @def.class
(abstract_class_declaration name: (type_identifier) @name) @def.class
(method_signature name: (property_identifier) @name) @def.function
(extends_clause value: [(identifier) (member_expression)] @use)
(implements_clause (type_identifier) @use)
(type_annotation (type_identifier) @use)
(generic_type name: (type_identifier) @use)
(decorator [(identifier) @use (call_expression function: (identifier) @use)])
"""
)

_GO = """
(package_clause (package_identifier) @package)
(function_declaration name: (identifier) @name) @def.function
(method_declaration receiver: (parameter_list (parameter_declaration
                      type: [(type_identifier) @parent (pointer_type (type_identifier) @parent)
                             (generic_type type: (type_identifier) @parent)
                             (pointer_type (generic_type type: (type_identifier) @parent))]))
                    name: (field_identifier) @name) @def.function
(type_spec name: (type_identifier) @name) @def.class
(method_elem name: (field_identifier) @name) @def.function
(import_spec) @import
(call_expression function: [(identifier) (selector_expression)] @call)
(composite_literal type: [(type_identifier) (qualified_type)] @use)
(argument_list [(identifier) (selector_expression)] @use)
(qualified_type) @use
(parameter_declaration type: (type_identifier) @use)
(field_declaration type: [(type_identifier) (pointer_type (type_identifier))] @use)
(call_expression function: [(identifier) (selector_expression)] @ctx
                 arguments: (argument_list [(interpreted_string_literal (interpreted_string_literal_content) @str)
                                            (raw_string_literal (raw_string_literal_content) @str)]))
"""

_JAVA = """
(package_declaration [(scoped_identifier) (identifier)] @package)
(class_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.class
(enum_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(annotation_type_declaration name: (identifier) @name) @def.class
(method_declaration name: (identifier) @name) @def.function
(import_declaration) @import
(method_invocation object: (_) @recv name: (identifier) @call)
(method_invocation !object name: (identifier) @call)
(object_creation_expression type: [(type_identifier) (scoped_type_identifier)] @call)
(type_identifier) @use
(marker_annotation name: (identifier) @use)
(annotation name: (identifier) @use)
(method_reference) @use
(argument_list [(identifier) (field_access)] @use)
(method_invocation name: (identifier) @ctx arguments: (argument_list (string_literal (string_fragment) @str)))
(annotation name: (identifier) @ctx.deco
            arguments: (annotation_argument_list [(string_literal (string_fragment) @str)
                                                  (element_value_pair value: (string_literal (string_fragment) @str))]))
(return_statement (string_literal (string_fragment) @str))
(variable_declarator value: (string_literal (string_fragment) @str))
"""

_KOTLIN = """
(package_header (identifier) @package)
(class_declaration (type_identifier) @name) @def.class
(object_declaration (type_identifier) @name) @def.class
(function_declaration (simple_identifier) @name) @def.function
(import_header) @import
(call_expression (simple_identifier) @call)
(call_expression (navigation_expression) @call)
(user_type (type_identifier) @use)
(value_argument [(simple_identifier) (navigation_expression) (callable_reference)] @use)
(call_expression [(simple_identifier) (navigation_expression)] @ctx
                 (call_suffix (value_arguments (value_argument (string_literal (string_content) @str)))))
(annotation (constructor_invocation (user_type (type_identifier) @ctx.deco)
                                    (value_arguments (value_argument (string_literal (string_content) @str)))))
(jump_expression (string_literal (string_content) @str))
"""

_RUST = """
(function_item name: (identifier) @name) @def.function
(function_signature_item name: (identifier) @name) @def.function
(struct_item name: (type_identifier) @name) @def.class
(enum_item name: (type_identifier) @name) @def.class
(union_item name: (type_identifier) @name) @def.class
(trait_item name: (type_identifier) @name) @def.class
(type_item name: (type_identifier) @name) @def.class
(mod_item name: (identifier) @name body: (declaration_list)) @def.class
(mod_item name: (identifier) @import.spec !body)
(impl_item type: [(type_identifier) @name (generic_type type: (type_identifier) @name)]) @def.impl
(macro_definition name: (identifier) @name) @def.function
(use_declaration) @import
(call_expression function: [(identifier) (scoped_identifier) (field_expression)] @call)
(macro_invocation macro: [(identifier) (scoped_identifier)] @call)
(struct_expression name: [(type_identifier) (scoped_type_identifier)] @use)
(type_identifier) @use
(scoped_type_identifier) @use
(arguments [(identifier) (scoped_identifier) (field_expression)] @use)
(call_expression function: [(identifier) (scoped_identifier) (field_expression)] @ctx
                 arguments: (arguments (string_literal (string_content) @str)))
(attribute_item (attribute (identifier) @ctx.deco arguments: (token_tree (string_literal (string_content) @str))))
"""

_C_COMMON = """
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @def.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator
                                                                 declarator: (identifier) @name))) @def.function
(struct_specifier name: (type_identifier) @name body: (_)) @def.class
(enum_specifier name: (type_identifier) @name body: (_)) @def.class
(union_specifier name: (type_identifier) @name body: (_)) @def.class
(type_definition declarator: (type_identifier) @name) @def.class
(preproc_function_def name: (identifier) @name) @def.function
(preproc_include path: (string_literal (string_content) @import.spec))
(call_expression function: [(identifier) (field_expression)] @call)
(type_identifier) @use
(argument_list (identifier) @use)
(initializer_list (identifier) @use)
(initializer_pair value: (identifier) @use)
(call_expression function: [(identifier) (field_expression)] @ctx
                 arguments: (argument_list (string_literal (string_content) @str)))
"""
_C = _C_COMMON
_CPP = (
    _C_COMMON
    + """
(function_definition declarator: (function_declarator
                      declarator: (qualified_identifier scope: (_) @parent name: (identifier) @name))) @def.function
(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @def.function
(class_specifier name: (type_identifier) @name body: (_)) @def.class
(call_expression function: [(qualified_identifier) (template_function)] @call)
(namespace_definition name: (namespace_identifier) @package)
"""
)

_CSHARP = """
(namespace_declaration name: (_) @package)
(file_scoped_namespace_declaration name: (_) @package)
(class_declaration name: (identifier) @name) @def.class
(interface_declaration name: (identifier) @name) @def.class
(struct_declaration name: (identifier) @name) @def.class
(enum_declaration name: (identifier) @name) @def.class
(record_declaration name: (identifier) @name) @def.class
(method_declaration name: (identifier) @name) @def.function
(local_function_statement name: (identifier) @name) @def.function
(using_directive) @import
(invocation_expression function: [(identifier) (member_access_expression) (generic_name)] @call)
(object_creation_expression type: [(identifier) (qualified_name) (generic_name)] @call)
(base_list [(identifier) (qualified_name) (generic_name)] @use)
(variable_declaration type: [(identifier) (qualified_name) (generic_name)] @use)
(parameter type: [(identifier) (qualified_name) (generic_name)] @use)
(attribute name: [(identifier) (qualified_name)] @use)
(argument [(identifier) (member_access_expression)] @use)
(invocation_expression function: [(identifier) (member_access_expression)] @ctx
                       arguments: (argument_list (argument (string_literal (string_literal_content) @str))))
(attribute name: [(identifier) (qualified_name)] @ctx.deco
           (attribute_argument_list (attribute_argument (string_literal (string_literal_content) @str))))
"""

_RUBY = """
(class name: [(constant) (scope_resolution)] @name) @def.class
(module name: [(constant) (scope_resolution)] @name) @def.class
(method name: (_) @name) @def.function
(singleton_method name: (_) @name) @def.function
(call receiver: (_) @recv method: (identifier) @call)
(call !receiver method: (identifier) @call)
(constant) @use
(scope_resolution) @use
(argument_list (simple_symbol) @use)
(call method: (identifier) @ctx arguments: (argument_list (string (string_content) @str)))
(pair value: (string (string_content) @str))
"""

_PHP = """
(namespace_definition name: (namespace_name) @package)
(class_declaration name: (name) @name) @def.class
(interface_declaration name: (name) @name) @def.class
(trait_declaration name: (name) @name) @def.class
(enum_declaration name: (name) @name) @def.class
(method_declaration name: (name) @name) @def.function
(function_definition name: (name) @name) @def.function
(namespace_use_declaration) @import
(require_expression [(string (string_content) @import.spec)
     (binary_expression right: (string (string_content) @import.spec))])
(require_once_expression [(string (string_content) @import.spec)
     (binary_expression right: (string (string_content) @import.spec))])
(include_expression [(string (string_content) @import.spec)
     (binary_expression right: (string (string_content) @import.spec))])
(include_once_expression [(string (string_content) @import.spec)
     (binary_expression right: (string (string_content) @import.spec))])
(function_call_expression function: [(name) (qualified_name)] @call)
(member_call_expression object: (_) @recv name: (name) @call)
(nullsafe_member_call_expression object: (_) @recv name: (name) @call)
(scoped_call_expression scope: (_) @recv name: (name) @call)
(object_creation_expression [(name) (qualified_name)] @call)
(base_clause [(name) (qualified_name)] @use)
(class_interface_clause [(name) (qualified_name)] @use)
(named_type [(name) (qualified_name)] @use)
(class_constant_access_expression . [(name) (qualified_name)] @use)
(function_call_expression function: [(name) (qualified_name)] @ctx
                          arguments: (arguments (argument (string (string_content) @str))))
(member_call_expression name: (name) @ctx arguments: (arguments (argument (string (string_content) @str))))
(scoped_call_expression name: (name) @ctx arguments: (arguments (argument (string (string_content) @str))))
"""

QUERIES: dict[str, str] = {
    "python": _PYTHON,
    "javascript": _JAVASCRIPT,
    "typescript": _TYPESCRIPT,
    "tsx": _TYPESCRIPT + _JSX,
    "go": _GO,
    "java": _JAVA,
    "kotlin": _KOTLIN,
    "rust": _RUST,
    "c": _C,
    "cpp": _CPP,
    "csharp": _CSHARP,
    "ruby": _RUBY,
    "php": _PHP,
}
