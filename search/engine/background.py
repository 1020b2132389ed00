"""How a query's cosine scores are spread over the whole corpus: the vector lane's background.

Raw cosines do not tell an answer from noise: with multilingual-e5-small every text scores about 0.75-0.80
against every other, a made-up word included. What does is how far a hit stands out from the query's own
score distribution over the corpus. For unit vectors that distribution has a closed form: the mean of
``q · d`` over the corpus is ``q · m`` (``m`` the mean chunk vector) and its variance is ``qᵀ C q`` (``C`` the
chunks' covariance), so one matrix-vector product per query gives both, whatever the corpus size.

``m`` and ``C`` are estimated from a deterministic sample of the active space's chunk vectors (all of them up
to ``SAMPLE`` chunks), read once per process and database and read again when the corpus moved: the vector
lane's statement reports the newest chunk id, and a sample older than ``MAX_AGE_S`` or taken before the corpus
changed by more than ``STALE_SHARE`` (any change, for a corpus small enough to be read whole) is taken again.
The covariance of a small sample is shrunk towards the isotropic one (``SHRINK_SAMPLES``), so a corpus of a
few chunks still gives a usable spread. The background counts every chunk of the space (drafts and restricted
ones too): it is a statistic of the index, never a hit, and it is the same for every reader.
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from django.conf import settings

from search.engine.sql import Fragment, execute
from search.replicas import read_connection

SAMPLE = 4000
MAX_AGE_S = 600.0
STALE_SHARE = 0.05
# Weight of the isotropic covariance when the sample is small: SHRINK_SAMPLES / (SHRINK_SAMPLES + n).
SHRINK_SAMPLES = 50.0
MIN_STD = 1e-3

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class QueryBackground:
    """The query's cosine distribution over the corpus: its mean and standard deviation."""

    mean: float
    std: float

    def z(self, similarity: float) -> float:
        return (similarity - self.mean) / self.std


@dataclass(frozen=True)
class _Sample:
    model: str
    newest_chunk_id: int
    chunks: int
    mean: FloatArray
    covariance: FloatArray
    taken_at: float

    def fresh(self, newest_chunk_id: int) -> bool:
        if time.monotonic() - self.taken_at > MAX_AGE_S:
            return False
        if newest_chunk_id == self.newest_chunk_id:
            return True
        if self.chunks < SAMPLE:  # read whole: any change is a new corpus
            return False
        return abs(newest_chunk_id - self.newest_chunk_id) <= STALE_SHARE * max(self.newest_chunk_id, 1)


_lock = threading.Lock()
_samples: dict[tuple[str, str, str], _Sample] = {}


def query_background(vector: list[float], *, model: str, dims: int, newest_chunk_id: int) -> QueryBackground | None:
    """The query's cosine mean and spread over the active space's chunks (None when the space holds fewer
    than ``SEARCH_BACKGROUND_MIN_CHUNKS`` vectors: so few cosines say nothing of how far a hit stands out, and
    confidence then rests on the words alone). ``newest_chunk_id``: the newest chunk id the lane's statement
    saw (for freshness)."""
    sample = _sample(model, dims, newest_chunk_id)
    if sample is None or sample.chunks < int(settings.SEARCH["BACKGROUND_MIN_CHUNKS"]):
        return None
    q = np.asarray(vector, dtype=np.float64)
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return None
    q /= norm
    mean = float(q @ sample.mean)
    variance = float(q @ sample.covariance @ q)
    return QueryBackground(mean=mean, std=max(math.sqrt(max(variance, 0.0)), MIN_STD))


def background_forget() -> None:
    """Drop every cached sample (tests; a process that knows its corpus was replaced)."""
    with _lock:
        _samples.clear()


def _sample(model: str, dims: int, newest_chunk_id: int) -> _Sample | None:
    reader = read_connection()
    key = (reader.alias, str(reader.settings_dict.get("NAME")), model)
    with _lock:
        known = _samples.get(key)
        if known is not None and known.fresh(newest_chunk_id):
            return known
        taken = _take(model, dims, newest_chunk_id)
        if taken is None:
            _samples.pop(key, None)
        else:
            _samples[key] = taken
        return taken


def _take(model: str, dims: int, newest_chunk_id: int) -> _Sample | None:
    reader = read_connection()
    with reader.cursor() as cursor:
        execute(cursor, Fragment("SELECT min(id), max(id) FROM search_chunk WHERE embedding_model = %s", (model,)))
        low, high = cursor.fetchone() or (None, None)
        if low is None or high is None:
            return None
        span = int(high) - int(low) + 1
        if span <= SAMPLE * 3 // 2:
            execute(cursor, Fragment(
                f"SELECT embedding::vector({int(dims)})::real[] FROM search_chunk "
                "WHERE embedding_model = %s ORDER BY id",
                (model,),
            ))
        else:
            # Deterministic: the same corpus gives the same sample (evaluations and tests repeat exactly).
            rng = np.random.default_rng(zlib.crc32(model.encode()))
            ids = np.unique(rng.integers(int(low), int(high) + 1, size=SAMPLE * 3 // 2)).tolist()
            execute(cursor, Fragment(
                f"SELECT embedding::vector({int(dims)})::real[] FROM search_chunk "
                "WHERE id = ANY(%s::bigint[]) AND embedding_model = %s LIMIT %s",
                (ids, model, SAMPLE),
            ))
        rows = [r[0] for r in cursor.fetchall()]
    if not rows:
        return None
    matrix = np.asarray(rows, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0.0, 1.0, norms)
    n = matrix.shape[0]
    mean = matrix.mean(axis=0)
    centred = matrix - mean
    covariance = centred.T @ centred / max(n - 1, 1)
    shrink = SHRINK_SAMPLES / (SHRINK_SAMPLES + n)
    isotropic = float(np.trace(covariance)) / covariance.shape[0] if n > 1 else 1.0 / covariance.shape[0]
    covariance = (1.0 - shrink) * covariance + shrink * isotropic * np.eye(covariance.shape[0])
    return _Sample(model, newest_chunk_id, n, mean, covariance, time.monotonic())
