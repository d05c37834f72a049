"""Write a prefix-heavy RAG trace in Mooncake's JSONL format (with `hash_ids`), for the
host KV tier's replay (`inferfleet simulate --compare-host-kv-cache`).

No public prefix-annotated trace is bundled, so this one is synthesized, seeded and
repeatable: one hour; arrivals Poisson at a rate that rises from 0.5 to 1.5 req/s and
falls back (a sine over the hour); each prompt is a shared 512-token system prompt, one
of `--documents` retrieved documents (5,120-9,216 tokens, popularity Zipf with exponent
`--zipf`: a few documents are asked about again and again, most rarely) and a question of
50-400 tokens; answers 50-600 tokens. Blocks are Mooncake's 512 tokens: a document's
full blocks have the same ids in every prompt that carries it, the block it shares with
the question and the question's own are new ids.

    python hack/bench/rag_trace.py \
        --out operator/inferfleet/autoscaling/simulate/data/rag-documents-synthetic.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

BLOCK_TOKENS = 512
SPAN_S = 3600.0


def records(documents: int, zipf: float, seed: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    doc_blocks = rng.integers(10, 19, size=documents)  # 5,120-9,216 tokens
    weights = 1.0 / np.arange(1, documents + 1) ** zipf
    weights /= weights.sum()
    next_id = 1  # 0: the system prompt's block
    doc_ids: list[list[int]] = []
    for blocks in doc_blocks:
        doc_ids.append(list(range(next_id, next_id + int(blocks))))
        next_id += int(blocks)
    out: list[dict[str, object]] = []
    t = 0.0
    while True:
        rate = 1.0 - 0.5 * math.cos(2 * math.pi * t / SPAN_S)
        t += float(rng.exponential(1.0 / rate))
        if t >= SPAN_S:
            return out
        doc = int(rng.choice(documents, p=weights))
        question = int(rng.integers(50, 401))
        prompt = BLOCK_TOKENS * (1 + len(doc_ids[doc])) + question
        tail = math.ceil(prompt / BLOCK_TOKENS) - 1 - len(doc_ids[doc])
        ids = [0, *doc_ids[doc], *range(next_id, next_id + tail)]
        next_id += tail
        out.append(
            {
                "timestamp": round(t * 1000),
                "input_length": prompt,
                "output_length": int(rng.integers(50, 601)),
                "hash_ids": ids,
            }
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    lines = [json.dumps(r, separators=(", ", ": ")) for r in records(args.documents, args.zipf, args.seed)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(json.dumps({"out": str(args.out), "requests": len(lines)}))


if __name__ == "__main__":
    main()
