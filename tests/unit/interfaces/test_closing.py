"""A worker closes what its composition root registered, newest first, once."""

from interfaces.runtime.closing import close_worker, on_worker_exit


def test_a_worker_closes_what_was_registered_newest_first_and_once():
    closed: list[str] = []
    on_worker_exit(lambda: closed.append("stores"))
    on_worker_exit(lambda: closed.append("follower"))  # started after the stores: stopped before they close
    close_worker()
    close_worker()
    assert closed == ["follower", "stores"]
