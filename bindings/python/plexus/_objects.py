"""Collectives on picklable Python objects: all_gather_object, gather_object,
broadcast_object_list and scatter_object_list, as in torch.distributed.

They use pickle: unpickling runs code chosen by the sender, so use them only among trusted
peers. Objects travel as uint8 numpy arrays over the group's CPU backend."""
import pickle

import numpy as np

from plexus import _groups


def _encode(obj):
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _decode(array, size):
    return pickle.loads(array[:size].tobytes())


def _exchange_sizes(pg, size):
    sizes = np.zeros(pg.size(), dtype=np.int64)
    pg.all_gather_into_tensor(sizes, np.array([size], dtype=np.int64)).wait()
    return sizes


def all_gather_object(object_list, obj, group=None):
    """object_list[r] becomes group rank r's `obj` (object_list has world_size entries)."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    if len(object_list) != pg.size():
        raise ValueError("all_gather_object: object_list has %d entries; the group has %d ranks"
                         % (len(object_list), pg.size()))
    data = _encode(obj)
    sizes = _exchange_sizes(pg, data.size)
    longest = int(sizes.max())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:data.size] = data
    gathered = np.zeros(longest * pg.size(), dtype=np.uint8)
    pg.all_gather_into_tensor(gathered, padded).wait()
    for rank in range(pg.size()):
        object_list[rank] = _decode(gathered[rank * longest:], int(sizes[rank]))
    return None


def gather_object(obj, object_gather_list=None, dst=0, group=None):
    """At global rank `dst`, object_gather_list[r] becomes group rank r's `obj`."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, dst, "dst", "gather_object")
    is_root = pg.rank() == root
    if is_root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError("gather_object: the destination must pass object_gather_list with %d "
                         "entries" % pg.size())
    data = _encode(obj)
    sizes = _exchange_sizes(pg, data.size)
    longest = int(sizes.max())
    padded = np.zeros(longest, dtype=np.uint8)
    padded[:data.size] = data
    outputs = [np.zeros(longest, dtype=np.uint8) for _ in range(pg.size())] if is_root else None
    pg.gather(outputs, padded, root).wait()
    if is_root:
        for rank in range(pg.size()):
            object_gather_list[rank] = _decode(outputs[rank], int(sizes[rank]))
    return None


def broadcast_object_list(object_list, src=0, group=None, device=None):
    """Every rank's object_list (same length everywhere) becomes global rank `src`'s."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, src, "src", "broadcast_object_list")
    sizes = np.zeros(len(object_list), dtype=np.int64)
    if pg.rank() == root:
        encoded = [_encode(obj) for obj in object_list]
        sizes[:] = [data.size for data in encoded]
    pg.broadcast(sizes, root).wait()
    payload = np.zeros(int(sizes.sum()), dtype=np.uint8)
    if pg.rank() == root and payload.size:
        payload[:] = np.concatenate(encoded)
    pg.broadcast(payload, root).wait()
    if pg.rank() != root:
        offset = 0
        for i, size in enumerate(sizes):
            object_list[i] = _decode(payload[offset:], int(size))
            offset += int(size)
    return None


def scatter_object_list(scatter_object_output_list, scatter_object_input_list, src=0,
                        group=None):
    """scatter_object_output_list[0] becomes global rank `src`'s
    scatter_object_input_list[group rank]."""
    pg = _groups.resolve(group)
    if pg is None:
        return None
    root = _groups.group_rank(pg, src, "src", "scatter_object_list")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty "
                         "list")
    sizes = np.zeros(pg.size(), dtype=np.int64)
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            raise ValueError("scatter_object_list: the source must pass %d objects" % pg.size())
        encoded = [_encode(obj) for obj in scatter_object_input_list]
        sizes[:] = [data.size for data in encoded]
    pg.broadcast(sizes, root).wait()
    longest = int(sizes.max())
    inputs = None
    if pg.rank() == root:
        inputs = []
        for data in encoded:
            padded = np.zeros(longest, dtype=np.uint8)
            padded[:data.size] = data
            inputs.append(padded)
    output = np.zeros(longest, dtype=np.uint8)
    pg.scatter(output, inputs, root).wait()
    scatter_object_output_list[0] = _decode(output, int(sizes[pg.rank()]))
    return None


