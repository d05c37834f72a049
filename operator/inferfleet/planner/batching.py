"""The batch settings a layout deploys: `--max-num-seqs` and the prefill chunk (pure).

Every layout is judged with the settings it would really run (planner.tier evaluates
each candidate through `deployed_batching`), so the tensor-parallel degree is never
chosen under one set of flags and deployed with another.

The prefill chunk (`--max-num-batched-tokens` with chunked prefill) trades both
latencies: a step that carries a chunk takes `decode step + chunk / prefill rate`, and
under load such steps are frequent enough to set the ITL p99; small chunks, however,
re-read the weights for every few hundred prompt tokens (and share the token budget
with one decode token per running sequence), so prefill runs at a fraction of its rate,
a P99 prompt needs many steps, and prompts queue behind each other (TTFT).
The chosen chunk is the largest that keeps both SLOs; when none does, the one whose worse
SLO is missed by the smallest factor, and the plan warns with the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferfleet.planner.fleet import DEFAULT_HEADROOM
from inferfleet.planner.performance import USABLE_SHARE_OF_ROOFLINE, Roofline
from inferfleet.planner.workload import TierWorkload

# Share of the ITL SLO the steady decode step may use; the rest absorbs the prefill
# chunks that chunked prefill mixes into some steps.
ITL_HEADROOM = 0.8
# Share of the TTFT SLO a P99 prompt's prefill (queueing behind other prompts' chunks
# included) may take; the rest is for waiting for a free sequence slot, the network
# and detokenizing.
PREFILL_SHARE_OF_TTFT = 0.8
CHUNK_OPTIONS = (512, 1024, 2048, 4096, 8192, 16384)
# Prefill load above this share of a replica's prefill capacity is treated as saturated.
MAX_PREFILL_LOAD = 0.95
# Offline tiers take large chunks for throughput (vLLM's own large-GPU default).
OFFLINE_CHUNK_LARGE_GPU = 16384
OFFLINE_CHUNK = 8192


@dataclass(frozen=True, slots=True)
class ChunkOption:
    tokens: int
    step_ms: float  # a decode step that also carries one chunk
    prefill_tokens_per_s: float  # when every step carries a chunk
    prefill_load: float  # share of that capacity the replica's prompts use at peak
    ttft_ms: float  # a P99 prompt's prefill, queueing behind other prefills included
    itl_ms: float

    def meets(self, ttft_budget_ms: float, itl_slo_ms: float) -> tuple[bool, bool]:
        return (self.ttft_ms <= ttft_budget_ms, self.itl_ms <= itl_slo_ms)


@dataclass(frozen=True, slots=True)
class Batching:
    """The batch flags of one layout, why, and what it cannot meet."""

    max_num_seqs: int
    max_num_batched_tokens: int
    prefill_tokens_per_s: float  # effective: what chunked steps leave of the roofline
    notes: tuple[str, ...]
    slo_misses: tuple[str, ...]  # empty when the layout meets the latency SLOs

    @property
    def meets_slo(self) -> bool:
        return not self.slo_misses


def round_seqs(value: int) -> int:
    return max(1, value - value % 8 if value >= 8 else value)


def chunk_option(roof: Roofline, workload: TierWorkload, running: float, tokens: int) -> ChunkOption:
    chunk_ms = tokens / roof.prefill_tokens_per_second * 1000
    step_ms = roof.step_ms(running) + chunk_ms
    # The token budget also carries one decode token per running sequence.
    prefill_per_step = max(1.0, tokens - running)
    capacity = prefill_per_step / step_ms * 1000
    # Replicas are sized so each carries its usable rate at peak over the headroom; its
    # prompts then keep prefill this busy.
    decode_tokens_per_s = max(1.0, running) / (roof.step_ms(running) / 1000)
    seconds_per_request = (
        workload.mean_output_tokens / decode_tokens_per_s + workload.mean_input_tokens / capacity
    )
    rps = USABLE_SHARE_OF_ROOFLINE / seconds_per_request / (1 + DEFAULT_HEADROOM)
    load = min(MAX_PREFILL_LOAD, rps * workload.mean_input_tokens / capacity)
    # The SLO is a P99: the P99 prompt, waiting behind other prompts' chunks (an M/D/1
    # queue's mean wait).
    steps = math.ceil(workload.input_p99 / prefill_per_step)
    service_ms = steps * step_ms
    return ChunkOption(
        tokens=tokens,
        step_ms=step_ms,
        prefill_tokens_per_s=capacity,
        prefill_load=load,
        ttft_ms=service_ms * (1 + load / (2 * (1 - load))),
        itl_ms=step_ms,
    )


def _chunk_text(option: ChunkOption) -> str:
    return (
        f"a step carrying a chunk takes ~{option.itl_ms:.0f} ms and a P99 prompt's prefill "
        f"~{option.ttft_ms:,.0f} ms at {option.prefill_load:.0%} prefill load"
    )


def choose_chunk(
    roof: Roofline, workload: TierWorkload, running: float, max_num_seqs: int
) -> tuple[int, float, str, tuple[str, ...]]:
    """(chunk tokens, effective prefill tokens/s, reason, SLO misses) for an online tier."""
    ttft_budget_ms = workload.ttft_slo_s * 1000 * PREFILL_SHARE_OF_TTFT
    itl_ms = workload.itl_slo_s * 1000
    options = [chunk_option(roof, workload, running, tokens) for tokens in CHUNK_OPTIONS]
    both = [o for o in options if all(o.meets(ttft_budget_ms, itl_ms))]
    misses: list[str] = []
    if both:
        chosen = both[-1]
        why = f"the largest chunk within both SLOs: {_chunk_text(chosen)}"
    else:
        # Neither latency may be sacrificed wholesale for the other: the chunk whose worse
        # SLO is missed by the smallest factor (a TTFT-first rule picked 4096-token chunks
        # whose steps broke a 120 ms ITL SLO six times over to save 10 % of TTFT).
        chosen = min(options, key=lambda o: max(o.ttft_ms / ttft_budget_ms, o.itl_ms / itl_ms))
        ttft_ok, itl_ok = chosen.meets(ttft_budget_ms, itl_ms)
        why = f"no chunk keeps both SLOs; the one that misses them by the least: {_chunk_text(chosen)}"
        if not itl_ok:
            misses.append(
                f"ITL: steps carrying a {chosen.tokens}-token prefill chunk take ~{chosen.itl_ms:.0f} ms, "
                f"above the {itl_ms:.0f} ms ITL SLO; smaller chunks would trade it for a slower P99 prompt "
                f"against the TTFT budget ({ttft_budget_ms:,.0f} ms)"
            )
        if not ttft_ok:
            misses.append(
                f"TTFT: a P99 prompt of {workload.input_p99:,} tokens takes ~{chosen.ttft_ms:,.0f} ms to "
                f"prefill ({chosen.prefill_tokens_per_s:,.0f} tokens/s at {chosen.prefill_load:.0%} load), "
                f"above {PREFILL_SHARE_OF_TTFT:.0%} of the {workload.ttft_slo_s * 1000:,.0f} ms TTFT SLO"
            )
    tokens = max(chosen.tokens, max_num_seqs)  # vLLM needs a budget of at least one token per sequence
    return (tokens, chosen.prefill_tokens_per_s, f"max-num-batched-tokens {tokens}: {why}", tuple(misses))


def deployed_batching(
    roof: Roofline,
    workload: TierWorkload,
    *,
    max_num_seqs_override: int | None,
    max_num_batched_tokens_override: int | None,
    chunked_prefill: bool,
    max_model_len: int,
    large_gpu: bool,
) -> Batching:
    notes: list[str] = []
    misses: list[str] = []
    itl_budget_ms = workload.itl_slo_s * 1000 * ITL_HEADROOM
    if max_num_seqs_override is not None:
        seqs = max_num_seqs_override
        notes.append(f"max-num-seqs {seqs}: set by the tier override")
    elif workload.online:
        within = roof.max_batch_within(itl_budget_ms)
        seqs = round_seqs(min(workload.max_num_seqs_cap, within))
        if within < workload.max_num_seqs_cap:
            notes.append(
                f"max-num-seqs {seqs}: the largest batch whose decode step (~{roof.step_ms(seqs):.0f} ms) "
                f"stays within {ITL_HEADROOM:.0%} of the {workload.itl_slo_s * 1000:.0f} ms ITL SLO"
            )
        else:
            notes.append(
                f"max-num-seqs {seqs}: interactive batch cap for {workload.archetype} "
                f"(decode step ~{roof.step_ms(seqs):.0f} ms at full batch, within the ITL SLO)"
            )
    else:
        seqs = workload.max_num_seqs_cap
        notes.append(f"max-num-seqs {seqs}: offline batch cap; throughput first, preemption is acceptable")
    if workload.online and roof.step_ms(1) > workload.itl_slo_s * 1000:
        misses.append(
            f"ITL: one decode step takes ~{roof.step_ms(1):.0f} ms even for a single sequence, above the "
            f"{workload.itl_slo_s * 1000:.0f} ms ITL SLO"
        )
    running = float(max(1, min(seqs, workload.target_concurrency)))
    prefill = roof.prefill_tokens_per_second
    if max_num_batched_tokens_override is not None:
        batched = max_num_batched_tokens_override
        notes.append(f"max-num-batched-tokens {batched}: set by the tier override")
        if workload.online and chunked_prefill:
            option = chunk_option(roof, workload, running, batched)
            prefill = option.prefill_tokens_per_s
            ttft_ok, itl_ok = option.meets(
                workload.ttft_slo_s * 1000 * PREFILL_SHARE_OF_TTFT, workload.itl_slo_s * 1000
            )
            if not (ttft_ok and itl_ok):
                misses.append(f"with the overridden chunk of {batched} tokens, {_chunk_text(option)}")
    elif not chunked_prefill:
        batched = max(OFFLINE_CHUNK if large_gpu else 2048, max_model_len)
        notes.append(
            f"max-num-batched-tokens {batched}: chunked prefill is off, so a whole prompt fits one step"
        )
    elif workload.online:
        batched, prefill, note, chunk_misses = choose_chunk(roof, workload, running, seqs)
        notes.append(note)
        misses.extend(chunk_misses)
    else:
        batched = max(OFFLINE_CHUNK_LARGE_GPU if large_gpu else OFFLINE_CHUNK, seqs)
        notes.append(f"max-num-batched-tokens {batched}: large prefill chunks for throughput (offline)")
    if workload.online and not chunked_prefill:
        prefill_ms = workload.input_p99 / roof.prefill_tokens_per_second * 1000
        if prefill_ms > workload.ttft_slo_s * 1000 * PREFILL_SHARE_OF_TTFT:
            misses.append(
                f"TTFT: a P99 prompt of {workload.input_p99:,} tokens takes ~{prefill_ms:,.0f} ms to prefill "
                f"({roof.prefill_tokens_per_second:,.0f} tokens/s), above {PREFILL_SHARE_OF_TTFT:.0%} of the "
                f"{workload.ttft_slo_s * 1000:,.0f} ms TTFT SLO"
            )
    return Batching(
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        prefill_tokens_per_s=prefill,
        notes=tuple(notes),
        slo_misses=tuple(misses),
    )
