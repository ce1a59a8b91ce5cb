"""Whether a module gives each rank its own GPU 0 through CUDA_VISIBLE_DEVICES.

A write that sets the variable per rank (`str(local_rank)`) leaves every rank one visible GPU,
its cuda:0; a list of several GPUs that every rank gets alike ("0,1", an argument whose default
is one) leaves cuda:0 the first of them for all. Only a value known to be such a list counts as
shared; anything else is taken as chosen per rank.
"""

from __future__ import annotations

import ast

from gpufix.nccl_env import CUDA_VISIBLE_DEVICES

from .arguments import add_argument
from .callsites import all_env_writes, keyword
from .project import SourceFile


def writes_visible_devices(sf: SourceFile) -> bool:
    """The module sets CUDA_VISIBLE_DEVICES so that each rank sees its own GPU as cuda:0: any
    write not known to be one list of several GPUs for every rank. Known lists: a literal
    ("0,1"), a join of a literal list (`",".join(str(g) for g in [1, 2])`, or of a name bound to
    one), an argument whose `add_argument` default is such a literal (`args.gpu_id`, default
    '0,1'): torchrun and mp.spawn hand every rank the same arguments."""
    if b"VISIBLE_DEVICES" not in sf.data or sf.tree is None:
        return False
    return any(
        w.key == CUDA_VISIBLE_DEVICES and not shared_list(sf, w.value)
        for w, _, _ in all_env_writes(sf)
    )


def shared_list(sf: SourceFile, value: ast.expr | None) -> bool:
    if value is None:
        return False
    text = sf.names.const_str(value)
    if text is not None:
        return _several(text)
    if isinstance(value, ast.Call) and _joins_literal_list(sf, value):
        return True
    if isinstance(value, ast.Attribute):
        return _several(_argument_default(sf, value.attr))
    return False


def _several(text: str | None) -> bool:
    return text is not None and sum(1 for g in text.split(",") if g.strip()) >= 2


def _joins_literal_list(sf: SourceFile, call: ast.Call) -> bool:
    """`",".join(...)` over a literal list or tuple of two or more, or a name bound to one."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "join" and len(call.args) == 1):
        return False
    for n in ast.walk(call.args[0]):
        items = n if isinstance(n, ast.List | ast.Tuple) else _bound_list(sf, n)
        if items is not None and len(items.elts) >= 2:
            return True
    return False


def _bound_list(sf: SourceFile, node: ast.AST) -> ast.List | ast.Tuple | None:
    value = sf.names.bound_once(node.id) if isinstance(node, ast.Name) else None
    return value if isinstance(value, ast.List | ast.Tuple) else None


def _argument_default(sf: SourceFile, dest: str) -> str | None:
    """The literal default of the module's `add_argument("--dest", default=...)`."""
    call = add_argument(sf, dest)
    default = keyword(call, "default") if call is not None else None
    return sf.names.const_str(default) if default is not None else None
