"""A ``mooncake_master`` on this machine's loopback, for tests, benchmarks
and trying the Mooncake store (docs/remote.md): free ports, the embedded
HTTP metadata server, stopped at the end; and its eviction count."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LocalMaster:
    master: str  # host:port of the RPC service (AUXSTORE_MOONCAKE_MASTER)
    metadata: str  # the embedded metadata server's URL (AUXSTORE_MOONCAKE_METADATA)
    metrics: str  # the master's Prometheus metrics

    def evictions(self) -> int:
        """Objects the master evicted so far (its ``master_evicted_key_count``)."""
        with urllib.request.urlopen(self.metrics, timeout=10) as answer:
            text = answer.read().decode()
        found = re.search(r"^master_evicted_key_count (\d+)", text, re.MULTILINE)
        return int(found.group(1)) if found else 0


def master_binary() -> str | None:
    """The ``mooncake_master`` the Mooncake wheel installed beside this Python, or on PATH."""
    beside = Path(sys.executable).parent / "mooncake_master"
    return str(beside) if beside.exists() else shutil.which("mooncake_master")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def local_master(
    *, lease_ms: int = 100, eviction_ratio: float = 0.05, binary: str | None = None
) -> Iterator[LocalMaster]:
    """Start a master on free loopback ports; stop it on exit. ``lease_ms``:
    how long a read keeps an object from eviction and removal (Mooncake's
    default is 10 s; short here, so a small pool frees room quickly).
    ``eviction_ratio``: the share of objects each eviction frees (Mooncake's
    default, 0.05; more makes recent objects go too)."""
    binary = binary or master_binary()
    if binary is None:
        raise FileNotFoundError("no mooncake_master: pip install 'auxstore[mooncake]'")
    rpc, http, metrics = _free_port(), _free_port(), _free_port()
    command = [
        binary,
        f"--rpc_port={rpc}",
        "--rpc_address=127.0.0.1",
        "--enable_http_metadata_server=true",
        "--http_metadata_server_host=127.0.0.1",
        f"--http_metadata_server_port={http}",
        f"--metrics_port={metrics}",
        f"--default_kv_lease_ttl={lease_ms}",
        f"--eviction_ratio={eviction_ratio}",
    ]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            for port in (rpc, http, metrics):
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        if process.poll() is not None or time.monotonic() > deadline:
                            log.seek(0)
                            tail = log.read()[-2000:].decode(errors="replace")
                            raise RuntimeError(f"mooncake_master did not start: {tail}") from None
                        time.sleep(0.05)
            yield LocalMaster(
                f"127.0.0.1:{rpc}", f"http://127.0.0.1:{http}/metadata", f"http://127.0.0.1:{metrics}/metrics"
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
