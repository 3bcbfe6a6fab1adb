"""The Hugging Face hub, asked at most once per question and only where it answers.

huggingface_hub retries a failed download five times with backoff (1 + 2 + 4 + 8 + 8 s, each try printing a
warning), so a name that resolves nowhere, asked offline, costs half a minute of noise before the one line it
deserves. specbench therefore asks the hub nothing until `hub_reachable` said yes: offline mode set
(``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` true, or ``SPECBENCH_OFFLINE`` set) is no without a packet;
otherwise one TCP connection to the endpoint (``HF_ENDPOINT``, default https://huggingface.co) with one timeout.
The questions a plan needs (`hub_model_exists`, `hub_config`) are one HTTP request each, with one timeout and
no retry: a dry run costs what its answer is worth.
"""

from __future__ import annotations

import json
import os
import socket
from urllib.parse import urlsplit

import httpx2  # the HTTP library huggingface_hub installs
from huggingface_hub import try_to_load_from_cache
from huggingface_hub.utils import build_hf_headers

from specbench.errors import SpecbenchError

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 3.0  # the TCP connection that says whether the hub is there
QUESTION_TIMEOUT_S = 10.0  # one request to a hub that answered the probe
TRUE_WORDS = ("1", "true", "yes", "on")


def offline_mode() -> bool:
    """Offline mode forced by the environment (huggingface_hub's variables, or specbench's own)."""
    forced = any(
        os.environ.get(name, "").strip().lower() in TRUE_WORDS for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )
    return forced or bool(os.environ.get("SPECBENCH_OFFLINE"))


def endpoint() -> str:
    """The hub's base address: ``HF_ENDPOINT`` (as huggingface_hub reads it), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_reachable(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the hub's endpoint accepts a connection within ``timeout`` seconds (no when offline mode is set)."""
    if offline_mode():
        return False
    try:
        parts = urlsplit(endpoint())
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not host:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def in_local_cache(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds ``repo_id``'s config.json (read from disk only)."""
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repository id
        return False


def _get(path: str, what: str):
    """One GET of ``endpoint()/path`` (one timeout, no retry); the response, or one line saying why not."""
    try:
        return httpx2.get(
            f"{endpoint()}/{path}", headers=build_hf_headers(), timeout=QUESTION_TIMEOUT_S, follow_redirects=True
        )
    except httpx2.HTTPError as exc:
        raise SpecbenchError(f"the Hugging Face hub did not answer about {what} ({type(exc).__name__})") from None


def hub_model_exists(repo_id: str) -> None:
    """Refuses in one line a model the hub does not have (or will not show: gated or private without a token)."""
    answer = _get(f"api/models/{repo_id}", f"model '{repo_id}'")
    if answer.status_code in (401, 403, 404):
        raise SpecbenchError(
            f"model '{repo_id}' is not an alias, a .gguf file, a model folder nor a model the Hugging Face hub "
            f"shows (HTTP {answer.status_code}; a gated or private one needs HF_TOKEN)"
        )
    if answer.status_code != 200:
        raise SpecbenchError(f"the Hugging Face hub answered HTTP {answer.status_code} about model '{repo_id}'")


def hub_config(repo_id: str) -> dict | None:
    """The model's config.json from the hub (one request), or None when it has none that reads as JSON."""
    answer = _get(f"{repo_id}/resolve/main/config.json", f"the config of '{repo_id}'")
    if answer.status_code != 200:
        return None
    try:
        data = json.loads(answer.content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
