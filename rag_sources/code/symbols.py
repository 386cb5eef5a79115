"""The definitions in a syntax tree: functions, methods, classes, ... with their names,
kinds, enclosing definitions and line ranges (leading comments and attributes included).

The per-language node types are in ``node_types.py``; the special cases (a Go
method's receiver, a C declarator's name, a Kotlin ``interface``, a JS ``const f = () =>``)
are methods of ``_Scanner`` named ``_<language>_<node type>``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from tree_sitter import Node

from rag_sources.code.node_types import (
    BODIES,
    C_NAMES,
    CONTAINER_KINDS,
    DEFINITIONS,
    FUNCTION_VALUES,
    LEADING,
    LOOKED_THROUGH,
    TYPE_KINDS,
    WRAPPERS,
)

__all__ = ["CodeSymbol", "Definition", "definitions", "first_row", "last_row", "mostly_errors"]

_MAX_DEPTH = 100


def first_row(node: Node) -> int:
    return node.start_point.row


def last_row(node: Node) -> int:
    """The last row holding text of the node (a node ending in a newline ends on the
    next row at column 0)."""
    end = node.end_point
    if end.column == 0 and end.row > node.start_point.row:
        return end.row - 1
    return end.row


@dataclass(eq=False)
class Definition:
    """One definition: its kind, names and rows (0-based, inclusive)."""

    kind: str
    name: str  # as written, possibly dotted ("Client.retry" for a C++ out-of-class method)
    qualified: str  # with the enclosing definitions and namespaces
    start: int  # first row, leading comments/decorators/attributes included
    end: int
    node: Node  # the outermost node (the wrapper, if any)
    parent: Definition | None
    members: list[Definition] = field(default_factory=list)
    body: list[Node] = field(default_factory=list)  # named children of a container's body

    @property
    def short(self) -> str:
        return self.qualified.rsplit(".", 1)[-1]

    @property
    def heading(self) -> str:
        return f"{self.kind} {self.qualified}"

    @property
    def label(self) -> str:
        """Kind and name relative to the enclosing definition ("method retry_upload";
        a namespace set by `namespace A;` stays in: "class A.Client")."""
        parent = self.parent
        if parent is not None and self.qualified.startswith(parent.qualified + "."):
            return f"{self.kind} {self.qualified[len(parent.qualified) + 1 :]}"
        return f"{self.kind} {self.qualified}"

    def lineage(self) -> list[Definition]:
        chain: list[Definition] = []
        node: Definition | None = self
        while node is not None:
            chain.append(node)
            node = node.parent
        return chain[::-1]

    def facets(self) -> list[str]:
        names = [f"symbol:{self.qualified}"]
        if self.short != self.qualified:
            names.append(f"symbol:{self.short}")
        return [*names, f"symbol_kind:{self.kind}"]

    def walk(self) -> Iterator[Definition]:
        yield self
        for member in self.members:
            yield from member.walk()


@dataclass(frozen=True)
class CodeSymbol:
    """A definition as the index shows it: kind, names and 1-based lines."""

    kind: str
    qualified_name: str
    name: str
    line_start: int
    line_end: int


def mostly_errors(root: Node, rows: Sequence[bool], defs: Sequence[Definition]) -> bool:
    """Whether most non-blank rows (``rows[i]``: row i is not blank) are in ERROR nodes
    and in no definition found, and the definitions found hold few rows."""
    if not root.has_error:
        return False
    bad: set[int] = set()
    for child in [root] if root.type == "ERROR" else root.children:
        if child.is_error:
            bad.update(range(first_row(child), last_row(child) + 1))
    defined: set[int] = set()
    for top in defs:
        defined.update(r for r in range(top.start, top.end + 1) if r < len(rows) and rows[r])
    bad.difference_update(defined)
    filled = sum(rows)
    bad_rows = sum(1 for r in bad if r < len(rows) and rows[r])
    # a header guard or an unknown macro can make the whole file one ERROR node around
    # good functions: it is kept while its definitions hold a quarter of its lines
    return filled > 0 and bad_rows * 2 > filled and len(defined) * 4 < filled


def definitions(root: Node, language: str, source: bytes) -> list[Definition]:
    """The top-level definitions of a tree parsed from ``source``, each with its members."""
    return _Scanner(language, source).scan(root.named_children, None, "", 0)


class _Scanner:
    def __init__(self, language: str, source: bytes) -> None:
        # names are read from the source: Node.text is not available (it crashes) for a
        # tree parsed through a read callback, which the parse timeout needs
        self.source = source
        self.language = language
        self.defs = DEFINITIONS.get(language, {})
        self.wrappers = WRAPPERS.get(language, frozenset())
        self.through = LOOKED_THROUGH.get(language, frozenset()) | {"ERROR"}

    def scan(
        self, nodes: Sequence[Node], parent: Definition | None, prefix: str, depth: int
    ) -> list[Definition]:
        found: list[Definition] = []
        previous_end = -1
        for index, node in enumerate(nodes):
            if depth < _MAX_DEPTH and node.type in self.through:
                inner = self.scan(node.named_children, parent, prefix, depth + 1)
                found.extend(inner)
                if inner:
                    previous_end = max(previous_end, inner[-1].end)
                continue
            scope = self.scope_setter(node)
            if scope is not None:  # `namespace A;` names what follows it
                prefix = f"{prefix}.{scope}" if prefix else scope
                continue
            described = self.describe(node)
            if described is None:
                continue
            kind, name, inner_node = described
            start = self.leading_start(nodes, index, previous_end)
            definition = self.make(kind, name, inner_node, node, start, parent, prefix)
            if depth < _MAX_DEPTH and definition.kind in CONTAINER_KINDS:
                body = self.body_of(inner_node)
                if body is not None:
                    definition.body = body.named_children
                    definition.members = self.scan(
                        definition.body, definition, definition.qualified, depth + 1
                    )
            found.append(definition)
            previous_end = definition.end
        return found

    def leading_start(self, nodes: Sequence[Node], index: int, previous_end: int) -> int:
        """The first row of the comments/attributes right above nodes[index]."""
        start = first_row(nodes[index])
        j = index - 1
        while j >= 0 and nodes[j].type in LEADING:
            comment = nodes[j]
            if last_row(comment) + 1 < start or first_row(comment) <= previous_end:
                break
            if j > 0 and last_row(nodes[j - 1]) >= first_row(comment):  # a trailing comment
                break
            start = first_row(comment)
            j -= 1
        return start

    def make(
        self,
        kind: str,
        name: str,
        inner: Node,
        outer: Node,
        start: int,
        parent: Definition | None,
        prefix: str,
    ) -> Definition:
        if kind == "function":
            in_type = parent is not None and (
                parent.kind in TYPE_KINDS or (self.language == "ruby" and parent.kind == "module")
            )
            if in_type or (self.language == "cpp" and "." in name):
                kind = "method"
        qualified = f"{prefix}.{name}" if prefix else name
        return Definition(kind, name, qualified, start, last_row(outer), outer, parent)

    # ---- what a node is -----------------------------------------------------------

    def scope_setter(self, node: Node) -> str | None:
        if node.type == "file_scoped_namespace_declaration" or (
            node.type == "namespace_definition"
            and self.language == "php"
            and node.child_by_field_name("body") is None
        ):
            name = node.child_by_field_name("name")
            return _dotted(self.text(name)) if name is not None else None
        return None

    def describe(self, node: Node) -> tuple[str, str, Node] | None:
        """(kind, name, definition node) when ``node`` is or wraps a definition."""
        if node.type in self.wrappers:
            for child in node.named_children:
                if child.type in LEADING or child.type == "decorator":
                    continue
                found = self.describe(child)
                if found is not None:
                    return found
            return None
        kind = self.defs.get(node.type)
        if kind is None:
            return None
        special = getattr(self, f"_{self.language}_{node.type}", None)
        if special is None and self.language in ("javascript", "typescript", "tsx"):
            special = getattr(self, f"_js_{node.type}", None)
        if special is None and self.language in ("c", "cpp"):
            special = getattr(self, f"_c_{node.type}", None)
        if special is not None:
            return special(node, kind)
        name = node.child_by_field_name("name")
        return kind, _dotted(self.text(name)) if name is not None else "(anonymous)", node

    @staticmethod
    def body_of(node: Node) -> Node | None:
        body = node.child_by_field_name("body")
        if body is not None:
            return body
        for child in reversed(node.named_children):
            if child.type in BODIES:
                return child
        return None

    # ---- per-language special cases --------------------------------------------------

    def _js_lexical_declaration(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        for declarator in node.named_children:
            value = declarator.child_by_field_name("value")
            name = declarator.child_by_field_name("name")
            if value is None or name is None:
                continue
            if value.type in FUNCTION_VALUES:
                return "function", self.text(name), value
            if value.type == "class":
                return "class", self.text(name), value
        return None

    _js_variable_declaration = _js_lexical_declaration

    def _js_field_definition(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        value = node.child_by_field_name("value")
        name = node.child_by_field_name("property") or node.child_by_field_name("name")
        if value is None or name is None or value.type not in FUNCTION_VALUES:
            return None
        return "method", self.text(name), value

    _js_public_field_definition = _js_field_definition

    def _js_expression_statement(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        inner = node.named_children[0] if node.named_child_count else None
        if inner is None:
            return None
        if inner.type in ("internal_module", "module"):
            return self.describe(inner)
        if inner.type == "assignment_expression":
            left, right = inner.child_by_field_name("left"), inner.child_by_field_name("right")
            if left is not None and right is not None:
                if right.type in FUNCTION_VALUES:
                    return "function", self.text(left), right
                if right.type == "class":
                    return "class", self.text(left), right
        return None

    def _js_class(self, node: Node, kind: str) -> tuple[str, str, Node]:
        name = node.child_by_field_name("name")
        return "class", self.text(name) if name is not None else "default", node

    def _js_function_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        name = node.child_by_field_name("name")
        return "function", self.text(name) if name is not None else "default", node

    def _go_method_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        name = self.text(node.child_by_field_name("name"))
        receiver = node.child_by_field_name("receiver")
        for param in receiver.named_children if receiver is not None else []:
            type_node = param.child_by_field_name("type")
            if type_node is not None:
                owner = self.text(type_node).lstrip("*").split("[", 1)[0].strip()
                return "method", f"{owner}.{name}", node
        return "method", name, node

    def _go_type_declaration(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        for spec in node.named_children:
            if spec.type in ("type_spec", "type_alias"):
                shape = spec.child_by_field_name("type")
                shape_type = shape.type if shape is not None else ""
                kind = {"struct_type": "struct", "interface_type": "interface"}.get(
                    shape_type, "type"
                )
                return kind, self.text(spec.child_by_field_name("name")), spec
        return None

    def _rust_impl_item(self, node: Node, kind: str) -> tuple[str, str, Node]:
        type_node = node.child_by_field_name("type")
        return "impl", self.text(type_node).split("<", 1)[0].strip(), node

    def _rust_mod_item(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        if node.child_by_field_name("body") is None:  # `mod foo;` declares a file
            return None
        return "module", self.text(node.child_by_field_name("name")), node

    def _kotlin_class_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        if any(child.type == "interface" for child in node.children):
            kind = "interface"
        elif any(
            m.type == "modifiers" and "enum" in self.text(m).split() for m in node.named_children
        ):
            kind = "enum"
        return kind, self.text(node.child_by_field_name("name")), node

    def _kotlin_companion_object(self, node: Node, kind: str) -> tuple[str, str, Node]:
        name = node.child_by_field_name("name")
        return "object", self.text(name) if name is not None else "Companion", node

    def _kotlin_secondary_constructor(self, node: Node, kind: str) -> tuple[str, str, Node]:
        return "constructor", "constructor", node

    def _swift_class_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        declared = node.child_by_field_name("declaration_kind")
        word = declared.type if declared is not None else "class"
        kind = {"struct": "struct", "enum": "enum", "extension": "extension"}.get(word, "class")
        return kind, self.text(node.child_by_field_name("name")).split("<", 1)[0], node

    def _swift_init_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        return "constructor", "init", node

    def _swift_deinit_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        return "method", "deinit", node

    def _c_function_definition(self, node: Node, kind: str) -> tuple[str, str, Node]:
        return kind, self.declarator_name(node), node

    def _c_type_definition(self, node: Node, kind: str) -> tuple[str, str, Node]:
        shape = node.child_by_field_name("type")
        if shape is not None and shape.child_by_field_name("body") is not None:
            kind = {"struct_specifier": "struct", "union_specifier": "union"}.get(
                shape.type, "enum" if shape.type == "enum_specifier" else "type"
            )
        return kind, self.declarator_name(node), node

    def _c_struct_specifier(self, node: Node, kind: str) -> tuple[str, str, Node] | None:
        if node.child_by_field_name("body") is None:
            return None
        name = node.child_by_field_name("name")
        return kind, _dotted(self.text(name)) if name is not None else "(anonymous)", node

    _c_union_specifier = _c_struct_specifier
    _c_enum_specifier = _c_struct_specifier
    _c_class_specifier = _c_struct_specifier

    def _c_namespace_definition(self, node: Node, kind: str) -> tuple[str, str, Node]:
        name = node.child_by_field_name("name")
        return "namespace", _dotted(self.text(name)) if name is not None else "(anonymous)", node

    def _csharp_destructor_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        return "method", "~" + self.text(node.child_by_field_name("name")), node

    def _csharp_operator_declaration(self, node: Node, kind: str) -> tuple[str, str, Node]:
        operator = node.child_by_field_name("operator")
        return "method", "operator" + (self.text(operator) if operator is not None else ""), node

    def _csharp_conversion_operator_declaration(
        self, node: Node, kind: str
    ) -> tuple[str, str, Node]:
        return "method", "operator", node

    def text(self, node: Node | None) -> str:
        if node is None:
            return "(anonymous)"
        raw = self.source[node.start_byte : node.end_byte]
        return " ".join(raw.decode("utf-8", "replace").split()) or "(anonymous)"

    def declarator_name(self, node: Node) -> str:
        """The declared name of a C/C++ function or typedef (through pointers, references,
        arrays and function declarators)."""
        current: Node | None = node.child_by_field_name("declarator")
        for _ in range(_MAX_DEPTH):
            if current is None:
                break
            if current.type in C_NAMES:
                return _dotted(self.text(current))
            if current.type == "operator_cast":
                return "operator " + self.text(current.child_by_field_name("type"))
            nxt = current.child_by_field_name("declarator")
            if nxt is None:  # e.g. a parenthesized declarator has no field
                nxt = next((c for c in current.named_children if c.type != "parameter_list"), None)
            current = nxt
        return "(anonymous)"


def _dotted(name: str) -> str:
    return name.replace("::", ".").replace("\\", ".").strip(".") or name
