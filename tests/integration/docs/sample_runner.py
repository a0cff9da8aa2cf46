"""Run one guide's Python samples in this process, as tests/unit/docs/samples.py says.

``python -m tests.integration.docs.sample_runner PAGE WORKDIR``: file blocks are
written under WORKDIR (the working directory, first on ``sys.path``); the other
blocks run in order in one module's namespace with top-level ``await``; a file
block no block imported is imported at the end. Exit 0 when every block ran.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import inspect
import os
import sys
import types
from pathlib import Path

from tests.unit.docs.samples import Block, python_blocks

#: The samples' own module, so pydantic and typing resolve their names as in a file.
MODULE = "guide_sample"


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


async def _run(runnable: list[Block], namespace: dict[str, object]) -> None:
    for block in runnable:
        print(f"--- {block.where}", flush=True)
        code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)
        if inspect.iscoroutine(result):
            await result


def main(page: Path, workdir: Path) -> int:
    samples = [block for block in python_blocks(page) if not block.fragment]
    files = [block for block in samples if block.file]
    sources: dict[str, str] = {}
    for block in files:
        assert block.file is not None
        # A later block naming the same file continues it.
        sources[block.file] = sources.get(block.file, "") + block.code
    for path, source in sources.items():
        target = workdir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source, encoding="utf-8")
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module
    asyncio.run(_run([block for block in samples if not block.file], module.__dict__))
    for path in sources:
        name = _module_name(path)
        if name not in sys.modules:
            print(f"--- {path} (import {name})", flush=True)
            importlib.import_module(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
