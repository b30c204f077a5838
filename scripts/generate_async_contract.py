"""Write src/conveyor/aio/contract.py: the asynchronous twin of the queue contract.

The contract is written once, in src/conveyor/contract.py. This script derives its
coroutine form: every operation becomes ``async def`` and awaits the calls it makes;
``close`` and the context manager become their async forms. A test checks that the
committed file is what this script writes (run it after changing the contract)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src/conveyor/contract.py"
TARGET = ROOT / "src/conveyor/aio/contract.py"
# Methods that stay synchronous: reading a counter needs no waiting.
SYNC = {"generation"}

HEADER = '''"""The contract of the asynchronous queues: ``conveyor.contract.QueueAPI`` with
coroutines. ``AsyncQueue`` (a database) and ``AsyncRemoteQueue`` (a conveyor server)
implement it.

Generated from src/conveyor/contract.py by scripts/generate_async_contract.py: do not
edit by hand."""'''


class _Awaiting(ast.NodeTransformer):
    """Await every call of an async method of the class, and sleep without blocking."""

    def __init__(self, coroutines: set[str]) -> None:
        self.coroutines = coroutines

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            if func.value.id == "self" and func.attr in self.coroutines:
                return ast.Await(node)
            if func.value.id == "time" and func.attr == "sleep":
                func.value.id = "asyncio"
                return ast.Await(node)
        return node


def _is_property(node: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list)


def _async(node: ast.FunctionDef, name: str | None = None) -> ast.AsyncFunctionDef:
    return ast.AsyncFunctionDef(
        name=name or node.name,
        args=node.args,
        body=node.body,
        decorator_list=node.decorator_list,
        returns=node.returns,
        type_comment=None,
        type_params=[],
    )


def generate() -> str:
    tree = ast.parse(SOURCE.read_text(encoding="utf-8"))
    tree.body[0] = ast.parse(HEADER).body[0]  # the module docstring
    for index, node in enumerate(tree.body):
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            tree.body.insert(index + 1, ast.Import(names=[ast.alias("asyncio")]))
            break
    api = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "QueueAPI")
    api.name = "AsyncQueueAPI"
    methods = [n for n in api.body if isinstance(n, ast.FunctionDef)]
    coroutines = {
        m.name for m in methods if not _is_property(m) and m.name not in SYNC and "__" not in m.name
    }
    awaiting = _Awaiting(coroutines)
    body: list[ast.stmt] = []
    for node in api.body:
        if not isinstance(node, ast.FunctionDef) or _is_property(node) or node.name in SYNC:
            body.append(node)
        elif node.name == "__enter__":
            body.append(_async(node, "__aenter__"))
        elif node.name == "__exit__":
            exit_ = _async(node, "__aexit__")
            exit_.body = [ast.Expr(ast.Await(ast.parse("self.close()").body[0].value))]  # type: ignore[attr-defined]
            body.append(exit_)
        else:
            body.append(_async(awaiting.visit(node)))
    api.body = body
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def main() -> None:
    TARGET.write_text(generate(), encoding="utf-8")
    ruff = Path(sys.executable).with_name("ruff")
    command = [str(ruff)] if ruff.exists() else [sys.executable, "-m", "ruff"]
    subprocess.run([*command, "format", "--quiet", str(TARGET)], check=True)
    subprocess.run([*command, "check", "--fix", "--quiet", str(TARGET)], check=False)
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
