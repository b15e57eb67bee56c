"""Per-port packet capture (`--pcap DIR`), one `IFACE_in.pcap` and `IFACE_out.pcap` per port, as BMv2 names them.

Files are written with scapy's PcapWriter (Ethernet link type, flushed per packet) so tcpdump and scapy can
read them while the switch runs.
"""

from __future__ import annotations

import pathlib
import threading

from scapy.utils import PcapWriter

LINKTYPE_ETHERNET = 1


class PortCapture:
    """The in/out capture files of one port."""

    def __init__(self, folder: pathlib.Path, interface: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._in = PcapWriter(str(folder / f"{interface}_in.pcap"), linktype=LINKTYPE_ETHERNET, sync=True)
        self._out = PcapWriter(str(folder / f"{interface}_out.pcap"), linktype=LINKTYPE_ETHERNET, sync=True)

    def received(self, frame: bytes) -> None:
        with self._lock:
            self._in.write(frame)

    def sent(self, frame: bytes) -> None:
        with self._lock:
            self._out.write(frame)

    def close(self) -> None:
        with self._lock:
            self._in.close()
            self._out.close()
