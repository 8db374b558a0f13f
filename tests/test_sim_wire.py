"""The pieces under the simulated kazoo connection, each on its own: the server's jute codec against kazoo's own
serializers (zkconsumer/sim/zk_jute.py), the cooperative tasks (tasks.py) and the network's streams (network.py)."""

from __future__ import annotations

from queue import Empty

import pytest
from kazoo.protocol.serialization import (
    CheckVersion,
    Connect,
    Create,
    Delete,
    Exists,
    GetChildren2,
    GetData,
    ReplyHeader,
    SetData,
    Transaction,
    Watch,
    int_struct,
)
from kazoo.security import OPEN_ACL_UNSAFE

from zkconsumer.sim import zk_jute
from zkconsumer.sim.network import Network
from zkconsumer.sim.scheduler import Scheduler
from zkconsumer.sim.tasks import Condition, Event, Lock, Queue, RLock, Runtime, SimulationError
from zkconsumer.sim.zk_jute import (
    CheckRequest,
    CreateRequest,
    DeleteRequest,
    MalformedFrame,
    OpCode,
    PathRequest,
    SetDataRequest,
    SetWatchesRequest,
    Writer,
)
from zkconsumer.sim.zk_tree import Stat


def kazoo_frame(request, xid: int) -> bytes:  # noqa: ANN001 - any of kazoo's request records
    """A request's body as kazoo's ConnectionHandler._submit frames it (without the length)."""
    return int_struct.pack(xid) + int_struct.pack(request.type) + bytes(request.serialize())


def test_the_handshake_decodes_what_kazoo_sends_and_kazoo_reads_what_it_encodes() -> None:
    sent = Connect(0, 42, 10_000, 7, b"p" * 16, False).serialize()
    assert zk_jute.decode_connect(bytes(sent)) == zk_jute.ConnectRequest(0, 42, 10_000, 7, b"p" * 16, False)
    frame = zk_jute.encode_connect_response(zk_jute.ConnectResponse(0, 6_000, 9, b"q" * 16))
    assert int_struct.unpack(frame[:4])[0] == len(frame) - 4
    got, _ = Connect.deserialize(frame[4:], 0)
    assert (got.time_out, got.session_id, got.passwd, got.read_only) == (6_000, 9, b"q" * 16, False)


@pytest.mark.parametrize(("request_", "expected"), [
    (Create("/a/b", b"data", OPEN_ACL_UNSAFE, 3), CreateRequest("/a/b", b"data", 3)),
    (Delete("/a", 4), DeleteRequest("/a", 4)),
    (SetData("/a", b"", -1), SetDataRequest("/a", b"", -1)),
    (GetData("/a", True), PathRequest("/a", True)),
    (Exists("/a", None), PathRequest("/a", False)),
    (GetChildren2("/", True), PathRequest("/", True)),
])
def test_requests_decode_from_kazoos_bytes(request_, expected) -> None:  # noqa: ANN001
    decoded = zk_jute.decode_request(kazoo_frame(request_, 5))
    assert (decoded.xid, decoded.op, decoded.body) == (5, OpCode(request_.type), expected)


def test_a_multi_and_set_watches_decode() -> None:
    tx = Transaction([Create("/x", b"1", OPEN_ACL_UNSAFE, 0), Delete("/y", 2), CheckVersion("/x", 0)])
    decoded = zk_jute.decode_request(kazoo_frame(tx, 9))
    assert decoded.body.ops == ((OpCode.CREATE, CreateRequest("/x", b"1", 0)), (OpCode.DELETE, DeleteRequest("/y", 2)),
                                (OpCode.CHECK, CheckRequest("/x", 0)))
    body = Writer().int(-8).int(OpCode.SET_WATCHES).long(77).strings(["/d"]).strings([]).strings(["/c", "/e"])
    assert zk_jute.decode_request(bytes(body.out)).body == SetWatchesRequest(77, ("/d",), (), ("/c", "/e"))


def test_replies_and_notifications_read_back_through_kazoo() -> None:
    stat = Stat(1, 2, 3, 4, 5, 6, 0, 8, 4, 10, 11)
    frame = zk_jute.encode_reply(12, 99, 0, Writer().buffer(b"data").stat(stat))
    header, offset = ReplyHeader.deserialize(frame[4:], 0)
    assert header == ReplyHeader(12, 99, 0)
    data, znode = GetData.deserialize(frame[4:], offset)
    assert data == b"data" and (znode.czxid, znode.version, znode.numChildren, znode.pzxid) == (1, 5, 10, 11)
    failed = zk_jute.encode_reply(13, 99, -101, Writer().string("ignored"))
    assert len(failed) == 4 + 16  # an error reply carries no record
    event = zk_jute.encode_notification(2, "/gone")
    header, offset = ReplyHeader.deserialize(event[4:], 0)
    assert header.xid == -1 and Watch.deserialize(event[4:], offset)[0] == Watch(2, 3, "/gone")


def test_a_multis_results_read_back_through_kazoo() -> None:
    out = Writer()
    zk_jute.multi_header(out, OpCode.CREATE, False, 0).string("/x")
    zk_jute.multi_header(out, OpCode.DELETE, False, 0)
    zk_jute.multi_header(out, -1, True, -1)
    assert Transaction.deserialize(bytes(out.out), 0) == ["/x", True]
    out = Writer()
    for code in (0, -101, -2):
        zk_jute.multi_header(out, OpCode.ERROR, False, code).int(code)
    zk_jute.multi_header(out, -1, True, -1)
    assert [type(r).__name__ for r in Transaction.deserialize(bytes(out.out), 0)] == [
        "RolledBackError", "NoNodeError", "RuntimeInconsistency"]


def test_frames_are_split_from_a_stream_wherever_it_breaks() -> None:
    frames = [zk_jute.encode_reply(i, i, 0, Writer().string("x" * i)) for i in range(1, 4)]
    stream = b"".join(frames)
    buffer, got = bytearray(), []
    for i in range(0, len(stream), 7):
        buffer += stream[i:i + 7]
        got += zk_jute.split_frames(buffer)
    assert got == [f[4:] for f in frames] and not buffer
    with pytest.raises(MalformedFrame):
        zk_jute.decode_request(b"\x00\x00\x00\x01")


# ----------------------------------------------------------------------------------------------- tasks
def test_locks_conditions_and_queues_park_tasks_in_virtual_time() -> None:
    rt = Runtime(Scheduler(seed=3))
    log: list[tuple[int, str]] = []

    def holder(lock: Lock, name: str, hold_s: float) -> None:
        with lock:
            log.append((rt.scheduler.now_ms, f"{name} in"))
            rt.sleep(hold_s)

    def main() -> None:
        lock = Lock(rt)
        tasks = [rt.spawn(holder, lock, n, 1.0) for n in "ab"]
        for t in tasks:
            t.join()
        rlock = RLock(rt)
        with rlock, rlock:
            log.append((rt.scheduler.now_ms, "re-entered"))
        cond, q = Condition(rt), Queue(rt)
        with cond:
            assert cond.wait(0.25) is False
        with pytest.raises(Empty):
            q.get(timeout=0.5)
        rt.spawn(lambda: (rt.sleep(2), q.put("late")))
        item = q.get()
        log.append((rt.scheduler.now_ms, item))

    rt.run(main)
    assert log == [(0, "a in"), (1000, "b in"), (2000, "re-entered"), (4750, "late")]


def test_a_deadlock_and_blocking_outside_a_task_are_errors() -> None:
    rt = Runtime(Scheduler())
    with pytest.raises(SimulationError, match="deadlock"):
        rt.run(lambda: Event(rt).wait())
    with pytest.raises(SimulationError, match="only a task"):
        Event(rt).wait()


def test_a_partition_holds_a_streams_bytes_and_the_heal_delivers_them_in_order() -> None:
    rt = Runtime(Scheduler(seed=1))
    net = Network(rt)
    received: list[tuple[int, bytes]] = []

    def accept(endpoint) -> None:  # noqa: ANN001
        endpoint.on_data = lambda data: received.append((rt.scheduler.now_ms, data))

    net.listen(("10.0.0.1", 1), accept)
    net.set_delay_us("h", 5000, 7000)

    def main() -> None:
        sock = net.connect("h", ("10.0.0.1", 1), timeout=1.0)
        assert rt.scheduler.now_ms == 12  # the handshake's round trip
        sock.send(b"a")
        net.partition("h")
        sock.send(b"b")
        rt.sleep(1.0)
        net.heal("h")
        sock.send(b"c")
        rt.sleep(1.0)

    rt.run(main)
    assert received == [(1017, b"a"), (1017, b"b"), (1017, b"c")]


def test_the_labs_slow_link_holds_data_but_not_the_handshake_and_a_close_drops_what_it_held() -> None:
    """slow-zk is the lab's TCP proxy (zkconsumer/lab/faults/proxy.py): a client connects to it on its own host at
    once, every chunk waits the latency each way, and a close goes through at once, the chunks still held lost."""
    rt = Runtime(Scheduler(seed=None))
    net = Network(rt)
    received: list[tuple[int, object]] = []

    def accept(endpoint) -> None:  # noqa: ANN001
        endpoint.on_data = lambda data: received.append((rt.scheduler.now_us, data))
        endpoint.on_close = lambda: received.append((rt.scheduler.now_us, "closed"))

    net.listen(("10.0.0.1", 1), accept)
    net.set_delay_us("h", 200)
    net.set_proxy_latency_us("h", 1_500_000)

    def main() -> None:
        sock = net.connect("h", ("10.0.0.1", 1), timeout=1.0)
        assert rt.scheduler.now_us == 400  # the handshake: the base delay, not the proxy's
        sock.send(b"a")  # due at 400 + 200 + 1.5 s
        rt.sleep(1.0)
        net.set_proxy_latency_us("h", 0)
        sock.send(b"b")  # the link is fast again, but a stream never overtakes what was sent before
        rt.sleep(1.0)
        sock.send(b"c")
        net.set_proxy_latency_us("h", 1_500_000)
        sock.send(b"d")  # held by the proxy...
        sock.close()  # ...and lost: the close reaches the server at once
        rt.sleep(2.0)

    rt.run(main)
    assert received == [(1_500_600, b"a"), (1_500_600, b"b"), (2_000_600, b"c"), (2_000_600, "closed")]
