"""Per language: the tree-sitter node types that are definitions (and their symbol
kind), the wrappers that hold one (decorators, ``export``, ``template<>``), the nodes
looked through (``#ifdef``, ``extern "C"``), and the comments/attributes that stay with
the definition after them. Names were read off each grammar's trees of real code."""

from __future__ import annotations

__all__ = [
    "BODIES",
    "CONTAINER_KINDS",
    "C_NAMES",
    "DEFINITIONS",
    "FUNCTION_VALUES",
    "LEADING",
    "LOOKED_THROUGH",
    "TYPE_KINDS",
    "WRAPPERS",
]

# kinds whose functions are methods, and kinds whose members are their own definitions
TYPE_KINDS = frozenset(
    {"class", "struct", "interface", "trait", "impl", "enum", "object", "protocol",
     "extension", "record", "union"}
)  # fmt: skip
CONTAINER_KINDS = TYPE_KINDS | {"module", "namespace"}

_JS_DEFINITIONS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "class": "class",
    "method_definition": "method",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "module": "module",
    "lexical_declaration": "function",  # only when a declarator holds a function or class
    "variable_declaration": "function",
    "field_definition": "method",  # only when the value is a function
    "public_field_definition": "method",
    "expression_statement": "function",  # namespace, or `a.b = function ...`
}
_C_DEFINITIONS = {
    "function_definition": "function",
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
    "type_definition": "type",
}
_C_THROUGH = frozenset(
    {"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
     "linkage_specification", "declaration_list"}
)  # fmt: skip

DEFINITIONS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "javascript": _JS_DEFINITIONS,
    "typescript": _JS_DEFINITIONS,
    "tsx": _JS_DEFINITIONS,
    "go": {
        "function_declaration": "function",
        "method_declaration": "method",
        "type_declaration": "type",
    },
    "rust": {
        "function_item": "function",
        "struct_item": "struct",
        "enum_item": "enum",
        "union_item": "union",
        "trait_item": "trait",
        "impl_item": "impl",
        "mod_item": "module",
        "macro_definition": "macro",
        "type_item": "type",
    },
    "java": {
        "class_declaration": "class",
        "interface_declaration": "interface",
        "annotation_type_declaration": "interface",
        "enum_declaration": "enum",
        "record_declaration": "record",
        "method_declaration": "function",
        "constructor_declaration": "constructor",
        "compact_constructor_declaration": "constructor",
    },
    "kotlin": {
        "class_declaration": "class",
        "object_declaration": "object",
        "companion_object": "object",
        "function_declaration": "function",
        "secondary_constructor": "constructor",
        "type_alias": "type",
    },
    "c": _C_DEFINITIONS,
    "cpp": {**_C_DEFINITIONS, "class_specifier": "class", "namespace_definition": "namespace"},
    "csharp": {
        "class_declaration": "class",
        "struct_declaration": "struct",
        "interface_declaration": "interface",
        "enum_declaration": "enum",
        "record_declaration": "record",
        "record_struct_declaration": "record",
        "namespace_declaration": "namespace",
        "method_declaration": "function",
        "constructor_declaration": "constructor",
        "destructor_declaration": "method",
        "operator_declaration": "method",
        "conversion_operator_declaration": "method",
        "property_declaration": "property",
    },
    "ruby": {
        "module": "module",
        "class": "class",
        "method": "function",
        "singleton_method": "method",
    },
    "php": {
        "class_declaration": "class",
        "interface_declaration": "interface",
        "trait_declaration": "trait",
        "enum_declaration": "enum",
        "function_definition": "function",
        "method_declaration": "method",
        "namespace_definition": "namespace",
    },
    "swift": {
        "class_declaration": "class",
        "protocol_declaration": "protocol",
        "function_declaration": "function",
        "init_declaration": "constructor",
        "deinit_declaration": "method",
        "typealias_declaration": "type",
    },
    "scala": {
        "class_definition": "class",
        "object_definition": "object",
        "trait_definition": "trait",
        "enum_definition": "enum",
        "function_definition": "function",
        "function_declaration": "function",
        "type_definition": "type",
    },
    "bash": {"function_definition": "function"},
}

_JS_WRAPPERS = frozenset({"export_statement", "ambient_declaration"})
WRAPPERS: dict[str, frozenset[str]] = {
    "python": frozenset({"decorated_definition"}),
    "javascript": _JS_WRAPPERS,
    "typescript": _JS_WRAPPERS,
    "tsx": _JS_WRAPPERS,
    "cpp": frozenset({"template_declaration"}),
}
LOOKED_THROUGH: dict[str, frozenset[str]] = {
    "c": _C_THROUGH,
    "cpp": _C_THROUGH,
    "java": frozenset({"enum_body_declarations"}),
    "ruby": frozenset({"singleton_class", "body_statement"}),
}
LEADING = frozenset(
    {"comment", "line_comment", "block_comment", "multiline_comment", "attribute_item"}
)
BODIES = frozenset(
    {"class_body", "enum_class_body", "declaration_list", "field_declaration_list",
     "template_body", "body_statement", "block", "statement_block", "protocol_body",
     "interface_body", "enum_body", "compound_statement"}
)  # fmt: skip
FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
C_NAMES = frozenset(
    {"identifier", "field_identifier", "type_identifier", "qualified_identifier",
     "destructor_name", "operator_name", "primitive_type"}
)  # fmt: skip
