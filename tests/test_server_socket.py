"""The socket ``dagwright server`` listens on: its answers leave without waiting (no Nagle).

asyncio disables Nagle's algorithm (TCP_NODELAY) only on sockets whose ``proto`` says TCP,
and an accepted socket inherits the listening socket's. A listening socket made with proto
0 made every answer's body wait for the client's delayed ACK of its headers: about 40 ms
added to each request (``benchmarks/api_latency.py``).
"""

from __future__ import annotations

import asyncio
import socket

from dagwright.server.running import bind


class Accepting(asyncio.Protocol):
    """Records whether an accepted connection's socket has TCP_NODELAY set."""

    def __init__(self, seen: asyncio.Future[int]) -> None:
        self.seen = seen

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        self.seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        transport.close()


async def nodelay_of_an_accepted_connection(listening: socket.socket) -> int:
    loop = asyncio.get_running_loop()
    seen: asyncio.Future[int] = loop.create_future()
    server = await loop.create_server(lambda: Accepting(seen), sock=listening)
    async with server:
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, timeout=10)
        finally:
            writer.close()


def test_connections_accepted_on_the_servers_socket_send_without_nagle() -> None:
    listening = bind("127.0.0.1", 0)
    assert listening.proto == socket.IPPROTO_TCP
    assert asyncio.run(nodelay_of_an_accepted_connection(listening)) != 0
