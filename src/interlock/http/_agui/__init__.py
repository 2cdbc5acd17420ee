"""AG-UI 1.0 served beside the Genkit routes: ``AgentServer(agents, protocols=[AGUI()])``.

``POST /ag-ui/<agentName>`` takes a ``RunAgentInput`` and answers the run's AG-UI event
stream (:mod:`interlock.http._agui.app`); a paused turn ends with ``RUN_FINISHED`` whose
interrupt outcome lists each pending call, and a run whose ``resume`` answers them continues
it through the protocol seam (:mod:`interlock.http._agui.runs`). Needs the ``ag-ui`` extra
(PyPI ``ag-ui-protocol``).
"""

from __future__ import annotations

import contextlib

from .._asgi import Action
from .._mounts import ASGIApp, MountHost, no_lifespan

try:
    from .app import AgUiApp
except ModuleNotFoundError as exc:
    if exc.name is not None and exc.name.split(".")[0] == "ag_ui":
        raise ImportError(f"serving AG-UI needs {exc.name}: pip install 'interlock[ag-ui]'") from exc
    raise


class AGUI:
    """The AG-UI protocol as a :class:`~interlock.http._mounts.ProtocolMount`, served under ``prefix``."""

    def __init__(self, *, prefix: str = "/ag-ui") -> None:
        self._prefix = "/" + prefix.strip("/")

    @property
    def name(self) -> Action:
        return "ag-ui"

    @property
    def prefix(self) -> str:
        return self._prefix

    def app(self, host: MountHost) -> ASGIApp:
        return AgUiApp(host, self._prefix)

    def lifespan(self) -> contextlib.AbstractAsyncContextManager[None]:
        return no_lifespan()
