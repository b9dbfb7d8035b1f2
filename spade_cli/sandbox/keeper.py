"""Every sandbox process is started from one long-lived thread.

bwrap's --die-with-parent (the kernel's parent-death signal) fires when the *thread*
that forked it exits, so a worker started from a short-lived thread would die with that
thread; started from here, a session may be created in one thread and used from another.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from concurrent.futures import Future


class Keeper:
    def __init__(self):
        self.lock = threading.Lock()
        self.jobs: queue.SimpleQueue | None = None

    def _run(self, jobs: queue.SimpleQueue) -> None:
        while True:
            fut, args, kwargs = jobs.get()
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(subprocess.Popen(*args, **kwargs))
                except BaseException as e:  # noqa: BLE001 - handed to the caller
                    fut.set_exception(e)

    def popen(self, *args, **kwargs) -> subprocess.Popen:
        """subprocess.Popen(*args, **kwargs), run on the keeper thread."""
        with self.lock:
            if self.jobs is None:
                self.jobs = queue.SimpleQueue()
                threading.Thread(
                    target=self._run, args=(self.jobs,), daemon=True, name="sandbox-keeper"
                ).start()
        fut: Future = Future()
        self.jobs.put((fut, args, kwargs))
        return fut.result()


spawn_from_keeper = Keeper().popen
