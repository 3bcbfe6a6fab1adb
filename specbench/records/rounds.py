"""Records → flat per-round arrays, and per-prompt sums of them (the bootstrap's unit).

A record (one configuration × prompt × turn × repeat) carries per-round lists: ``round_drafted``,
``round_depth``, ``round_accepted``, ``round_draft_steps``, ``round_draft_s``, ``round_verify_s``.
The acceptance and cost fits need those flat, each round tagged with the prompt it belongs to
(its *cluster*), and reduced to per-prompt sufficient statistics: then a point estimate sums over
prompts with weight 1 and a bootstrap replicate with multinomial weights (see
`specbench.analysis.statistics.intervals`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from specbench.errors import SpecbenchError


def prompt_clusters(records: pd.DataFrame) -> pd.Index:
    """The clusters of a set of records: its distinct prompt ids, sorted."""
    return pd.Index(sorted(records["prompt_id"].astype(str).unique()))


def cluster_codes(records: pd.DataFrame, clusters: pd.Index) -> np.ndarray:
    """Cluster index of every record (its prompt's position in ``clusters``)."""
    codes = clusters.get_indexer(records["prompt_id"].astype(str))
    if (codes < 0).any():
        raise ValueError("records hold prompts outside the given clusters")
    return codes


@dataclass
class Rounds:
    """Every round of a set of records, flattened; all arrays have one entry per round."""

    cluster: np.ndarray  # prompt index of the round
    unit: np.ndarray  # row of the record the round came from
    config_gamma: np.ndarray  # the record's nominal γ (its configuration's)
    drafted: np.ndarray  # draft tokens offered (``round_drafted``: a chain's γ, a tree's node count)
    round_gamma: np.ndarray  # the round's own γ, ≤ config_gamma: drafted (chain) or depth (tree)
    accepted: np.ndarray  # draft tokens accepted (tree: depth of the accepted path)
    steps: np.ndarray  # drafter forwards
    draft_s: np.ndarray  # proposal time, s
    verify_s: np.ndarray  # target forward over drafted + 1 tokens (+ acceptance), s

    def __len__(self) -> int:
        return int(self.cluster.shape[0])

    def select(self, mask: np.ndarray) -> Rounds:
        return Rounds(**{name: getattr(self, name)[mask] for name in self.__dataclass_fields__})


def _flat(series: pd.Series, dtype) -> np.ndarray:
    parts = [np.asarray(v, dtype=dtype) for v in series]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def flatten_rounds(records: pd.DataFrame, clusters: pd.Index) -> Rounds:
    """Flatten the per-round lists of ``records``; rounds are tagged with their prompt cluster.

    A round's own γ (the acceptance model's draft length) is ``round_drafted`` for a chain and
    ``round_depth`` for a tree (the accepted path's depth is compared with the tree's depth).
    """
    counts = records["round_accepted"].map(len).to_numpy(dtype=np.int64)
    for column in ("round_drafted", "round_depth", "round_draft_steps", "round_draft_s", "round_verify_s"):
        if not np.array_equal(records[column].map(len).to_numpy(dtype=np.int64), counts):
            raise SpecbenchError(f"broken records: per-round list '{column}' and 'round_accepted' differ in length")
    unit = np.repeat(np.arange(len(records)), counts)
    drafted = _flat(records["round_drafted"], np.int64)
    depth = _flat(records["round_depth"], np.int64)
    chain = np.repeat((records["tree"] == "chain").to_numpy(), counts)
    rounds = Rounds(
        cluster=np.repeat(cluster_codes(records, clusters), counts),
        unit=unit,
        config_gamma=np.repeat(records["gamma"].to_numpy(dtype=np.int64), counts),
        drafted=drafted,
        round_gamma=np.where(chain, drafted, depth),
        accepted=_flat(records["round_accepted"], np.int64),
        steps=_flat(records["round_draft_steps"], np.int64),
        draft_s=_flat(records["round_draft_s"], float),
        verify_s=_flat(records["round_verify_s"], float),
    )
    if (rounds.accepted > rounds.round_gamma).any() or (rounds.accepted < 0).any():
        raise SpecbenchError("broken records: a round accepts more draft tokens than it drafted")
    return rounds


def cluster_sums(cluster: np.ndarray, n_clusters: int, *values: np.ndarray) -> np.ndarray:
    """[n_clusters, len(values)]: per-prompt sums of each value array (one entry per row)."""
    if not values:
        return np.zeros((n_clusters, 0))
    return np.stack(
        [np.bincount(cluster, weights=np.asarray(v, dtype=float), minlength=n_clusters) for v in values], axis=-1
    )


@dataclass
class Binned:
    """Per prompt and per distinct x: count, Σy and Σy² of y — enough for any least-squares fit in x.

    ``stats[p, k] = (n, Σy, Σy²)`` over the rows of prompt p whose x equals ``x[k]``.
    """

    x: np.ndarray  # [K] distinct x values, ascending
    stats: np.ndarray  # [P, K, 3]

    def total(self, weights: np.ndarray | None = None) -> np.ndarray:
        """[K, 3] sums over prompts, each prompt counted ``weights[p]`` times (default once)."""
        if weights is None:
            return self.stats.sum(axis=0)
        return np.tensordot(np.asarray(weights, dtype=float), self.stats, axes=1)


def binned(cluster: np.ndarray, x: np.ndarray, y: np.ndarray, n_clusters: int) -> Binned:
    xs, xi = np.unique(np.asarray(x), return_inverse=True)
    k = len(xs)
    index = np.asarray(cluster) * k + xi
    y = np.asarray(y, dtype=float)
    size = n_clusters * k
    stats = np.stack(
        [
            np.bincount(index, minlength=size).astype(float),
            np.bincount(index, weights=y, minlength=size),
            np.bincount(index, weights=y * y, minlength=size),
        ],
        axis=-1,
    )
    return Binned(x=xs, stats=stats.reshape(n_clusters, k, 3))
