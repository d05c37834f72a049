"""The one vLLM stand-in for tests: hack/vllm-standin/server.py (the image the e2e tier
runs in place of vLLM), served in-process on a free loopback port."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from types import ModuleType

from tests.conftest import REPO_ROOT
from tests.toolkit.scripts import load_script

SERVER = REPO_ROOT / "hack" / "vllm-standin" / "server.py"


def standin_module() -> ModuleType:
    return load_script(str(SERVER.relative_to(REPO_ROOT)), "vllm_standin_server")


@contextmanager
def vllm_standin(
    served: str = "stand-in", *, api_key: str | None = None, max_num_seqs: int = 256
) -> Iterator[int]:
    """The stand-in serving `served` on 127.0.0.1; yields its port. With `api_key`,
    /v1/* asks for `Authorization: Bearer <key>` as vLLM does with --api-key."""
    module = standin_module()
    state = module.State(served, max_num_seqs=max_num_seqs, api_key=api_key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), module.handler_for(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
