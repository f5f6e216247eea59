"""The agents' local scheme (docs/cdc.md): the ``local_policy`` request and each agent's answer.

The CDC family tells every agent its scheme; the other families only hand back
a node that a previous controller left running one (scheme ``none``). What
each agent accepted or refused is kept here, in the family, and passed on to
the family a checkpoint restore builds, so an agent is not told twice.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from agent.client import AgentError
from controller.launchenv import scheme_peers
from controller.nodes import NodeInfo
from controller.policies.base import LocalScheme

log = logging.getLogger("controller.quantum")  # the scheduler's parts log as one

#: ``scheme`` of the local_policy request that hands a node back to the
#: controller's quanta (docs/cdc.md).
NO_SCHEME = "none"


class Agents(Protocol):
    """The agent pool as a family sees it (controller/nodes.py ``Pool``)."""

    def connected(self) -> dict[str, bool]: ...

    def status(self, node: str) -> dict[str, Any] | None: ...

    def agent_info(self, node: str) -> dict[str, Any]: ...

    def local_policy(self, node: str, data: dict[str, Any]) -> dict[str, Any]: ...


class LocalSchemes:
    """What each agent was told (``sent``), runs or refused (``state``), and who refused."""

    def __init__(self, agents: Agents, nodes: Sequence[NodeInfo]) -> None:
        self.agents = agents
        self.nodes = nodes
        self.state: dict[str, str] = {}  # node -> scheme it runs, or why not
        self.sent: dict[str, dict[str, Any]] = {}  # node -> last request it accepted
        self.refused: dict[str, object] = {}  # node -> the refusing agent's pid
        self._warned: set[str] = set()

    def request(self, node: str, scheme: LocalScheme | str, mpl: int = 1) -> dict[str, Any]:
        """The ``local_policy`` request for ``node``: scheme, MPL, settings, every peer."""
        sch = scheme if isinstance(scheme, LocalScheme) else LocalScheme(scheme)
        req: dict[str, Any] = {
            "node": node,
            "scheme": sch.name,
            "mpl": mpl,
            "spin_us": sch.spin_us,
            "boost": sch.boost,
            "peers": scheme_peers(self.nodes),
        }
        if sch.tick_ms is not None:  # else each agent decides at its own interval
            req["tick_ms"] = sch.tick_ms
        return req

    def tell(self, node: str, data: dict[str, Any], hello: Mapping[str, Any]) -> None:
        """Send ``data`` as the node's local_policy; a refusal is logged once per node.

        An agent that refused is not asked again until it is another process
        (its hello's pid differs): an agent too old for the request closes the
        connection on it, and asking again would only repeat that.
        """
        pid = hello.get("pid")
        if node in self.refused and self.refused[node] == pid and pid is not None:
            return
        try:
            self.agents.local_policy(node, data)
        except (AgentError, ConnectionError, OSError) as e:
            why = e.reason if isinstance(e, AgentError) else (str(e) or type(e).__name__)
            self.state[node] = f"refused: {why}"
            self.sent.pop(node, None)
            if isinstance(e, AgentError):
                self.refused[node] = pid
            if node not in self._warned:
                self._warned.add(node)
                log.warning(
                    "agent %s did not take local scheme %s (%s): it keeps its own scheduling,"
                    " so jobs there see LOCAL behaviour",
                    node,
                    data.get("scheme"),
                    why,
                )
            return
        self.refused.pop(node, None)
        self.sent[node] = data
        self.state[node] = str(data.get("scheme"))
        log.info("agent %s runs local scheme %s", node, data.get("scheme"))

    def hand_back(self, node: str, hello: Mapping[str, Any]) -> None:
        """A node whose agent still runs a scheme (its status says which) goes back to quanta."""
        st = self.agents.status(node)
        cdc = st.get("cdc") if st else None
        scheme = cdc.get("scheme") if isinstance(cdc, dict) else None
        if scheme not in (None, NO_SCHEME):
            log.info("agent %s still runs local scheme %s: handing it back to quanta", node, scheme)
            self.tell(node, self.request(node, NO_SCHEME), hello)
