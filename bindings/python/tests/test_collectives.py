"""Every collective of the plexus Python API at world sizes 1-4, with numpy arrays and torch
tensors, on the tcp and gloo backends, against numpy references computed on each rank from
every rank's (deterministic) input."""
import numpy as np
import pytest

import multiproc

N = 5  # Elements per rank in most checks (odd, so no size is a power of two).


def rank_input(rank, n=N, dtype=np.float32):
    """Rank `rank`'s input: small positive values, so sums and products stay exact."""
    values = (np.arange(n) * 7 + rank * 3) % 5 + 1
    if dtype == np.bool_:
        return (values + rank) % 2 == 0
    return values.astype(dtype)


class Checker:
    """Wraps arrays as the kind under test and records mismatches with the reference."""

    def __init__(self, kind, rank, world):
        self.kind, self.rank, self.world = kind, rank, world
        self.failures = []
        if kind == "torch":
            import torch
            self.torch = torch

    def make(self, array):
        array = np.ascontiguousarray(array).copy()
        if self.kind == "torch":
            return self.torch.from_numpy(array)
        return array

    def bf16(self, array):
        """A torch bfloat16 tensor (torch only)."""
        return self.torch.tensor(np.asarray(array, dtype=np.float32)).to(self.torch.bfloat16)

    def value(self, tensor):
        if self.kind == "torch":
            if tensor.dtype == self.torch.bfloat16:
                tensor = tensor.float()
            return tensor.numpy()
        return np.asarray(tensor)

    def expect(self, name, tensor, want, tolerance=0.0):
        got = self.value(tensor)
        want = np.asarray(want)
        if got.shape != want.shape:
            self.failures.append("%s: shape %s, want %s" % (name, got.shape, want.shape))
        elif tolerance:
            if not np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tolerance):
                self.failures.append("%s: got %s, want %s" % (name, got, want))
        elif not np.array_equal(got, want):
            self.failures.append("%s: got %s, want %s" % (name, got, want))


REDUCERS = {
    "SUM": lambda xs: np.sum(xs, axis=0),
    "PRODUCT": lambda xs: np.prod(xs, axis=0),
    "MIN": lambda xs: np.min(xs, axis=0),
    "MAX": lambda xs: np.max(xs, axis=0),
    "BAND": lambda xs: np.bitwise_and.reduce(xs, axis=0),
    "BOR": lambda xs: np.bitwise_or.reduce(xs, axis=0),
    "BXOR": lambda xs: np.bitwise_xor.reduce(xs, axis=0),
}
BOOL_REDUCERS = {"SUM": np.any, "MAX": np.any, "PRODUCT": np.all, "MIN": np.all}


def reference(op_name, dtype, world, n=N, scale=1.0):
    inputs = np.stack([rank_input(r, n, dtype) for r in range(world)])
    if dtype == np.bool_:
        if op_name in ("BAND", "BOR", "BXOR"):
            return REDUCERS[op_name](inputs)
        return BOOL_REDUCERS[op_name](inputs, axis=0)
    if op_name == "AVG":
        return (inputs.astype(np.float64).sum(axis=0) / world).astype(dtype)
    if op_name == "PREMUL_SUM":
        return (inputs.astype(np.float64) * scale).sum(axis=0).astype(dtype)
    wide = np.float64 if np.issubdtype(dtype, np.floating) else np.int64
    return REDUCERS[op_name](inputs.astype(wide)).astype(dtype)


def check_reductions(dist, c, rank, world):
    floats = [np.float16, np.float32, np.float64]
    ints = [np.uint8, np.int8, np.int16, np.int32, np.int64]
    if c.kind == "torch":
        floats, ints = [np.float32, np.float64], [np.uint8, np.int32, np.int64]
    cases = []
    for dtype in floats:
        cases += [(op, dtype) for op in ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "PREMUL_SUM")]
    for dtype in ints:
        cases += [(op, dtype) for op in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")]
    cases += [(op, np.bool_) for op in ("SUM", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR")]
    for op_name, dtype in cases:
        op = (dist.ReduceOp.premul_sum(0.5) if op_name == "PREMUL_SUM"
              else getattr(dist.ReduceOp, op_name))
        # float16 rounds through float; AVG may scale by 1/world rather than divide (1 ulp).
        tolerance = 1e-3 if dtype == np.float16 else (1e-6 if op_name == "AVG" else 0.0)
        name = "all_reduce %s %s" % (op_name, np.dtype(dtype).name)
        t = c.make(rank_input(rank, N, dtype))
        dist.all_reduce(t, op=op)
        c.expect(name, t, reference(op_name, dtype, world, scale=0.5), tolerance)
    # Ops named as strings and as torch's enum work too.
    t = c.make(rank_input(rank))
    dist.all_reduce(t, op="max")
    c.expect("all_reduce 'max'", t, reference("MAX", np.float32, world))
    if c.kind == "torch":
        import torch.distributed as torch_dist
        t = c.make(rank_input(rank))
        dist.all_reduce(t, op=torch_dist.ReduceOp.MIN)
        c.expect("all_reduce torch MIN", t, reference("MIN", np.float32, world))
        t = c.bf16(rank_input(rank))
        dist.all_reduce(t)
        c.expect("all_reduce bfloat16", t, reference("SUM", np.float32, world))
    # reduce to the last rank.
    t = c.make(rank_input(rank, N, np.int64))
    dist.reduce(t, dst=world - 1, op=dist.ReduceOp.SUM)
    want = reference("SUM", np.int64, world) if rank == world - 1 else rank_input(rank, N, np.int64)
    c.expect("reduce", t, want)
    # all_reduce_coalesced over tensors of different sizes.
    tensors = [c.make(rank_input(rank, n, np.float64)) for n in (1, 4, 9)]
    dist.all_reduce_coalesced(tensors, op=dist.ReduceOp.MAX)
    for n, t in zip((1, 4, 9), tensors):
        c.expect("all_reduce_coalesced n=%d" % n, t, reference("MAX", np.float64, world, n))
    # reduce_scatter and reduce_scatter_tensor.
    inputs = [c.make(rank_input(rank * world + r, 3)) for r in range(world)]
    out = c.make(np.zeros(3, np.float32))
    dist.reduce_scatter(out, inputs)
    c.expect("reduce_scatter", out, sum(rank_input(r * world + rank, 3) for r in range(world)))
    full = c.make(rank_input(rank, 3 * world, np.int32))
    out = c.make(np.zeros(3, np.int32))
    dist.reduce_scatter_tensor(out, full, op=dist.ReduceOp.MIN)
    c.expect("reduce_scatter_tensor", out,
             reference("MIN", np.int32, world, 3 * world)[rank * 3:rank * 3 + 3])


def check_data_movement(dist, c, rank, world):
    for src in range(world):
        t = c.make(rank_input(rank, N, np.int16) if rank == src else np.zeros(N, np.int16))
        dist.broadcast(t, src=src)
        c.expect("broadcast src=%d" % src, t, rank_input(src, N, np.int16))
    two_d = c.make(np.full((2, 3), rank, np.float32))
    dist.broadcast(two_d, src=0)
    c.expect("broadcast 2-D", two_d, np.zeros((2, 3), np.float32))
    outs = [c.make(np.zeros(N, np.float64)) for _ in range(world)]
    dist.all_gather(outs, c.make(rank_input(rank, N, np.float64)))
    for r, out in enumerate(outs):
        c.expect("all_gather [%d]" % r, out, rank_input(r, N, np.float64))
    out = c.make(np.zeros((world, N), np.uint8))
    dist.all_gather_into_tensor(out, c.make(rank_input(rank, N, np.uint8)))
    c.expect("all_gather_into_tensor", out, np.stack([rank_input(r, N, np.uint8)
                                                      for r in range(world)]))
    dst = world - 1
    gathered = [c.make(np.zeros(2, np.int64)) for _ in range(world)] if rank == dst else None
    dist.gather(c.make(np.full(2, rank * 3, np.int64)), gathered, dst=dst)
    if rank == dst:
        for r, g in enumerate(gathered):
            c.expect("gather [%d]" % r, g, np.full(2, r * 3))
    src = world // 2
    pieces = [c.make(np.full(3, 10 + r, np.float32)) for r in range(world)] if rank == src else None
    out = c.make(np.zeros(3, np.float32))
    dist.scatter(out, pieces, src=src)
    c.expect("scatter", out, np.full(3, 10 + rank))
    # all_to_all with a different size per peer: rank r sends r + q + 1 elements to rank q.
    inputs = [c.make(np.full(rank + q + 1, rank * 100 + q, np.int32)) for q in range(world)]
    outputs = [c.make(np.zeros(q + rank + 1, np.int32)) for q in range(world)]
    dist.all_to_all(outputs, inputs)
    for q, out in enumerate(outputs):
        c.expect("all_to_all from %d" % q, out, np.full(q + rank + 1, q * 100 + rank))
    # all_to_all_single with equal splits, then with explicit splits of 2-D rows.
    out = c.make(np.zeros(world * 2, np.float32))
    dist.all_to_all_single(out, c.make(np.arange(world * 2, dtype=np.float32) + 100 * rank))
    want = np.concatenate([np.arange(rank * 2, rank * 2 + 2) + 100 * q for q in range(world)])
    c.expect("all_to_all_single", out, want)
    in_splits = [rank + q + 1 for q in range(world)]
    out_splits = [q + rank + 1 for q in range(world)]
    rows = np.concatenate([np.full((s, 2), rank * 10 + q) for q, s in enumerate(in_splits)])
    out = c.make(np.zeros((sum(out_splits), 2), np.int64))
    dist.all_to_all_single(out, c.make(rows.astype(np.int64)), out_splits, in_splits)
    want = np.concatenate([np.full((s, 2), q * 10 + rank) for q, s in enumerate(out_splits)])
    c.expect("all_to_all_single splits", out, want)
    dist.barrier()


def check_point_to_point(dist, c, rank, world):
    if world == 1:
        return
    right, left = (rank + 1) % world, (rank - 1) % world
    # A ring: even ranks send first, odd ranks receive first (blocking calls).
    out = c.make(np.zeros(3, np.float32))
    if rank % 2 == 0:
        dist.send(c.make(np.full(3, rank, np.float32)), dst=right)
        sender = dist.recv(out, src=left)
    else:
        sender = dist.recv(out, src=left)
        dist.send(c.make(np.full(3, rank, np.float32)), dst=right)
    assert sender == left
    c.expect("send/recv ring", out, np.full(3, left))
    # isend/irecv with tags, and batch_isend_irecv.
    out_a, out_b = c.make(np.zeros(2, np.int64)), c.make(np.zeros(2, np.int64))
    works = [dist.irecv(out_b, src=left, tag=2), dist.irecv(out_a, src=left, tag=1),
             dist.isend(c.make(np.full(2, rank + 100, np.int64)), dst=right, tag=1),
             dist.isend(c.make(np.full(2, rank + 200, np.int64)), dst=right, tag=2)]
    for work in works:
        work.wait()
        assert work.is_completed() and work.is_success()
    c.expect("irecv tag 1", out_a, np.full(2, left + 100))
    c.expect("irecv tag 2", out_b, np.full(2, left + 200))
    out = c.make(np.zeros(4, np.float64))
    ops = [dist.P2POp(dist.isend, c.make(np.full(4, rank * 1.5)), right),
           dist.P2POp(dist.irecv, out, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    c.expect("batch_isend_irecv", out, np.full(4, left * 1.5))
    # Receive from any source: every other rank sends its rank to rank 0.
    if rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = c.make(np.zeros(1, np.int32))
            sender = dist.recv(t, tag=7)
            seen.add(sender)
            c.expect("recv any source", t, [sender])
        assert seen == set(range(1, world)), seen
    else:
        dist.send(c.make(np.array([rank], np.int32)), dst=0, tag=7)


def check_async_and_objects(dist, c, rank, world):
    t = c.make(np.full(1000, rank + 1, np.float32))
    work = dist.all_reduce(t, async_op=True)
    assert work.wait() is True and work.is_completed() and work.exception() is None
    stats = work.stats()
    assert stats.world_size == world
    if world > 1:
        assert stats.bytes_sent > 0 and stats.bytes_received > 0, stats
    future = dist.all_reduce(c.make(np.full(3, 1.0, np.float32)), async_op=True).get_future()
    chained = future.then(lambda f: float(c.value(f.value()[0]).sum()))
    (result,) = future.wait(30)
    c.expect("future result", result, np.full(3, world))
    assert chained.result(30) == 3.0 * world

    # A callback that issues a collective and waits for it there (torch's PowerSGD hook does).
    def nested(_):
        inner = c.make(np.full(2, rank + 1.0, np.float32))
        dist.all_reduce(inner, async_op=True).get_future().wait(30)
        return float(c.value(inner).sum())

    for _ in range(5):
        first = dist.all_reduce(c.make(np.ones(1, np.float32)), async_op=True)
        assert first.get_future().then(nested).result(30) == world * (world + 1.0)
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank, "tag": "x" * rank})
    assert objects == [{"rank": r, "tag": "x" * r} for r in range(world)], objects
    gathered = [None] * world if rank == 0 else None
    dist.gather_object(("from", rank), gathered, dst=0)
    if rank == 0:
        assert gathered == [("from", r) for r in range(world)], gathered
    items = [{"a": [1, 2, 3]}, "hello", 42] if rank == world - 1 else [None, None, None]
    dist.broadcast_object_list(items, src=world - 1)
    assert items == [{"a": [1, 2, 3]}, "hello", 42], items
    received = [None]
    dist.scatter_object_list(received, [list(range(r)) for r in range(world)] if rank == 0 else None,
                             src=0)
    assert received == [list(range(rank))], received
    dist.monitored_barrier(timeout=30)


def check_groups(dist, c, rank, world):
    assert dist.get_rank() == rank and dist.get_world_size() == world
    pair = dist.new_group([0, 1]) if world > 1 else dist.new_group([0])
    members = [0, 1] if world > 1 else [0]
    if rank in members:
        assert dist.get_rank(pair) == rank and dist.get_world_size(pair) == len(members)
        assert dist.get_process_group_ranks(pair) == members
        t = c.make(np.full(2, rank + 1, np.int64))
        dist.all_reduce(t, group=pair)
        c.expect("all_reduce on new_group", t, np.full(2, sum(m + 1 for m in members)))
        t = c.make(np.full(2, rank, np.int64))
        dist.broadcast(t, src=members[-1], group=pair)
        c.expect("broadcast on new_group (global src)", t, np.full(2, members[-1]))
    else:
        assert pair is dist.GroupMember.NON_GROUP_MEMBER
        assert dist.get_rank(pair) == -1
        assert dist.all_reduce(c.make(np.zeros(2)), group=pair) is None
    # Subgroup of the odd ranks, if any: global ranks translate.
    odd = [r for r in range(world) if r % 2 == 1]
    if odd:
        group = dist.new_group(odd)
        if rank in odd:
            assert dist.get_group_rank(group, rank) == odd.index(rank)
            assert dist.get_global_rank(group, 0) == odd[0]
            out = [c.make(np.zeros(1, np.int32)) for _ in odd]
            dist.all_gather(out, c.make(np.array([rank], np.int32)), group=group)
            for i, o in enumerate(out):
                c.expect("all_gather on odd group", o, [odd[i]])


def check_all(rank, world, kind):
    import plexus as dist
    c = Checker(kind, rank, world)
    for check in (check_reductions, check_data_movement, check_point_to_point,
                  check_async_and_objects, check_groups):
        check(dist, c, rank, world)
    return c.failures


def assert_no_failures(results):
    failures = ["rank %d: %s" % (rank, f) for rank, fs in enumerate(results) for f in fs]
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("backend", ["tcp", "gloo"])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_numpy_arrays(world, backend):
    assert_no_failures(multiproc.run_world(check_all, world, "numpy", backend=backend))


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_torch_tensors(world):
    pytest.importorskip("torch")
    assert_no_failures(multiproc.run_world(check_all, world, "torch"))
