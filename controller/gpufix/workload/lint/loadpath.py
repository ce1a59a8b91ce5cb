"""What a torch.load path says the file holds: a dataset file (samples saved by preprocessing,
from CPU memory) or weights. Only the file's own name speaks for it; a directory's name says
nothing of its files."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .names import WORDS

# A path named as a dataset file holds samples saved by preprocessing, from the CPU (PyG's
# processed_dir, "fits into CPU memory": pytorch-geometric.readthedocs.io/en/stable/tutorial/
# create_dataset.html), unless a word also says checkpoint or weights.
DATASET = frozenset({"data", "dataset", "processed"})
_JOINS = frozenset({"join", "joinpath", "Path", "PurePath"})
_KEEPS_NAME = frozenset({"str", "abspath", "expanduser", "realpath", "normpath", "fspath", "open"})
_KEEPS_RECEIVER = frozenset({"format", "with_suffix", "resolve", "absolute", "expanduser"})
_CHECKPOINT = frozenset(
    {"ckpt", "checkpoint", "model", "weight", "state", "pretrained", "pretrain", "resume", "net"}
    | {"snapshot", "latest", "ema", "encoder", "decoder", "backbone"}
    | {"best", "last", "epoch", "optimizer", "optim", "param", "teacher", "student"}
)


_DEEPEST = 40  # levels of a path expression read (real paths are a handful)


def dataset_file(path: ast.expr, depth: int = 0) -> bool:
    """The file's own name says dataset (`data_path`, `self.processed_paths[0]`,
    `os.path.join(root, "train_data.pt")`, `"%s/train_data.pt" % root`) and nothing in the path
    says checkpoint (`os.path.join(data_dir, "model.pt")`); a directory's name says nothing of
    its files (`f"{data_root}/encoder.pt"`, `"data/vgg16.pth"`). Both branches of a choice."""
    if depth > _DEEPEST:
        return False
    if isinstance(path, ast.IfExp):
        return dataset_file(path.body, depth + 1) and dataset_file(path.orelse, depth + 1)
    own = _words(_file_part(path))
    every = _words(ast.walk(path))
    return bool(own & DATASET) and not every & _CHECKPOINT


def _file_part(path: ast.expr, depth: int = 0) -> list[ast.AST]:
    """The nodes that name the file itself: a name, a config key, the last argument of a join,
    the right side of `a + "/x.pt"` or `p / "x.pt"`, the format of `"%s/x.pt" % root`, what
    follows the last separator of a string; through wrappers that keep the name (`abspath`,
    `expanduser`, `open`, `str`, `.format`, `.with_suffix`). A path nested deeper than any real
    one (`p[0][0]...`, a thousand levels) names nothing: the walk stops there."""
    if depth > _DEEPEST:
        return []
    if isinstance(path, ast.Subscript):
        key = path.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return [key]
        return _file_part(path.value, depth + 1)
    if isinstance(path, ast.Name | ast.Attribute):
        return [path]
    if isinstance(path, ast.Constant) and isinstance(path.value, str):
        return [ast.Constant(_basename(path.value))]
    if isinstance(path, ast.BinOp) and isinstance(path.op, ast.Mod):
        return _file_part(path.left, depth + 1)
    if isinstance(path, ast.BinOp) and isinstance(path.op, ast.Add | ast.Div):
        return _file_part(path.right, depth + 1)
    if isinstance(path, ast.Call):
        return _call_file_part(path, depth)
    if isinstance(path, ast.JoinedStr):
        tail: list[ast.AST] = []
        for v in path.values:
            text = v.value if isinstance(v, ast.Constant) else None
            if isinstance(text, str) and _basename(text) != text:
                tail = [ast.Constant(_basename(text))]
            elif isinstance(v, ast.FormattedValue):
                tail.extend(_file_part(v.value, depth + 1))
            else:
                tail.append(v)
        return tail
    return []


def _call_file_part(call: ast.Call, depth: int) -> list[ast.AST]:
    name, f = _last(call.func), call.func
    if name in _JOINS and call.args:
        return _file_part(call.args[-1], depth + 1)
    if name in _KEEPS_NAME and call.args:
        return _file_part(call.args[0], depth + 1)
    if name in _KEEPS_RECEIVER and isinstance(f, ast.Attribute):
        return _file_part(f.value, depth + 1)
    if name == "get" and call.args:  # cfg.get("data_path")
        key = call.args[0]
        return [key] if isinstance(key, ast.Constant) else []
    return []


def _basename(text: str) -> str:
    return text.replace("\\", "/").rsplit("/", 1)[-1]


def _words(nodes: Iterable[ast.AST]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        text = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        if isinstance(text, str):
            out.update(w.lower().removesuffix("s") for w in WORDS.findall(text))
    return out


def _last(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
