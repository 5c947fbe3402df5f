"""The console's SQS and SNS calls: the protocol's own action handlers, so validation and errors are the API's.

A call acts as the console's viewer in the queue's region; like every request, its answer waits
until what it changed is durable.
"""

from __future__ import annotations

import uuid
from typing import Any

from queueserver import errors
from queueserver.auth import Principal
from queueserver.errors import ConsoleError
from queueserver.protocol.dispatch import ACTIONS
from queueserver.protocol.door import admit
from queueserver.protocol.error_codes import wire_error
from queueserver.protocol.params import RequestContext
from queueserver.protocol.sns.dispatch import SnsDispatcher
from queueserver.storage import QueueEngine


class SqsCalls:
    def __init__(self, engine: QueueEngine, home_region: str, account: str) -> None:
        self._engine = engine
        self._home_region = home_region
        self._account = account

    def queue_url(self, region: str, name: str, account: str | None = None, base_url: str = "http://console") -> str:
        """A queue URL the handlers resolve (they do not look at its host; a page shows it with the real one)."""
        return self._context(region, account, None, "", base_url).queue_url(name)

    def _context(self, region: str, account: str | None, caller: Principal | None, action: str,
                 base_url: str = "http://console") -> RequestContext:
        return RequestContext(region=region, account=caller.account if caller else account or self._account,
                              base_url=base_url, request_id=str(uuid.uuid4()),
                              sender_id=caller.key.key_id if caller else "console", home_region=self._home_region,
                              caller=caller, action=action)

    async def call(self, action: str, region: str, params: dict[str, Any], caller: Principal | None = None
                   ) -> dict[str, Any]:
        """Run `action` as `caller` (the logged-in key; None without credentials) through the same door as
        every SQS request: the action's whole rule is evaluated before its handler runs."""
        try:
            context = self._context(region, None, caller, action)
            admit(self._engine, context, params)
            result = await ACTIONS[action](self._engine, context, params)
            await self._engine.durable()
        except errors.SQSError as error:
            raise ConsoleError(wire_error(error).query_code, error.message) from None
        return result


class SnsCalls:
    """The console's SNS calls: the SNS dispatcher's own door and handlers (protocol/sns/), as the viewer."""

    def __init__(self, engine: QueueEngine, sns: SnsDispatcher, home_region: str, account: str) -> None:
        self._engine = engine
        self._sns = sns
        self._home_region = home_region
        self._account = account

    def may(self, action: str, caller: Principal | None, params: dict[str, Any], region: str) -> bool:
        """Whether the SNS door lets `caller` run `action` on what `params` name, acting in `region`."""
        if caller is not None:
            try:
                caller.act_in(region)
            except errors.SQSError:
                return False
        return self._sns.allows(action, caller, params)

    async def call(self, action: str, region: str, params: dict[str, Any], caller: Principal | None = None
                   ) -> dict[str, Any]:
        """Run `action` as `caller` through the SNS door (SnsAuthorization's RULES), as an SNS request is run;
        the answer waits until what it changed is durable."""
        try:
            if caller is not None:
                caller.act_in(region)
            context = RequestContext(region=region, account=caller.account if caller else self._account,
                                     base_url="http://console", request_id=str(uuid.uuid4()),
                                     sender_id=caller.key.key_id if caller else "console",
                                     home_region=self._home_region, caller=caller, action=action)
            result = await self._sns.run(action, context, params)
            await self._engine.durable()
        except errors.SQSError as error:
            raise ConsoleError(wire_error(error).query_code, error.message) from None
        return result
