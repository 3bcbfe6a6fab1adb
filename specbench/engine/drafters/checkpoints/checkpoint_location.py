"""Where a drafter checkpoint named by ``checkpoint=`` lives, without loading torch.

A checkpoint is named by a folder, a shipped name (``<target>/<type>``, a folder of the ``drafters/``
tree installed with the package as ``specbench.builtin_drafters``) or a Hugging Face hub id
(``owner/name``: a published head, e.g. in the speculators format, which `is_speculators` tells from its
``config.json``). The serving backends ask this
module before anything starts (a shipped name is specbench's own format, which vLLM cannot load; a
hub id is passed through to vLLM); the engine asks it to find the folder it loads
(`specbench.engine.drafters.checkpoints.checkpoint.resolve_checkpoint`), downloading a hub id where the hub is
reachable (`fetch_hub_checkpoint`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from huggingface_hub import snapshot_download
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

from specbench.errors import SpecbenchError
from specbench.models.resolve import hub_reachable

CONFIG = "config.json"
SPECULATORS = "speculators"  # the speculators format (`specbench.engine.drafters.checkpoints.speculators_format`)
SPECULATORS_KEYS = ("speculators_model_type", "speculators_config")  # a config.json with either is in that format
# what a hub download of a drafter checkpoint fetches: its config and weights, never other files of the repository
HUB_FILES = ("*.json", "*.safetensors", "*.bin")


def is_speculators(config) -> bool:
    """Whether a parsed config.json is in the speculators format."""
    return isinstance(config, dict) and any(key in config for key in SPECULATORS_KEYS)


def shipped_root() -> Path:
    """The ``drafters/`` folder installed with the package (falls back to the source tree)."""
    try:
        root = Path(str(resources.files("specbench.builtin_drafters")))
        if root.is_dir():
            return root
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[4] / "drafters"


def shipped_names() -> list[str]:
    root = shipped_root()
    return sorted(f"{c.parent.parent.name}/{c.parent.name}" for c in root.glob(f"*/*/{CONFIG}"))


def is_shipped(spec: str) -> bool:
    """Whether ``spec`` names a checkpoint shipped with specbench (``smollm2-135m/eagle3``)."""
    text = str(spec).strip()
    return text in shipped_names()


def looks_like_hub_id(spec: str) -> bool:
    """``owner/name`` that is not a local path (no leading ``/``, ``.`` or ``~``, nothing there) and not under a
    shipped target's folder (``smollm2-135m/eagel`` is a misspelt shipped name, not a hub id)."""
    text = str(spec).strip()
    parts = text.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not text.startswith((".", "~"))
        and " " not in text
        and not Path(text).expanduser().exists()
        and not (shipped_root() / parts[0]).is_dir()
    )


def fetch_hub_checkpoint(repo_id: str) -> Path:
    """A local folder holding hub repository ``repo_id``'s config and weights: from the local Hugging Face
    cache when it has them, else downloaded where the hub is reachable; otherwise one line saying how to
    get it."""
    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(HUB_FILES), local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        pass
    if not hub_reachable():
        raise SpecbenchError(
            f"drafter checkpoint '{repo_id}' is not a folder here and the Hugging Face hub is not "
            f"reachable: download it where it is (huggingface-cli download {repo_id} --local-dir "
            "DIR), then pass checkpoint=DIR"
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=list(HUB_FILES)))
    except (RepositoryNotFoundError, HfHubHTTPError, OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise SpecbenchError(f"cannot download drafter checkpoint '{repo_id}' from the hub: {first}") from None
