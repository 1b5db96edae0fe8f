"""torchrun for one host whose rendezvous listens on loopback only: ``python -m gnnq.launch.loopback_run ARGS``.

torch's TCPStore server listens on every interface whatever host it is given; only a listening
socket handed over as ``master_listen_fd`` confines it. With ``--rdzv-endpoint=127.0.0.1:0
--local-addr=127.0.0.1`` (``torchrun_command``), the two stores torchrun's agent hosts (the c10d
rendezvous store and the store it shares with the ranks as MASTER_ADDR:MASTER_PORT) get such a
socket bound to 127.0.0.1, and gloo connects the ranks over the loopback interface.
"""

from __future__ import annotations

import os
import socket

import torch.distributed as dist
from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler
from torch.distributed.run import main as torchrun_main

from gnnq.launch.torchrun import LOOPBACK


def loopback_store(tcp_store):
    """``tcp_store`` whose servers for host 127.0.0.1 listen on a socket bound to 127.0.0.1 only."""

    def make(host_name, port, *args, is_master=False, **kwargs):
        if is_master and host_name == LOOPBACK and kwargs.get("master_listen_fd") is None:
            sock = socket.create_server((LOOPBACK, port))
            port = sock.getsockname()[1]
            kwargs["master_listen_fd"] = sock.detach()  # the store owns the socket from here on
        return tcp_store(host_name, port, *args, is_master=is_master, **kwargs)

    return make


def _shared_store_server(self, master_addr, master_port):
    # DynamicRendezvousHandler._create_tcp_store_server with the store listening on loopback
    return loopback_store(dist.TCPStore)(host_name=master_addr, port=master_port, is_master=True, multi_tenant=True)


def main() -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the ranks inherit it
    c10d_rendezvous_backend.TCPStore = loopback_store(c10d_rendezvous_backend.TCPStore)
    DynamicRendezvousHandler._create_tcp_store_server = _shared_store_server
    torchrun_main()


if __name__ == "__main__":
    main()
