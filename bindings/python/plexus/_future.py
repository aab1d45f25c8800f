"""The future a plexus Work hands out (Work.get_future()).

A concurrent.futures.Future, so result(timeout), done() and add_done_callback() work as usual,
plus torch.futures-style wait(), value() and then(). It is completed by the thread that
completes the operation; its result is the list of tensors the operation wrote.
"""
import concurrent.futures


class Future(concurrent.futures.Future):
    def wait(self, timeout=None):
        """Blocks until done (or `timeout` seconds) and returns the result or raises."""
        return self.result(timeout)

    def value(self):
        """The result of a completed future (raises its error); not for pending futures."""
        if not self.done():
            raise RuntimeError("Future.value() called before the future completed")
        return self.result(0)

    def then(self, callback):
        """A new Future completed with callback(self) once this one completes."""
        chained = Future()

        def run(done):
            try:
                chained.set_result(callback(done))
            except BaseException as error:  # Delivered to whoever waits on `chained`.
                chained.set_exception(error)

        self.add_done_callback(run)
        return chained
