"""Trace readers: each published format as shipped, load and time scaling, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from inferfleet.api import TokenPercentiles
from inferfleet.autoscaling.simulate.traces import TraceError
from inferfleet.autoscaling.tracefiles.read import detect_format, load_trace

IN = TokenPercentiles(p50=100, p95=400, p99=800)
OUT = TokenPercentiles(p50=20, p95=80, p99=160)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_azure_csv_with_seven_fractional_digits(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "azure.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:05.0319600,3180,8\n",
    )
    trace = load_trace(path)
    assert trace.format == "azure"
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 1.052])
    assert trace.input_tokens.tolist() == [4808, 3180]
    assert trace.output_tokens.tolist() == [10, 8]
    assert trace.epoch_s == pytest.approx(1700158623.97996)


def test_burstgpt_csv(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "burst.csv",
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "7.5,GPT-4,1087,0,1087,API log\n",
    )
    trace = load_trace(path)
    assert trace.format == "burstgpt"
    assert trace.arrival_s.tolist() == [0.0, 2.5]
    assert trace.output_tokens.tolist() == [18, 1]  # a failed (0-token) response still arrived


def test_mooncake_jsonl(tmp_path: Path) -> None:
    lines = [
        {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [1, 2]},
        {"timestamp": 30535, "input_length": 6472, "output_length": 26, "hash_ids": [3]},
    ]
    path = write(tmp_path, "mooncake.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    trace = load_trace(path)
    assert trace.format == "mooncake"
    assert trace.arrival_s.tolist() == pytest.approx([0.0, 3.053])


def test_rate_series_is_synthesized_at_the_given_rate(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "rates.csv",
        "window_start_s,window_s,total_rate_rps,total_rpm,active_clients,rate_weighted_client_cv\n"
        "0,600,10,600,3,1.2\n600,600,20,1200,3,1.5\n",
    )
    trace = load_trace(path, input_tokens=IN, output_tokens=OUT, rate_scale=0.5)
    assert trace.format == "rates"
    first = np.count_nonzero(trace.arrival_s < 600)
    second = len(trace) - first
    assert first == pytest.approx(3000, rel=0.1)  # 10 req/s x 0.5 x 600 s
    assert second == pytest.approx(6000, rel=0.1)
    assert np.median(trace.input_tokens) == pytest.approx(100, rel=0.1)
    assert trace.span_s == 1200.0
    stretched = load_trace(path, input_tokens=IN, output_tokens=OUT, rate_scale=0.5, time_scale=2.0)
    assert stretched.span_s == 2400.0
    assert len(stretched) == len(trace)  # same requests, twice the time
    gamma = load_trace(path, input_tokens=IN, output_tokens=OUT, arrivals="gamma")
    assert len(gamma) == pytest.approx(18000, rel=0.1)


def test_rate_scale_of_request_traces(tmp_path: Path) -> None:
    rows = "".join(f"{i * 2},M,100,10,110,Conversation log\n" for i in range(1000))
    path = write(
        tmp_path, "b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" + rows
    )
    assert len(load_trace(path, rate_scale=2.5)) == pytest.approx(2500, rel=0.05)
    assert len(load_trace(path, rate_scale=0.3)) == pytest.approx(300, rel=0.2)
    doubled = load_trace(path, rate_scale=2.0)
    assert np.all(np.diff(doubled.arrival_s) >= 0)
    assert doubled.arrival_s.max() <= 1998.0 + 1e-9


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "missing.csv")
    unknown = write(tmp_path, "x.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(TraceError, match="cannot tell the trace format"):
        detect_format(unknown)
    with pytest.raises(TraceError, match="unknown trace format"):
        load_trace(unknown, trace_format="parquet")
    rates = write(tmp_path, "r.csv", "window_start_s,window_s,total_rate_rps\n0,60,1\n")
    with pytest.raises(TraceError, match="token percentiles"):
        load_trace(rates)
