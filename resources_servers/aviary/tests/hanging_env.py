"""A calculator environment whose steps never finish, to exercise the adapter's step deadline."""

import asyncio

from aviary.core import Message, Messages

from resources_servers.aviary.gsm8k_env import CalculatorEnv


class HangingCalculatorEnv(CalculatorEnv):
    async def step(self, action: Message) -> tuple[Messages, float, bool, bool]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")
