"""The shadow run on a user's machine (issue 31): without ``../shared`` beside the repository,
``tools/shadow.py`` fetches each family's tokenizer files (never weights) from the
Hugging Face hub into ``resources/tokenizers``, reuses them offline, takes them from a folder
the user names (``--tokenizers DIR``), and stops with the model id and the fix, not a traceback,
when the hub refuses (a gated model whose licence is not accepted, no login) or is unreachable.

The hub is :class:`FakeHub`: its HTTP API served in-process to ``huggingface_hub``'s own
``snapshot_download`` (an httpx mock transport set with ``huggingface_hub.set_client_factory``),
so that the real download code runs, with the repo ids, revision and file patterns the shadow
passes, and nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx2  # huggingface_hub's HTTP client
import huggingface_hub
import pytest
import yaml
from huggingface_hub.utils import _http

import shadow
from shadow import (
    FETCHED,
    HUB_FILES,
    OVERRIDE,
    PAPER,
    REPO,
    ShadowError,
    hub_source,
    merged_config,
    read_yaml,
    shadow_config,
)

SHARED = REPO.parent / "shared" / "data"

HUB_REPOS = {
    # tokenizer folder of config/shadow.yaml: the hub repo its files come from
    "gpt2": "openai-community/gpt2",
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-3-8b-instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
    "mistral-7b-instruct": "mistralai/Mistral-7B-Instruct-v0.2",
    "falcon-7b-instruct": "tiiuae/falcon-7b-instruct",
    "roberta-base": "FacebookAI/roberta-base",
    "gemma-it-hybrid": "google/gemma-2b-it",
}
"""As ../shared/data/tokenizers/README.md says each folder came from (gemma-it-hybrid: gemma-2b-it's
files with Gemma-2's tokenizer.json, the same vocabulary; the hub has gemma-2b-it's own)."""

WEIGHTS = {"model.safetensors": b"weights", "pytorch_model.bin": b"weights", "original/tokenizer.model": b"meta"}
"""Files every fake hub repo also has, which a fetch must never download."""

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """The hub's HTTP API as ``snapshot_download`` uses it (revision info, file tree, file
    downloads), answering from ``repos`` (repo id: {path: bytes}); a repo in ``refuse``
    answers every request with that (status, X-Error-Code) as the hub does."""

    def __init__(self) -> None:
        self.repos: dict[str, dict[str, bytes]] = {}
        self.refuse: dict[str, tuple[int, str | None]] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        """(method, URL, Authorization header) of every request."""

    def add(self, repo_id: str, folder: Path | None = None) -> None:
        """A repo with ``folder``'s files (a tiny tokenizer folder without it) and :data:`WEIGHTS`."""
        files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()} if folder else {}
        if not files:
            files = {
                "config.json": json.dumps({"model_type": "llama", "vocab_size": 3}).encode(),
                "tokenizer.json": b'{"model": {"type": "BPE"}}',
                "tokenizer_config.json": json.dumps({"chat_template": f"{repo_id} {{{{ messages }}}}"}).encode(),
            }
        self.repos[repo_id] = {**files, **WEIGHTS, "README.md": b"# model card"}

    def downloaded(self) -> dict[str, set[str]]:
        """The files each repo served (GET of a file URL)."""
        out: dict[str, set[str]] = {}
        for method, url, _ in self.requests:
            match = re.fullmatch(rf"https://huggingface\.co/(.+)/resolve/{SHA}/(.+)", url)
            if method == "GET" and match:
                out.setdefault(match.group(1), set()).add(match.group(2))
        return out

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append((request.method, str(request.url), request.headers.get("authorization")))
        path = request.url.path
        for repo_id, (status, code) in self.refuse.items():
            if f"/{repo_id}/" in path:
                headers = {"X-Error-Code": code} if code else {}
                return httpx2.Response(
                    status, headers=headers, json={"error": f"Access to model {repo_id} is restricted"}
                )
        if match := re.fullmatch(r"/api/models/(.+)/revision/([^/]+)", path):
            if match.group(1) in self.repos:
                siblings = [{"rfilename": f} for f in self.repos[match.group(1)]]
                return httpx2.Response(200, json={"id": match.group(1), "sha": SHA, "siblings": siblings})
        elif match := re.fullmatch(rf"/api/models/(.+)/tree/{SHA}", path):
            if match.group(1) in self.repos:
                tree = [
                    {"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                    for f, b in self.repos[match.group(1)].items()
                ]
                return httpx2.Response(200, json=tree)
        elif (match := re.fullmatch(rf"/(.+)/resolve/{SHA}/(.+)", path)) and match.group(2) in self.repos.get(
            match.group(1), {}
        ):
            body = self.repos[match.group(1)][match.group(2)]
            headers = {"X-Repo-Commit": SHA, "ETag": f'"{hashlib.sha1(body).hexdigest()}"'}
            return httpx2.Response(200, headers=headers, content=b"" if request.method == "HEAD" else body)
        return httpx2.Response(404, headers={"X-Error-Code": "RepoNotFound"}, json={"error": "Repository not found"})


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeHub]:
    """The fake hub behind ``huggingface_hub``, with the user's token in ``HF_TOKEN``, the
    shadow's fetched tokenizers in ``tmp_path/cache`` rather than the repository's resources/,
    and the hub's own cache (where it records the fake commits) in ``tmp_path`` too."""
    fake = FakeHub()
    monkeypatch.setenv("HF_TOKEN", "hf_usertoken")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(shadow, "TOKENIZER_CACHE", tmp_path / "cache")
    huggingface_hub.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(fake)))
    _http.close_session()
    try:
        yield fake
    finally:
        huggingface_hub.set_client_factory(_http.default_client_factory)
        _http.close_session()


@pytest.fixture
def shared() -> Path:
    for need in ("tokenizers", "sni", "nltk_data"):
        if not (SHARED / need).is_dir():
            pytest.skip(f"needs {SHARED / need} (the real tokenizers and data beside the repository)")
    return SHARED


def without_shared_tokenizers(tmp_path: Path, *, shared_data: bool = False) -> Path:
    """config/shadow.yaml with its tokenizer folders absent (as in a clone without ../shared); its
    other local inputs are the real ones with ``shared_data``, else empty folders (only checked
    to exist here)."""
    override = read_yaml(REPO / OVERRIDE)
    for spec in override["zoo"]["models"].values():
        if spec.get("tokenizer"):
            spec["tokenizer"] = str(tmp_path / "no-shared" / "tokenizers" / Path(spec["tokenizer"]).name)
    if not shared_data:
        for name in ("sni", "nltk_data"):
            (tmp_path / name).mkdir()
        override["data"]["sni"]["local_dir"] = str(tmp_path / "sni")
        override["studies"]["nextword"]["nltk_data"] = str(tmp_path / "nltk_data")
    path = tmp_path / "shadow.yaml"
    path.write_text(yaml.safe_dump(override, sort_keys=False), encoding="utf-8")
    return path


def tokenizer_paths(cfg: dict[str, object]) -> dict[str, Path]:
    zoo = cfg["zoo"]
    assert isinstance(zoo, dict)
    return {name: Path(spec["tokenizer"]) for name, spec in zoo["models"].items() if spec.get("tokenizer")}


def test_each_tokenizer_folder_of_the_override_is_its_models_hub_repo() -> None:
    """Derived from the paper's models: entry of the folder's name where there is one, so that
    the shadow fetches the tokenizer the paper run loads."""
    paper, override = read_yaml(REPO / PAPER), read_yaml(REPO / OVERRIDE)
    folders = {Path(s["tokenizer"]).name for s in override["zoo"]["models"].values() if s.get("tokenizer")}
    assert folders == set(HUB_REPOS)
    for folder, repo_id in HUB_REPOS.items():
        source = hub_source(folder, paper)
        assert source is not None and source.repo_id == repo_id, folder
        if folder in paper["models"]:
            assert source.revision == paper["models"][folder].get("revision"), folder
    if (SHARED / "tokenizers" / "README.md").is_file():  # where each of ../shared's folders came from
        table = (SHARED / "tokenizers" / "README.md").read_text(encoding="utf-8")
        for folder, repo_id in HUB_REPOS.items():
            row = next(line for line in table.splitlines() if line.startswith(f"| `{folder}` |"))
            assert repo_id.split("/")[1].lower() in row.lower(), (folder, row)


def test_the_files_fetched_are_what_the_zoo_reads_and_never_weights() -> None:
    from unsure.engine.pretrained import TOKENIZER_FILES

    assert set(HUB_FILES) >= TOKENIZER_FILES | {"config.json"}
    assert not [f for f in HUB_FILES if "*" in f or "/" in f or f.endswith((".safetensors", ".bin", ".pt"))]


def test_absent_tokenizers_come_from_the_hub_with_the_users_token_and_then_offline_from_resources(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for repo_id in HUB_REPOS.values():
        hub.add(repo_id)
    override = without_shared_tokenizers(tmp_path)
    cfg = merged_config(override=override)

    cache = tmp_path / "cache"
    assert {name: path.parent for name, path in tokenizer_paths(cfg).items()} == dict.fromkeys(
        tokenizer_paths(cfg), cache
    )
    assert hub.downloaded() == {
        repo_id: {"config.json", "tokenizer.json", "tokenizer_config.json"} for repo_id in HUB_REPOS.values()
    }, "each family's tokenizer files and config.json, no weights, no model card"
    assert {auth for _, url, auth in hub.requests if "/api/models/" in url} == {"Bearer hf_usertoken"}
    for folder, repo_id in HUB_REPOS.items():
        files = {p.name for p in (cache / folder).iterdir() if p.is_file()}
        assert files == {"config.json", "tokenizer.json", "tokenizer_config.json", FETCHED}, folder
        assert json.loads((cache / folder / FETCHED).read_text())["repo_id"] == repo_id
        assert not (cache / f"{folder}.part").exists()
    out = capsys.readouterr().out
    assert "from the Hugging Face hub, in " in out and "https://huggingface.co/openai-community/gpt2 -> " in out

    # again, offline: the fetched files are reused without a request
    hub.requests.clear()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert tokenizer_paths(merged_config(override=override)) == tokenizer_paths(cfg)
    assert hub.requests == []
    assert "gpt2: " in capsys.readouterr().out


def test_a_tokenizers_folder_of_the_users_is_used_offline(hub: FakeHub, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    for folder in HUB_REPOS:
        (mine / folder).mkdir(parents=True)
        (mine / folder / "tokenizer.json").write_text("{}")
    override = without_shared_tokenizers(tmp_path)
    cfg = merged_config(override=override, tokenizers=mine)
    assert {path.parent for path in tokenizer_paths(cfg).values()} == {mine}
    assert hub.requests == [], "no network"
    (mine / "gpt2" / "tokenizer.json").unlink()
    (mine / "gpt2").rmdir()
    with pytest.raises(ShadowError, match=r"--tokenizers .*mine: no folder gpt2 in it"):
        merged_config(override=override, tokenizers=mine)


def test_with_shared_beside_the_repository_nothing_is_fetched(shared: Path, hub: FakeHub) -> None:
    """CI: ../shared is used as before."""
    cfg = merged_config()
    assert {path.parent for path in tokenizer_paths(cfg).values()} == {(shared / "tokenizers").resolve()}
    assert hub.requests == []


@pytest.mark.parametrize(
    ("status", "code", "says"),
    [
        (403, "GatedRepo", "gated: accept its licence at https://huggingface.co/meta-llama/Llama-2-7b-hf"),
        (401, "GatedRepo", "gated: accept its licence at https://huggingface.co/meta-llama/Llama-2-7b-hf"),
        (401, None, "https://huggingface.co/meta-llama/Llama-2-7b-hf does not exist or is private"),
    ],
)
def test_a_refused_model_stops_the_shadow_with_its_id_and_the_fix(
    hub: FakeHub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    code: str | None,
    says: str,
) -> None:
    for repo_id in HUB_REPOS.values():
        hub.add(repo_id)
    hub.refuse["meta-llama/Llama-2-7b-hf"] = (status, code)
    monkeypatch.setattr(shadow, "OVERRIDE", str(without_shared_tokenizers(tmp_path)))
    assert shadow.main(["--ci", "-n", "--workdir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    message = err.splitlines()[-1]  # after the hub's progress bars of the families fetched before
    assert message.startswith(
        "shadow: cannot fetch the tokenizer files of llama-2-7b from the Hugging Face hub (meta-llama/Llama-2-7b-hf)"
    ), err
    assert says in message and "hf auth login" in message and "HF_TOKEN" in message and "--tokenizers DIR" in message
    assert not (tmp_path / "cache" / "llama-2-7b").exists()


def test_an_unreachable_hub_stops_the_shadow_with_the_offline_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real hub client in offline mode (as without a network: it raises the same error)."""
    monkeypatch.setattr(shadow, "TOKENIZER_CACHE", tmp_path / "cache")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(shadow, "OVERRIDE", str(without_shared_tokenizers(tmp_path)))
    assert shadow.main(["--ci", "-n", "--workdir", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err
    assert "the hub cannot be reached (offline, or HF_HUB_OFFLINE is set)" in err and "--tokenizers DIR" in err
    assert err.startswith(
        "shadow: cannot fetch the tokenizer files of falcon-7b-instruct from the Hugging Face hub "
        "(tiiuae/falcon-7b-instruct): "
    ), err
    assert "Traceback" not in err


@pytest.mark.workflow
def test_the_ci_dry_run_without_shared_tokenizers_fetches_them_through_the_hub(
    shared: Path, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 31's done-when: in a clone with no ../shared tokenizers beside it, `make shadow-ci`
    (``python tools/shadow.py --ci``) reaches its tokenizer step and fetches through the hub
    code; here the hub serves ../shared's real files, and the dry run plans every job."""
    for folder, repo_id in HUB_REPOS.items():
        hub.add(repo_id, shared / "tokenizers" / folder)
    override = without_shared_tokenizers(tmp_path, shared_data=True)
    monkeypatch.setattr(shadow, "OVERRIDE", str(override))
    work = tmp_path / "work"
    assert shadow.main(["--ci", "-n", "--port", "0", "--workdir", str(work)]) == 0
    out = capsys.readouterr().out
    assert "shadow run finished" in out.splitlines()[-1]
    assert set(hub.downloaded()) == set(HUB_REPOS.values())
    for repo_id, files in hub.downloaded().items():
        assert files and not files & set(WEIGHTS), repo_id
    written = read_yaml(work / "shadow-config.yaml")
    assert {path.parent for path in tokenizer_paths(written).values()} == {tmp_path / "cache"}
    # the same families, tokenizers and chat templates as with ../shared: CI folds the same entries
    assert shadow_config(ci=True, override=override)[1] == shadow_config(ci=True, override=REPO / OVERRIDE)[1]
