"""An import-linter contract type for what its built-in ones cannot say: which third-party modules a package may
import, down to submodules (`eventsourcing.domain` yes, `eventsourcing.postgres` no).

import-linter squashes every external package into one node, so a `forbidden` contract can name `eventsourcing`
but not `eventsourcing.postgres`. This contract reads each module's source instead: every absolute import (at any
depth, inside functions too) that is neither the standard library nor one of the project's packages must start
with one of `allowed_modules`.

    [importlinter:contract:domain-allowed]
    name = The domain imports only the stdlib, eventsourcing.domain, solders and publicsuffixlist
    type = allowed_externals
    source_modules = domain
    allowed_modules = eventsourcing.domain solders publicsuffixlist
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output


class AllowedExternalsContract(Contract):
    type_name = "allowed_externals"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    allowed_modules = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        project = {module.split(".")[0] for module in graph.modules if not graph.is_module_squashed(module)}
        allowed = tuple(str(a) for a in self.allowed_modules)
        leaks: list[tuple[str, int, str]] = []
        for source in self.source_modules:
            for module in sorted(graph.find_descendants(source.name) | {source.name}):
                for line, imported in _imports(module):
                    top = imported.split(".")[0]
                    if top in sys.stdlib_module_names or top in project or top == "__future__":
                        continue
                    if not any(imported == a or imported.startswith(a + ".") for a in allowed):
                        leaks.append((module, line, imported))
        return ContractCheck(kept=not leaks, metadata={"leaks": leaks})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for module, line, imported in check.metadata["leaks"]:
            output.print_error(f"{module}:{line} imports {imported}, which is not allowed here", bold=True)
            output.new_line()


def _imports(module: str) -> list[tuple[int, str]]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(Path(spec.origin).read_text(), spec.origin)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from eventsourcing import postgres` imports eventsourcing.postgres: name the submodule when it is one
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.append((node.lineno, candidate if _is_module(candidate) else node.module))
    return found


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
