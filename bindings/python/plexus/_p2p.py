"""Point-to-point calls (send, recv, isend, irecv, batch_isend_irecv with P2POp) and
monitored_barrier, with torch.distributed's signatures. Peers are global ranks."""
import datetime

from plexus import _groups, _plexus


def _peer(pg, rank, what, op):
    peer = _groups.group_rank(pg, rank, what, op)
    if peer == pg.rank():
        raise ValueError("%s: %s rank %d is this rank" % (op, what, rank))
    return peer


def isend(tensor, dst, group=None, tag=0):
    """Starts sending `tensor` to global rank `dst`; returns a Work (None off the group)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    return pg.send(tensor, _peer(pg, dst, "dst", "isend"), int(tag))


def irecv(tensor, src=None, group=None, tag=0):
    """Starts receiving into `tensor` from global rank `src` (None: any rank; the Work's
    source_rank() then names the group rank it came from)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    peer = -1 if src is None else _peer(pg, src, "src", "irecv")
    return pg.recv(tensor, peer, int(tag))


def send(tensor, dst, group=None, tag=0):
    """Sends `tensor` to global rank `dst` and waits until it is sent."""
    work = isend(tensor, dst, group, tag)
    if work is not None:
        work.wait()


def recv(tensor, src=None, group=None, tag=0):
    """Receives into `tensor` from global rank `src` (None: any rank); returns the sender's
    global rank, or -1 when this rank is not in the group."""
    pg = _groups.resolve(group)
    if pg is None:
        return -1
    work = irecv(tensor, src, group, tag)
    work.wait()
    if src is not None:
        return src
    return pg.global_ranks[work.source_rank()]


class P2POp:
    """One operation of batch_isend_irecv: P2POp(plexus.isend or plexus.irecv, tensor, peer)."""

    def __init__(self, op, tensor, peer, group=None, tag=0):
        if op not in (isend, irecv):
            raise ValueError("P2POp: op must be plexus.isend or plexus.irecv, got %r" % (op,))
        self.op = op
        self.tensor = tensor
        self.peer = peer
        self.group = group
        self.tag = tag

    def __repr__(self):
        return "P2POp(%s, peer=%d, tag=%d)" % (self.op.__name__, self.peer, self.tag)


def batch_isend_irecv(p2p_op_list):
    """Starts every P2POp in the list together and returns a list holding one Work for the
    batch (as torch does for NCCL). On nccl the batch is one NCCL group, so ranks that send to
    and receive from each other cannot deadlock on stream order."""
    if not isinstance(p2p_op_list, (list, tuple)) or not all(
            isinstance(p2p, P2POp) for p2p in p2p_op_list):
        raise ValueError("batch_isend_irecv: expected a list of P2POp")
    groups = {id(p2p.group) for p2p in p2p_op_list}
    if len(groups) > 1:
        raise ValueError("batch_isend_irecv: all ops must use the same group")
    if not p2p_op_list:
        raise ValueError("batch_isend_irecv: the list is empty")
    pg = _groups.resolve(p2p_op_list[0].group)
    if pg is None:
        return []
    batch = []
    for p2p in p2p_op_list:
        sending = p2p.op is isend
        peer = _peer(pg, p2p.peer, "dst" if sending else "src", "batch_isend_irecv")
        batch.append((sending, p2p.tensor, peer, int(p2p.tag)))
    return [pg.batch_p2p(batch)]


_monitored_rounds = {}  # Group name -> monitored_barrier calls so far (same on every rank).


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier that names who is missing: rank 0 of the group waits up to `timeout` (default:
    the group's) for every other rank and raises DeadlineExceededError listing the ranks (global)
    that did not arrive - the first one, or all of them with wait_all_ranks=True. The others
    wait for rank 0's release. Runs over the group's store, not its backend, so it also works
    when the data path is stuck."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    if timeout is None:
        timeout = pg.timeout
    elif not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    round_number = _monitored_rounds.get(pg.name, 0)
    _monitored_rounds[pg.name] = round_number + 1
    store = pg.store
    prefix = "monitored_barrier/%d/" % round_number
    if pg.rank() != 0:
        store.set(prefix + "arrived/%d" % pg.rank(), b"1")
        try:
            store.wait([prefix + "released"], timeout)
        except _plexus.DeadlineExceededError:
            raise _plexus.DeadlineExceededError(
                "monitored_barrier: rank %d was not released by rank %d within %s (another "
                "rank is missing, or rank %d is)" % (pg.global_ranks[pg.rank()],
                                                     pg.global_ranks[0], timeout,
                                                     pg.global_ranks[0])) from None
        return None
    deadline = datetime.datetime.now() + timeout
    missing = []
    for rank in range(1, pg.size()):
        key = prefix + "arrived/%d" % rank
        if missing and wait_all_ranks:
            if not store.check([key]):
                missing.append(rank)
            continue
        remaining = max(deadline - datetime.datetime.now(), datetime.timedelta(0))
        try:
            store.wait([key], remaining)
        except _plexus.DeadlineExceededError:
            missing.append(rank)
            if not wait_all_ranks:
                break
    if missing:
        names = ", ".join(str(pg.global_ranks[rank]) for rank in missing)
        raise _plexus.DeadlineExceededError(
            "monitored_barrier: rank%s %s failed to pass monitored_barrier within %s"
            % ("s" if len(missing) > 1 else "", names, timeout))
    for rank in range(1, pg.size()):
        store.delete_key(prefix + "arrived/%d" % rank)
    store.set(prefix + "released", b"1")
    return None
