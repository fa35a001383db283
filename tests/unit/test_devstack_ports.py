"""The harness's server ports (devstack.process.free_tcp_port) lie below the kernel's ephemeral range, where no
listener asking for port 0 (Spark's socket for a Python worker) and no outgoing connection can take them."""

from __future__ import annotations

import socket
from pathlib import Path

from ingester.devstack import process
from ingester.devstack.process import free_tcp_port


def test_ports_are_free_and_below_the_ephemeral_range() -> None:
    start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert process._ephemeral_start() == start
    ports = [free_tcp_port() for _ in range(50)]
    assert all(10000 <= port < start for port in ports), ports
    assert len(set(ports)) > 40, ports  # drawn at random: two test workers rarely pick the same
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports[0]))  # free when chosen
        held.listen()
        kernels = [socket.create_server(("127.0.0.1", 0)) for _ in range(20)]
        try:
            assert all(k.getsockname()[1] >= start for k in kernels)
        finally:
            for k in kernels:
                k.close()


def test_without_room_below_the_range_the_kernel_chooses(monkeypatch) -> None:
    start = process._ephemeral_start()
    monkeypatch.setattr(process, "_ephemeral_start", lambda: 10500)
    port = free_tcp_port()
    assert port >= start
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
