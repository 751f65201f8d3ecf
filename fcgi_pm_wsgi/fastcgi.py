"""The FastCGI wire format (FastCGI specification 1.0): record types and roles, the record
and name-value codecs, and a reader that takes whole records off a socket. Pure apart
from the reader; the connection that serves requests is fastcgi_connection.py."""

from .errors import ProtocolError
from .sockio import SocketReader

FCGI_VERSION_1 = 1
FCGI_HEADER_LEN = 8
FCGI_MAX_CONTENT = 65535

FCGI_BEGIN_REQUEST = 1
FCGI_ABORT_REQUEST = 2
FCGI_END_REQUEST = 3
FCGI_PARAMS = 4
FCGI_STDIN = 5
FCGI_STDOUT = 6
FCGI_STDERR = 7
FCGI_DATA = 8
FCGI_GET_VALUES = 9
FCGI_GET_VALUES_RESULT = 10
FCGI_UNKNOWN_TYPE = 11
KNOWN_TYPES = frozenset(range(1, 12))

FCGI_KEEP_CONN = 1
FCGI_RESPONDER = 1
FCGI_AUTHORIZER = 2

FCGI_REQUEST_COMPLETE = 0
FCGI_CANT_MPX_CONN = 1
FCGI_OVERLOADED = 2
FCGI_UNKNOWN_ROLE = 3

# What this process can do, answered to FCGI_GET_VALUES.
CAPABILITIES = {'FCGI_MAX_CONNS': '1', 'FCGI_MAX_REQS': '1', 'FCGI_MPXS_CONNS': '0'}

MAX_PARAMS_BYTES = 1024 * 1024


def record_header(rtype: int, request_id: int, length: int, padding: int = 0) -> bytes:
    return bytes((FCGI_VERSION_1, rtype, request_id >> 8, request_id & 0xFF, length >> 8, length & 0xFF, padding, 0))


def encode_record(rtype: int, request_id: int, content: bytes = b'') -> bytes:
    if len(content) > FCGI_MAX_CONTENT:
        raise ValueError(f'record content of {len(content)} bytes')
    pad = -len(content) & 7
    return record_header(rtype, request_id, len(content), pad) + bytes(content) + b'\0' * pad


def stream_records(rtype: int, request_id: int, data) -> list:
    """Buffers (headers and views of `data`) for one stream's records, in order; no copy."""
    view = memoryview(data).cast('B')
    out = []
    for i in range(0, len(view), FCGI_MAX_CONTENT):
        piece = view[i:i + FCGI_MAX_CONTENT]
        out.append(record_header(rtype, request_id, len(piece)))
        out.append(piece)
    return out


def encode_end_request(request_id: int, app_status: int, protocol_status: int) -> bytes:
    body = (app_status & 0xFFFFFFFF).to_bytes(4, 'big') + bytes((protocol_status, 0, 0, 0))
    return encode_record(FCGI_END_REQUEST, request_id, body)


def encode_length(n: int) -> bytes:
    return bytes((n,)) if n < 128 else (n | 0x80000000).to_bytes(4, 'big')


def encode_name_values(pairs) -> bytes:
    out = []
    for name, value in pairs:
        n = name.encode('latin-1') if isinstance(name, str) else name
        v = value.encode('latin-1') if isinstance(value, str) else value
        out += [encode_length(len(n)), encode_length(len(v)), n, v]
    return b''.join(out)


def decode_name_values(data: bytes) -> list:
    """[(name, value)] as latin-1 str (one char per byte). Raises ProtocolError."""
    pairs = []
    pos, end = 0, len(data)

    def length() -> int:
        nonlocal pos
        if pos >= end:
            raise ProtocolError('name-value pair cut short')
        b = data[pos]
        if b < 128:
            pos += 1
            return b
        if pos + 4 > end:
            raise ProtocolError('name-value length cut short')
        n = int.from_bytes(data[pos:pos + 4], 'big') & 0x7FFFFFFF
        pos += 4
        return n

    while pos < end:
        nlen = length()
        vlen = length()
        if pos + nlen + vlen > end:
            raise ProtocolError('name-value pair runs past its record')
        name = data[pos:pos + nlen].decode('latin-1')
        pos += nlen
        value = data[pos:pos + vlen].decode('latin-1')
        pos += vlen
        pairs.append((name, value))
    return pairs


class RecordReader(SocketReader):
    """A SocketReader that also takes whole FastCGI records."""

    def whole_record_buffered(self) -> bool:
        if self.buffered() < FCGI_HEADER_LEN:
            return False
        b, p = self.buf, self.pos
        return self.buffered() >= FCGI_HEADER_LEN + ((b[p + 4] << 8) | b[p + 5]) + b[p + 6]

    def read_record(self):
        """(type, request_id, content) or None on EOF at a record boundary."""
        head = self.exactly(FCGI_HEADER_LEN)
        if head is None:
            if self.buffered():
                raise ProtocolError('connection closed inside a record header')
            return None
        if head[0] != FCGI_VERSION_1:
            raise ProtocolError(f'FastCGI version {head[0]}')
        rtype = head[1]
        rid = (head[2] << 8) | head[3]
        length = (head[4] << 8) | head[5]
        total = length + head[6]
        body = self.exactly(total)
        if body is None:
            raise ProtocolError('connection closed inside a record')
        return rtype, rid, body[:length] if head[6] else body
