"""A tiny authoritative DNS server for tests (dnspython's message API over UDP on 127.0.0.1): TXT records that
a test publishes, NXDOMAIN for everything else."""

from __future__ import annotations

import socket
import threading

import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset


class TxtServer:
    def __init__(self) -> None:
        self.records: dict[str, list[str]] = {}
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="test-dns", daemon=True)

    @property
    def nameserver(self) -> str:
        return f"127.0.0.1:{self.port}"

    def publish(self, name: str, value: str) -> None:
        self.records.setdefault(name.rstrip(".").lower(), []).append(value)

    def __enter__(self) -> TxtServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                wire, peer = self._sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            query = dns.message.from_wire(wire)
            answer = dns.message.make_response(query)
            question = query.question[0]
            name = question.name.to_text().rstrip(".").lower()
            if question.rdtype == dns.rdatatype.TXT and name in self.records:
                answer.answer.append(dns.rrset.from_text_list(
                    question.name, 60, dns.rdataclass.IN, dns.rdatatype.TXT,
                    ['"' + v.replace('"', '\\"') + '"' for v in self.records[name]]))
            else:
                answer.set_rcode(dns.rcode.NXDOMAIN)
            self._sock.sendto(answer.to_wire(), peer)
