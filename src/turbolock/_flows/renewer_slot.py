"""A client's one renewer: made by its first auto-renewed acquire, and never once close began
(``closing.stop_renewing_flow``). Written once for the threaded and asyncio, one-server and
Redlock clients."""

from __future__ import annotations

import contextlib
from typing import Any

from turbolock._flows.renewal_book import CLOSED_DURING_ACQUIRE
from turbolock.errors import ClientClosedError


class RenewerSlot:
    _renewer_instance: Any = None
    _renewals_stopped = False
    """Set by close: no renewer is made from then on."""
    _renewer_lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    """The threaded clients' own ``threading.Lock``: an acquire in one thread may be making the
    renewer while close stops renewals in another. asyncio's run in one thread and need none."""

    @property
    def renewing(self) -> int:
        """How many locks the renewer currently keeps."""
        renewer = self._renewer_instance
        return 0 if renewer is None else len(renewer)

    def _new_renewer(self) -> Any:
        raise NotImplementedError

    def _renewer(self) -> Any:
        renewer = self._renewer_instance
        if renewer is not None:
            return renewer
        with self._renewer_lock:
            if self._renewer_instance is None:
                if self._renewals_stopped:  # closed while an acquire ran
                    raise ClientClosedError(CLOSED_DURING_ACQUIRE)
                self._renewer_instance = self._new_renewer()
            return self._renewer_instance

    def _stop_renewals(self) -> Any:
        """From here no renewer is made (an acquire in flight that needs one raises
        ``ClientClosedError``); the one there is, if any."""
        with self._renewer_lock:
            self._renewals_stopped = True
            return self._renewer_instance
