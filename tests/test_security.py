"""Security checks over the code itself: safe YAML, no unpickling, remote code only when a config entry asks.

Downloaded files, configs and model repositories come from outside; the ways
they could run code here are unpickling (``pickle``, ``joblib``, ``torch.load``
without ``weights_only``, ``np.load(allow_pickle=True)``, ``pd.read_pickle``),
YAML tags that build Python objects, and a model repository's own code
(``trust_remote_code``). The source of the library, the scripts, the rules and
the benchmarks is scanned for each, and names that become paths are checked to
stay one path component.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from unsure.config import Model
from unsure.paths import slug

REPO = Path(__file__).resolve().parents[1]
PYTHON = sorted(
    p for d in ("lib/unsure", "scripts", "bench") for p in (REPO / d).rglob("*.py") if "egg-info" not in p.parts
)
RULES = sorted([REPO / "Snakefile", *(REPO / "workflow" / "rules").glob("*.smk")])

UNPICKLING = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("joblib", "load"),
    ("dill", "load"),
    ("dill", "loads"),
    ("cloudpickle", "load"),
    ("cloudpickle", "loads"),
    ("shelve", "open"),
    ("pd", "read_pickle"),
    ("pandas", "read_pickle"),
}
UNSAFE_YAML = {"unsafe_load", "full_load", "unsafe_load_all", "full_load_all", "Loader", "UnsafeLoader", "FullLoader"}


def _dotted(node: ast.AST) -> tuple[str, str] | None:
    """``(module alias, attribute)`` of a call target like ``pickle.load``."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _module_of(path: Path) -> str | None:
    """The importable module name of a library file (None for scripts and benchmarks)."""
    rel = path.relative_to(REPO)
    if rel.parts[:2] != ("lib", "unsure"):
        return None
    return ".".join(rel.with_suffix("").parts[1:]).removesuffix(".__init__")


def _safe_loader(path: Path, node: ast.expr | None) -> bool:
    """Whether a ``yaml.load`` ``Loader=`` argument is a ``yaml.SafeLoader`` (or a subclass defined in the module)."""
    if node is None:
        return False
    dotted = _dotted(node)
    if dotted is not None and dotted[0] == "yaml":
        return dotted[1] in ("SafeLoader", "CSafeLoader")
    module = _module_of(path)
    if isinstance(node, ast.Name) and module is not None:
        loader: Any = getattr(importlib.import_module(module), node.id, None)
        return isinstance(loader, type) and issubclass(loader, yaml.SafeLoader)
    return False


def problems_in(path: Path, source: str) -> list[str]:
    """Every unsafe deserialisation or remote-code switch in one Python source."""
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', '?')}"
        attribute = _dotted(node)
        if attribute is not None and attribute[0] == "yaml" and attribute[1] in UNSAFE_YAML:
            found.append(f"{where}: yaml.{attribute[1]}")
        if not isinstance(node, ast.Call):
            continue
        target = _dotted(node.func)
        if target in UNPICKLING:
            found.append(f"{where}: {'.'.join(target)} unpickles")
        if target in {("yaml", "load"), ("yaml", "load_all")} and not _safe_loader(path, _keyword(node, "Loader")):
            found.append(f"{where}: yaml.{target[1]} without a SafeLoader (use yaml.safe_load)")
        if target == ("torch", "load") and not _is_true(_keyword(node, "weights_only")):
            found.append(f"{where}: torch.load without weights_only=True")
        if target is not None and target[1] == "load" and _is_true(_keyword(node, "allow_pickle")):
            found.append(f"{where}: {'.'.join(target)}(allow_pickle=True)")
        if _is_true(_keyword(node, "trust_remote_code")):
            found.append(f"{where}: trust_remote_code=True (only a model's config entry may turn it on)")
    return found


RULE_PATTERNS = {
    r"\byaml\.(load|unsafe_load|full_load)\(": "YAML loaded without safe_load",
    r"\b(pickle|joblib|dill|cloudpickle)\.loads?\(|read_pickle\(": "unpickling",
    r"\btorch\.load\(": "torch.load",
    r"allow_pickle\s*=\s*True": "np.load(allow_pickle=True)",
    r"trust_remote_code\s*=\s*True": "trust_remote_code=True",
}


@pytest.mark.parametrize("path", PYTHON, ids=[str(p.relative_to(REPO)) for p in PYTHON])
def test_python_source_has_no_unsafe_loading(path: Path) -> None:
    assert problems_in(path, path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", RULES, ids=[str(p.relative_to(REPO)) for p in RULES])
def test_rules_have_no_unsafe_loading(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [f"line {text[: m.start()].count(chr(10)) + 1}: {what}"
             for pattern, what in RULE_PATTERNS.items() for m in re.finditer(pattern, text)]  # fmt: skip
    assert found == []


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("import yaml\nyaml.load(open('c.yaml'))\n", "without a SafeLoader"),
        ("import yaml\nyaml.load(f, Loader=yaml.Loader)\n", "yaml.Loader"),
        ("import yaml\nyaml.unsafe_load(f)\n", "yaml.unsafe_load"),
        ("import pickle\npickle.loads(blob)\n", "pickle.loads unpickles"),
        ("import joblib\njoblib.load('m.pkl')\n", "joblib.load unpickles"),
        ("import pandas as pd\npd.read_pickle('x')\n", "pd.read_pickle unpickles"),
        ("import torch\ntorch.load('w.pt')\n", "torch.load without weights_only=True"),
        ("import numpy as np\nnp.load('a.npy', allow_pickle=True)\n", "np.load(allow_pickle=True)"),
        ("AutoModel.from_pretrained('x', trust_remote_code=True)\n", "trust_remote_code=True"),
    ],
)
def test_the_scan_finds_what_it_looks_for(snippet: str, problem: str) -> None:
    found = problems_in(REPO / "scripts" / "example.py", snippet)
    assert any(problem in f for f in found), found


def test_the_scan_accepts_safe_loading() -> None:
    safe = (
        "import yaml, torch, numpy as np\n"
        "yaml.safe_load(f)\nyaml.load(f, Loader=yaml.SafeLoader)\n"
        "torch.load('w.pt', weights_only=True)\nnp.load('a.npy')\n"
        "AutoModel.from_pretrained('x', trust_remote_code=entry.trust_remote_code)\n"
    )
    assert problems_in(REPO / "scripts" / "example.py", safe) == []


def test_the_library_config_loader_is_a_safe_loader() -> None:
    """``load_config`` uses a SafeLoader subclass (to reject repeated keys); the scan must know it as safe."""
    path = REPO / "lib" / "unsure" / "config.py"
    assert problems_in(path, path.read_text(encoding="utf-8")) == []
    assert problems_in(path, "import yaml\nyaml.load(f, Loader=Strict)\n") != []


def test_remote_code_is_off_unless_the_model_entry_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    import transformers

    from unsure.engine import hf

    seen: list[object] = []

    class Stop(Exception):
        pass

    def from_pretrained(model_id: str, **kwargs: object) -> None:
        seen.append(kwargs.get("trust_remote_code"))
        raise Stop

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    monkeypatch.setattr(hf, "hub_source", lambda model_id, revision: {})  # the hub reachable (no network here)
    assert Model(id="org/model").trust_remote_code is False
    for entry in (Model(id="org/model"), Model(id="org/model", trust_remote_code=True)):
        with pytest.raises(Stop):
            hf.HFEngine.from_config(entry, device="cpu")
    assert seen == [False, True]


@pytest.mark.parametrize(
    "name",
    ["..", "../x", "../../etc/passwd", "/abs", "/", "a/../../b", "..\\..\\windows", "~/x", "./x", ".hidden",
     "x/./y", "C:\\x", "a\x00b", " .. ", "meta-llama/Meta-Llama-3-8B", "task1216_atomic.json"],
)  # fmt: skip
def test_slug_is_one_safe_path_component(name: str, tmp_path: Path) -> None:
    try:
        out = slug(name)
    except ValueError:
        return  # nothing usable left: refused
    assert out and "/" not in out and "\\" not in out and "\x00" not in out
    assert not out.startswith(".") and out not in (".", "..")
    assert (tmp_path / out).resolve().parent == tmp_path.resolve()
