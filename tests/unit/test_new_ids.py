"""Fresh ids come from a pool filled 64 at a time: each is handed out once, in any thread, and not to a forked child."""

from __future__ import annotations

import os
import threading
import uuid

from interlock.records._sessions import new_id


def test_ids_across_many_pool_refills_are_distinct_uuid4s() -> None:
    ids = [new_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)


def test_threads_taking_ids_at_once_never_get_the_same_one() -> None:
    taken: list[list[str]] = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def take(into: list[str]) -> None:
        start.wait()
        into.extend(new_id() for _ in range(500))

    threads = [threading.Thread(target=take, args=(t,)) for t in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for t in taken for i in t]
    assert len(every) == 2000 and len(set(every)) == 2000


def test_a_forked_child_does_not_hand_out_the_parents_pooled_ids() -> None:
    new_id()  # the pool now holds ids the parent will hand out next
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, ",".join(new_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split(","))
    os.waitpid(pid, 0)
    parents = {new_id() for _ in range(10)}
    assert len(childs) == 10 and not childs & parents
